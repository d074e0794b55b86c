package chartcheck

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/engine"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer/json"
	"k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/yaml"
)

const (
	chartDir  = "../helm/mooncake"
	release   = "kv"
	namespace = "inference"
)

// valueSets are the chart's defaults and two sets that turn on what the defaults leave off.
var valueSets = map[string]map[string]any{
	"defaults": {},
	"daemonset-hugepages-monitoring": {
		"master": map[string]any{"replicas": 5, "antiAffinity": "soft"},
		"worker": map[string]any{
			"kind": "DaemonSet", "globalSegmentSize": "16GiB",
			"nvme":      map[string]any{"hostPath": "/mnt/nvme/mooncake"},
			"hugePages": map[string]any{"enabled": true},
			"warmUp":    true,
		},
		"serviceMonitor":   map[string]any{"enabled": true, "labels": map[string]any{"release": "prometheus"}},
		"grafanaDashboard": map[string]any{"enabled": true},
	},
	"tuned": {
		"clusterId": "prod_a",
		"master": map[string]any{
			"bootstrap": false, "raftFsync": false, "maxValueSize": "1GiB", "putTimeout": "30s", "clientTTL": "20s",
			"extraArgs":   []any{"--log_level=debug"},
			"persistence": map[string]any{"storageClassName": "fast", "size": "20Gi"},
		},
		"worker": map[string]any{
			"replicas": 4, "persistence": "durable", "ssdCapacity": "500GiB", "sharedMemory": false,
			"nvme": map[string]any{"hostPath": "/data/nvme"}, "antiAffinity": "hard", "shutdownTimeout": "2m",
		},
		"clientConfig":        map[string]any{"enabled": false},
		"podDisruptionBudget": map[string]any{"enabled": false},
		"service":             map[string]any{"type": "LoadBalancer"},
	},
}

// TestChart renders each value set and validates what it renders.
func TestChart(t *testing.T) {
	help := binaryHelp(t)
	kube := newKubeSchemas(t)
	for name, vals := range valueSets {
		t.Run(name, func(t *testing.T) {
			objs := render(t, kube, vals)
			kinds := map[string]int{}
			for _, o := range objs {
				kinds[o.GetObjectKind().GroupVersionKind().Kind]++
			}
			t.Logf("%d objects: %v", len(objs), kinds)
			for _, want := range []string{"StatefulSet", "Service", "ConfigMap", "PodDisruptionBudget", "ServiceMonitor"} {
				if kinds[want] == 0 && wantKind(name, want) {
					t.Errorf("no %s rendered", want)
				}
			}
			checkMasters(t, objs)
			checkWorkers(t, objs, name)
			checkFlags(t, objs, help)
		})
	}
}

// wantKind says which kinds a value set must render.
func wantKind(set, kind string) bool {
	switch kind {
	case "ServiceMonitor":
		return set == "daemonset-hugepages-monitoring"
	case "ConfigMap", "PodDisruptionBudget":
		return set != "tuned"
	}
	return true
}

// render runs helm's engine as `helm template` does, validates every object with kubeconform
// against the Kubernetes JSON schemas (and the ServiceMonitor against its CRD's schema), and
// decodes every core object strictly into its Kubernetes API type, which also parses the
// quantities the schemas take as any string or number: an unknown field, a wrong type, a
// missing required field or a bad quantity fails the test.
func render(t *testing.T, kube *kubeSchemas, vals map[string]any) []runtime.Object {
	t.Helper()
	ch, err := loader.Load(chartDir)
	if err != nil {
		t.Fatal(err)
	}
	if err := ch.Validate(); err != nil {
		t.Fatalf("Chart.yaml: %v", err)
	}
	rv, err := chartutil.ToRenderValues(ch, vals, chartutil.ReleaseOptions{Name: release, Namespace: namespace, IsInstall: true}, chartutil.DefaultCapabilities)
	if err != nil {
		t.Fatal(err)
	}
	files, err := engine.Render(ch, rv)
	if err != nil {
		t.Fatalf("render: %v", err)
	}
	strict := json.NewSerializerWithOptions(json.DefaultMetaFactory, scheme.Scheme, scheme.Scheme, json.SerializerOptions{Yaml: true, Strict: true})
	var objs []runtime.Object
	names := slices.Sorted(func(yield func(string) bool) {
		for n := range files {
			if !yield(n) {
				return
			}
		}
	})
	for _, fn := range names {
		if strings.HasSuffix(fn, "NOTES.txt") {
			continue
		}
		for i, doc := range strings.Split(files[fn], "\n---") {
			if strings.TrimSpace(stripComments(doc)) == "" {
				continue
			}
			var u unstructured.Unstructured
			j, err := yaml.YAMLToJSON([]byte(doc))
			if err != nil {
				t.Fatalf("%s #%d: not YAML: %v\n%s", fn, i, err, doc)
			}
			if err := u.UnmarshalJSON(j); err != nil {
				t.Fatalf("%s #%d: %v", fn, i, err)
			}
			if err := kube.validate(fn, []byte(doc)); err != nil {
				t.Fatalf("%s #%d (%s %s): %v\n%s", fn, i, u.GetKind(), u.GetName(), err, doc)
			}
			if u.GetAPIVersion() == "monitoring.coreos.com/v1" {
				checkServiceMonitor(t, &u)
				objs = append(objs, &u)
				continue
			}
			obj, _, err := strict.Decode([]byte(doc), nil, nil)
			if err != nil {
				t.Fatalf("%s #%d (%s %s): not a valid Kubernetes object: %v\n%s", fn, i, u.GetKind(), u.GetName(), err, doc)
			}
			if n := u.GetName(); n == "" || len(n) > 63 {
				t.Fatalf("%s: name %q", u.GetKind(), n)
			}
			objs = append(objs, obj)
		}
	}
	return objs
}

func stripComments(doc string) string {
	var b strings.Builder
	for _, l := range strings.Split(doc, "\n") {
		if !strings.HasPrefix(strings.TrimSpace(l), "#") {
			b.WriteString(l + "\n")
		}
	}
	return b.String()
}

// checkServiceMonitor: the one object outside the core API types (kubeconform has checked it
// against the Prometheus Operator's schema) scrapes the metrics port.
func checkServiceMonitor(t *testing.T, u *unstructured.Unstructured) {
	t.Helper()
	eps, _, _ := unstructured.NestedSlice(u.Object, "spec", "endpoints")
	if u.GetKind() != "ServiceMonitor" || len(eps) != 1 {
		t.Fatalf("ServiceMonitor: %v", u.Object)
	}
	if port := eps[0].(map[string]any)["port"]; port != "metrics" {
		t.Fatalf("ServiceMonitor scrapes port %v, want metrics", port)
	}
}

func find[T runtime.Object](objs []runtime.Object, match func(T) bool) []T {
	var out []T
	for _, o := range objs {
		if x, ok := o.(T); ok && match(x) {
			out = append(out, x)
		}
	}
	return out
}

func component(labels map[string]string) string { return labels["app.kubernetes.io/component"] }

// argValue returns the value of --name=VALUE in args.
func argValue(args []string, name string) string {
	for _, a := range args {
		if v, ok := strings.CutPrefix(a, "--"+name+"="); ok {
			return v
		}
	}
	return ""
}

// checkMasters: the masters' raft peers are the names the StatefulSet gives its pods through
// its headless Service, and each master's own addresses are its entry in them.
func checkMasters(t *testing.T, objs []runtime.Object) {
	t.Helper()
	sts := find(objs, func(s *appsv1.StatefulSet) bool { return component(s.Labels) == "master" })
	if len(sts) != 1 {
		t.Fatalf("%d master StatefulSets", len(sts))
	}
	s := sts[0]
	svc := find(objs, func(v *corev1.Service) bool { return v.Name == s.Spec.ServiceName })
	if len(svc) != 1 || svc[0].Spec.ClusterIP != corev1.ClusterIPNone || !svc[0].Spec.PublishNotReadyAddresses {
		t.Fatalf("the masters' serviceName %q is not a headless Service publishing not-ready addresses", s.Spec.ServiceName)
	}
	if s.Spec.PodManagementPolicy != appsv1.ParallelPodManagement {
		t.Fatalf("masters start %s: a master is ready only with a quorum, so they must start in parallel", s.Spec.PodManagementPolicy)
	}
	c := s.Spec.Template.Spec.Containers[0]
	var raftPort int32
	for _, p := range c.Ports {
		if p.Name == "raft" {
			raftPort = p.ContainerPort
		}
	}
	var want []string
	for i := range int(*s.Spec.Replicas) {
		pod := fmt.Sprintf("%s-%d", s.Name, i)
		want = append(want, fmt.Sprintf("%s=%s.%s.%s.svc.cluster.local:%d", pod, pod, s.Spec.ServiceName, namespace, raftPort))
	}
	if slices.Contains(c.Args, "--join") {
		if argValue(c.Args, "peers") != "" {
			t.Fatalf("masters with both --join and --peers: %q", c.Args)
		}
	} else if got := argValue(c.Args, "peers"); got != strings.Join(want, ",") {
		t.Fatalf("--peers=%s\nwant    %s (the StatefulSet's pod names)", got, strings.Join(want, ","))
	}
	self := fmt.Sprintf("$(POD_NAME).%s.%s.svc.cluster.local:%d", s.Spec.ServiceName, namespace, raftPort)
	if got := argValue(c.Args, "raft_address"); got != self || argValue(c.Args, "id") != "$(POD_NAME)" {
		t.Fatalf("--raft_address=%s --id=%s: want %s and the pod name", got, argValue(c.Args, "id"), self)
	}
	if p := c.ReadinessProbe; p == nil || p.HTTPGet == nil || p.HTTPGet.Path != "/health" {
		t.Fatalf("masters' readiness probe: %+v, want /health", p)
	}
	if len(s.Spec.VolumeClaimTemplates) != 1 || !slices.ContainsFunc(c.VolumeMounts, func(m corev1.VolumeMount) bool {
		return m.MountPath == argValue(c.Args, "data_dir")
	}) {
		t.Fatalf("masters: --data_dir=%s is not on a volume claim", argValue(c.Args, "data_dir"))
	}
	// Workers and clients reach the masters at the same names.
	rpc := argValue(c.Args, "rpc_address")
	var addrs []string
	for i := range int(*s.Spec.Replicas) {
		addrs = append(addrs, strings.ReplaceAll(rpc, "$(POD_NAME)", fmt.Sprintf("%s-%d", s.Name, i)))
	}
	for _, w := range workerSpecs(objs) {
		if got := argValue(w.Containers[0].Args, "master_server_address"); got != strings.Join(addrs, ",") {
			t.Fatalf("workers' --master_server_address=%s, want %s", got, strings.Join(addrs, ","))
		}
	}
	for _, cm := range find(objs, func(c *corev1.ConfigMap) bool { return c.Data["mooncake.json"] != "" }) {
		if !strings.Contains(cm.Data["mooncake.json"], strings.Join(addrs, ",")) {
			t.Fatalf("client mooncake.json %s does not list %s", cm.Data["mooncake.json"], addrs)
		}
	}
}

func workerSpecs(objs []runtime.Object) []corev1.PodSpec {
	var out []corev1.PodSpec
	for _, s := range find(objs, func(s *appsv1.StatefulSet) bool { return component(s.Labels) == "worker" }) {
		out = append(out, s.Spec.Template.Spec)
	}
	for _, d := range find(objs, func(d *appsv1.DaemonSet) bool { return component(d.Labels) == "worker" }) {
		out = append(out, d.Spec.Template.Spec)
	}
	return out
}

// checkWorkers: a stable worker id, root_fs_dir on a volume, huge pages requested when asked.
func checkWorkers(t *testing.T, objs []runtime.Object, set string) {
	t.Helper()
	specs := workerSpecs(objs)
	if len(specs) != 1 {
		t.Fatalf("%d worker workloads", len(specs))
	}
	c := specs[0].Containers[0]
	if argValue(c.Args, "worker_id") != "$(WORKER_ID)" {
		t.Fatalf("--worker_id=%s", argValue(c.Args, "worker_id"))
	}
	root := argValue(c.Args, "root_fs_dir")
	if !slices.ContainsFunc(c.VolumeMounts, func(m corev1.VolumeMount) bool { return m.MountPath == root }) {
		t.Fatalf("root_fs_dir %s is not a volume", root)
	}
	hp := c.Resources.Limits[corev1.ResourceName("hugepages-2Mi")]
	if set == "daemonset-hugepages-monitoring" {
		if hp.String() != "16Gi" || argValue(c.Args, "huge_pages") != "require" {
			t.Fatalf("huge pages: limit %s, --huge_pages=%s; want 16Gi and require", hp.String(), argValue(c.Args, "huge_pages"))
		}
		if req := c.Resources.Requests[corev1.ResourceName("hugepages-2Mi")]; req.Cmp(hp) != 0 {
			t.Fatalf("huge pages: request %s != limit %s", req.String(), hp.String())
		}
	} else if !hp.IsZero() {
		t.Fatalf("huge pages requested without hugePages.enabled: %s", hp.String())
	}
	if p := c.ReadinessProbe; p == nil || p.HTTPGet == nil || p.HTTPGet.Path != "/health" {
		t.Fatalf("workers' readiness probe: %+v", p)
	}
	if g := specs[0].TerminationGracePeriodSeconds; g == nil || *g <= 30 {
		t.Fatalf("workers' termination grace %v: must cover --shutdown_timeout", g)
	}
}

// binaryHelp builds the mooncake binary from the main module and returns the --help of the
// subcommands the chart runs, so that every flag the chart passes is checked to exist.
func binaryHelp(t *testing.T) map[string]string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "mooncake")
	cmd := exec.Command("go", "build", "-o", bin, "./cmd/mooncake")
	cmd.Dir = filepath.Join("..", "..")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build ./cmd/mooncake: %v\n%s", err, out)
	}
	help := map[string]string{}
	for _, sub := range []string{"master", "worker"} {
		var out bytes.Buffer
		c := exec.Command(bin, sub, "--help")
		c.Stdout, c.Stderr = &out, &out
		if err := c.Run(); err != nil {
			t.Fatalf("mooncake %s --help: %v\n%s", sub, err, out.String())
		}
		help[sub] = out.String()
	}
	return help
}

// checkFlags: every --flag the chart passes is a flag of the subcommand it runs.
func checkFlags(t *testing.T, objs []runtime.Object, help map[string]string) {
	t.Helper()
	var specs []corev1.PodSpec
	for _, s := range find(objs, func(s *appsv1.StatefulSet) bool { return true }) {
		specs = append(specs, s.Spec.Template.Spec)
	}
	for _, d := range find(objs, func(d *appsv1.DaemonSet) bool { return true }) {
		specs = append(specs, d.Spec.Template.Spec)
	}
	for _, s := range specs {
		args := s.Containers[0].Args
		h := help[args[0]]
		for _, a := range args[1:] {
			flag, _, _ := strings.Cut(a, "=")
			if flag == "--log_level" {
				continue // extraArgs in a value set: a global flag
			}
			if !strings.Contains(h, flag+" ") {
				t.Errorf("mooncake %s has no flag %s", args[0], flag)
			}
		}
	}
}
