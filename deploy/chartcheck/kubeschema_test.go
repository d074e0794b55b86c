package chartcheck

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/yannh/kubeconform/pkg/resource"
	"github.com/yannh/kubeconform/pkg/validator"
	"sigs.k8s.io/yaml"
)

// The schemas come from the upstream sources as Go modules, fetched and verified by
// `go mod download` (the module proxy and the checksum database) and pinned here by the
// h1: sums it reports: kubeconform's default location (raw.githubusercontent.com) cannot
// be reached from these machines, and the module proxy can.
const (
	// The Kubernetes OpenAPI spec, api/openapi-spec/swagger.json: what the API server of
	// that release serves and what yannh/kubernetes-json-schema (kubeconform's default)
	// is generated from. Its minor release must be the one of k8s.io/api in go.mod
	// (v0.37.x describes v1.37.x): checkKubernetesVersion holds them together.
	kubernetesModule  = "k8s.io/kubernetes"
	kubernetesVersion = "v1.37.2"
	kubernetesSum     = "h1:A2VDEiObzkYqFTKhSsn0ZEb0RlLEXpHWj93gi2HqEwE="
	kubernetesSpec    = "api/openapi-spec/swagger.json"

	// The Prometheus Operator's CRD for ServiceMonitor (monitoring.coreos.com/v1), outside
	// the core schemas. v0.85.0 is the newest version the module proxy serves this project
	// (it refuses later ones); ServiceMonitor v1 has been stable since long before.
	promOperatorModule  = "github.com/prometheus-operator/prometheus-operator"
	promOperatorVersion = "v0.85.0"
	promOperatorSum     = "h1:M5xLCLEoaW2IJfnuCwFzzpL+jSVQu3KGT84Pye+fW8s="
	promOperatorCRD     = "example/prometheus-operator-crd/monitoring.coreos.com_servicemonitors.yaml"
)

// kubeSchemas validates objects with kubeconform (strict: an unknown field fails) against
// JSON schemas it writes into dir the first time a kind needs one, in the layout and form of
// kubeconform's default schemas (openapi2jsonschema --expanded --kubernetes --stand-alone
// --strict over swagger.json): one self-contained file per kind, named as kubeconform's
// default template looks it up (deployment-apps-v1.json, service-v1.json).
type kubeSchemas struct {
	dir     string
	defs    map[string]any    // swagger.json's definitions, prepared by kubernetesDefinitions
	byGVK   map[string]string // schema file name -> definition name
	crds    map[string]any    // file name -> schema, from the CRDs
	written map[string]bool
	v       validator.Validator
}

// newKubeSchemas fetches the sources and builds the validator. It never touches the network
// but through `go mod download`.
func newKubeSchemas(t *testing.T) *kubeSchemas {
	t.Helper()
	checkKubernetesVersion(t)
	k8s := downloadModule(t, kubernetesModule, kubernetesVersion, kubernetesSum)
	spec, err := os.ReadFile(filepath.Join(k8s, kubernetesSpec))
	if err != nil {
		t.Fatal(err)
	}
	s := &kubeSchemas{dir: t.TempDir(), byGVK: map[string]string{}, crds: map[string]any{}, written: map[string]bool{}}
	if s.defs, err = kubernetesDefinitions(spec); err != nil {
		t.Fatalf("%s@%s %s: %v", kubernetesModule, kubernetesVersion, kubernetesSpec, err)
	}
	for name, d := range s.defs {
		for _, g := range gvks(d) {
			s.byGVK[schemaFile(g.group, g.version, g.kind)] = name
		}
	}
	po := downloadModule(t, promOperatorModule, promOperatorVersion, promOperatorSum)
	crd, err := os.ReadFile(filepath.Join(po, promOperatorCRD))
	if err != nil {
		t.Fatal(err)
	}
	if err := s.addCRD(crd); err != nil {
		t.Fatalf("%s: %v", promOperatorCRD, err)
	}
	s.v, err = validator.New([]string{filepath.Join(s.dir, "{{ .ResourceKind }}{{ .KindSuffix }}.json")},
		validator.Opts{Strict: true})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// checkKubernetesVersion: the schemas describe the release that k8s.io/api (go.mod) does.
func checkKubernetesVersion(t *testing.T) {
	t.Helper()
	mod, err := os.ReadFile("go.mod")
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(mod), "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(l), "k8s.io/api v0."); ok {
			api, _, _ := strings.Cut(v, ".")
			kube, _, _ := strings.Cut(strings.TrimPrefix(kubernetesVersion, "v1."), ".")
			if api != kube {
				t.Fatalf("go.mod's k8s.io/api v0.%s describes Kubernetes 1.%s but the schemas are %s: move kubernetesVersion and kubernetesSum to a 1.%s",
					v, api, kubernetesVersion, api)
			}
			return
		}
	}
	t.Fatal("go.mod does not require k8s.io/api")
}

// downloadModule returns the directory of module@version in the module cache, checking that
// it is the one pinned by sum. It runs in a throwaway module so that this module's go.mod and
// go.sum stay as they are.
func downloadModule(t *testing.T, module, version, sum string) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "go.mod"), []byte("module schemas\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("go", "mod", "download", "-json", module+"@"+version)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GOWORK=off")
	out, err := cmd.Output()
	var m struct{ Dir, Sum, Error string }
	if jerr := json.Unmarshal(out, &m); jerr != nil || m.Error != "" || err != nil {
		var stderr []byte
		if ee, ok := err.(*exec.ExitError); ok {
			stderr = ee.Stderr
		}
		t.Fatalf("go mod download %s@%s (the schemas' source; needs the module proxy or a module cache that holds it): %v %s %s",
			module, version, err, m.Error, stderr)
	}
	if m.Sum != sum {
		t.Fatalf("%s@%s has sum %s, pinned %s", module, version, m.Sum, sum)
	}
	return m.Dir
}

type gvk struct{ group, version, kind string }

func gvks(def any) []gvk {
	var out []gvk
	d, _ := def.(map[string]any)
	list, _ := d["x-kubernetes-group-version-kind"].([]any)
	for _, e := range list {
		m, _ := e.(map[string]any)
		g, _ := m["group"].(string)
		v, _ := m["version"].(string)
		k, _ := m["kind"].(string)
		out = append(out, gvk{g, v, k})
	}
	return out
}

// schemaFile is the file name kubeconform's default template gives a kind:
// {{ .ResourceKind }}{{ .KindSuffix }}.json, the kind in lower case, then the group's first
// label where there is a group, then the version.
func schemaFile(group, version, kind string) string {
	if group == "" {
		return strings.ToLower(kind + "-" + version + ".json")
	}
	first, _, _ := strings.Cut(group, ".")
	return strings.ToLower(kind + "-" + first + "-" + version + ".json")
}

// kubernetesDefinitions parses swagger.json and prepares its definitions as openapi2jsonschema
// --kubernetes --strict does before it writes one file per kind: IntOrString and Quantity
// become oneOf (Quantity takes a number too, as kubectl and the API server accept `cpu: 1`),
// each kind's apiVersion and kind properties are restricted to its group-versions and kind,
// and every object schema with properties forbids others.
func kubernetesDefinitions(spec []byte) (map[string]any, error) {
	var doc struct {
		Definitions map[string]any `json:"definitions"`
	}
	if err := json.Unmarshal(spec, &doc); err != nil {
		return nil, err
	}
	defs := doc.Definitions
	if len(defs) == 0 {
		return nil, errors.New("no definitions")
	}
	oneOf := func(a, b string) map[string]any {
		return map[string]any{"oneOf": []any{map[string]any{"type": a}, map[string]any{"type": b}}}
	}
	defs["io.k8s.apimachinery.pkg.util.intstr.IntOrString"] = oneOf("string", "integer")
	defs["io.k8s.apimachinery.pkg.api.resource.Quantity"] = oneOf("string", "number")
	for _, d := range defs {
		m, _ := d.(map[string]any)
		props, _ := m["properties"].(map[string]any)
		for _, g := range gvks(d) {
			apiVersion := g.version
			if g.group != "" {
				apiVersion = g.group + "/" + g.version
			}
			appendEnum(props["apiVersion"], apiVersion)
			appendEnum(props["kind"], g.kind)
		}
	}
	for _, d := range defs {
		forbidAdditional(d)
	}
	return defs, nil
}

func appendEnum(prop any, value string) {
	p, ok := prop.(map[string]any)
	if !ok {
		return
	}
	enum, _ := p["enum"].([]any)
	for _, e := range enum {
		if e == value {
			return
		}
	}
	p["enum"] = append(enum, value)
}

// forbidAdditional sets additionalProperties: false on every schema under s that has
// properties and says nothing of others (kubectl's own validation did the same).
func forbidAdditional(s any) {
	switch x := s.(type) {
	case map[string]any:
		if _, ok := x["properties"]; ok {
			if _, ok := x["additionalProperties"]; !ok {
				x["additionalProperties"] = false
			}
		}
		for _, v := range x {
			forbidAdditional(v)
		}
	case []any:
		for _, v := range x {
			forbidAdditional(v)
		}
	}
}

// standalone is the self-contained schema of one definition: every $ref replaced by a copy of
// what it names (its sibling keys dropped, as jsonref does), strict at the root, and optional
// properties allowed to be null as openapi2jsonschema --kubernetes does.
func standalone(defs map[string]any, name string) (map[string]any, error) {
	root, err := inline(defs, defs[name], []string{name})
	if err != nil {
		return nil, err
	}
	s := root.(map[string]any)
	s["$schema"] = "http://json-schema.org/schema#"
	if _, ok := s["type"]; !ok {
		s["type"] = "object"
	}
	s["additionalProperties"] = false
	if props, ok := s["properties"].(map[string]any); ok {
		s["properties"] = allowNull(props, nil, nil, "")
	}
	return s, nil
}

// inline returns a deep copy of s with its references replaced. A reference back into a
// definition being expanded has no finite expansion: it is an error (no kind the chart
// renders has one; openapi2jsonschema skips the few kinds that do).
func inline(defs map[string]any, s any, stack []string) (any, error) {
	switch x := s.(type) {
	case map[string]any:
		if ref, ok := x["$ref"].(string); ok {
			name, ok := strings.CutPrefix(ref, "#/definitions/")
			if !ok || defs[name] == nil {
				return nil, fmt.Errorf("unresolved $ref %q", ref)
			}
			for _, n := range stack {
				if n == name {
					return nil, fmt.Errorf("recursive $ref %s in %s", name, strings.Join(stack, " > "))
				}
			}
			return inline(defs, defs[name], append(stack, name))
		}
		out := make(map[string]any, len(x))
		for k, v := range x {
			c, err := inline(defs, v, stack)
			if err != nil {
				return nil, err
			}
			out[k] = c
		}
		return out, nil
	case []any:
		out := make([]any, len(x))
		for i, v := range x {
			c, err := inline(defs, v, stack)
			if err != nil {
				return nil, err
			}
			out[i] = c
		}
		return out, nil
	}
	return s, nil
}

// allowNull is openapi2jsonschema's allow_null_optional_fields: a "type" T becomes [T, "null"]
// unless the property it types is listed as required by the schema around it. data is the
// value being walked, parent and grand the two values above it, key data's name in parent.
func allowNull(data any, parent, grand any, key string) any {
	switch x := data.(type) {
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, v := range x {
			switch vv := v.(type) {
			case map[string]any:
				out[k] = allowNull(vv, x, parent, k)
			case []any:
				items := make([]any, len(vv))
				for i, e := range vv {
					items[i] = allowNull(e, vv, parent, k)
				}
				out[k] = items
			case string:
				if k == "type" && vv != "null" && !required(grand, key) {
					out[k] = []any{vv, "null"}
				} else {
					out[k] = vv
				}
			default:
				out[k] = v
			}
		}
		return out
	case []any:
		// A list's elements are walked from allowNull's map case; a list reaches here only as
		// an element of a list, which the spec does not have.
		return x
	}
	return data
}

func required(schema any, key string) bool {
	m, _ := schema.(map[string]any)
	list, _ := m["required"].([]any)
	for _, r := range list {
		if r == key {
			return true
		}
	}
	return false
}

// addCRD registers each version's openAPIV3Schema of a CustomResourceDefinition, made strict
// as kubeconform's openapi2jsonschema.py does for CRDs (with the root's unknown fields denied
// too) under the name kubeconform looks up (servicemonitor-monitoring-v1.json). Its rewrite of
// `format: int-or-string` has nothing to do here: CRDs write those fields as anyOf integer or
// string, which a JSON schema validator reads as it is.
func (s *kubeSchemas) addCRD(y []byte) error {
	var crd struct {
		Kind string `json:"kind"`
		Spec struct {
			Group string `json:"group"`
			Names struct {
				Kind string `json:"kind"`
			} `json:"names"`
			Versions []struct {
				Name   string `json:"name"`
				Schema struct {
					OpenAPIV3Schema map[string]any `json:"openAPIV3Schema"`
				} `json:"schema"`
			} `json:"versions"`
		} `json:"spec"`
	}
	if err := yaml.Unmarshal(y, &crd); err != nil {
		return err
	}
	if crd.Kind != "CustomResourceDefinition" || len(crd.Spec.Versions) == 0 {
		return fmt.Errorf("not a CustomResourceDefinition with versions: %s %q", crd.Kind, crd.Spec.Names.Kind)
	}
	for _, v := range crd.Spec.Versions {
		sch := v.Schema.OpenAPIV3Schema
		if sch == nil {
			return fmt.Errorf("%s %s: no openAPIV3Schema", crd.Spec.Names.Kind, v.Name)
		}
		forbidAdditional(sch)
		s.crds[schemaFile(crd.Spec.Group, v.Name, crd.Spec.Names.Kind)] = sch
	}
	return nil
}

// write puts the schema of apiVersion/kind in dir, once.
func (s *kubeSchemas) write(apiVersion, kind string) error {
	group, version, ok := strings.Cut(apiVersion, "/")
	if !ok {
		group, version = "", apiVersion
	}
	file := schemaFile(group, version, kind)
	if s.written[file] {
		return nil
	}
	sch, ok := s.crds[file]
	if !ok {
		name, found := s.byGVK[file]
		if !found {
			return fmt.Errorf("no schema for %s %s in %s@%s nor in the CRDs", apiVersion, kind, kubernetesModule, kubernetesVersion)
		}
		var err error
		if sch, err = standalone(s.defs, name); err != nil {
			return fmt.Errorf("%s: %v", name, err)
		}
	}
	b, err := json.Marshal(sch)
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(s.dir, file), b, 0o644); err != nil {
		return err
	}
	s.written[file] = true
	return nil
}

// validate runs kubeconform on one YAML document; anything but Valid is an error that names
// each failing field.
func (s *kubeSchemas) validate(name string, doc []byte) error {
	var head struct{ APIVersion, Kind string }
	if err := yaml.Unmarshal(doc, &head); err != nil {
		return err
	}
	if err := s.write(head.APIVersion, head.Kind); err != nil {
		return err
	}
	r := s.v.ValidateResource(resource.Resource{Path: name, Bytes: doc})
	switch r.Status {
	case validator.Valid:
		return nil
	case validator.Invalid:
		var msgs []string
		for _, e := range r.ValidationErrors {
			msgs = append(msgs, e.Path+": "+e.Msg)
		}
		if len(msgs) == 0 {
			msgs = append(msgs, r.Err.Error())
		}
		return fmt.Errorf("kubeconform: %s %s is invalid: %s", head.APIVersion, head.Kind, strings.Join(msgs, "; "))
	}
	return fmt.Errorf("kubeconform: %s %s: status %d: %v (a schema in %s it cannot compile reads as none)", head.APIVersion, head.Kind, r.Status, r.Err, s.dir)
}

// TestKubeconformRejects: the schemas catch what a wrong chart would render, so the chart
// check can fail; a correct object beside each wrong one passes.
func TestKubeconformRejects(t *testing.T) {
	kube := newKubeSchemas(t)
	const deployment = `apiVersion: apps/v1
kind: Deployment
metadata: {name: kv}
spec:
  replicas: %s
  selector: {matchLabels: {app: kv}}
  strategy: {rollingUpdate: {maxUnavailable: %s}}
  template:
    metadata: {labels: {app: kv}}
    spec:
      containers:
        - name: kv
          image: mooncake-go
          %s
          resources: {requests: {cpu: 1, memory: 1Gi}}
`
	const serviceMonitor = `apiVersion: monitoring.coreos.com/v1
kind: ServiceMonitor
metadata: {name: kv}
spec:
  selector: {matchLabels: {app: kv}}
  endpoints:
    - {port: metrics, %s}
`
	for _, c := range []struct {
		name, doc, want string // want: the field the error names; "" for a valid object
	}{
		{"valid deployment", fmt.Sprintf(deployment, "3", "25%", "args: [master]"), ""},
		{"replicas a string", fmt.Sprintf(deployment, `"three"`, "25%", "args: [master]"), "/spec/replicas"},
		{"int-or-string a bool", fmt.Sprintf(deployment, "3", "true", "args: [master]"), "/spec/strategy/rollingUpdate/maxUnavailable"},
		{"unknown container field", fmt.Sprintf(deployment, "3", "1", "argz: [master]"), "argz"},
		{"args not a list", fmt.Sprintf(deployment, "3", "1", "args: master"), "/spec/template/spec/containers/0/args"},
		{"container without a name", strings.Replace(fmt.Sprintf(deployment, "3", "1", "args: [master]"), "- name: kv\n          image", "- image", 1), "missing property 'name'"},
		{"unknown top-level field", fmt.Sprintf(deployment, "3", "1", "args: [master]") + "specc: {}\n", "specc"},
		{"valid service monitor", fmt.Sprintf(serviceMonitor, "path: /metrics, interval: 30s"), ""},
		{"unknown service monitor field", fmt.Sprintf(serviceMonitor, "paht: /metrics"), "paht"},
		{"service monitor interval not a duration", fmt.Sprintf(serviceMonitor, "interval: soon"), "/spec/endpoints/0/interval"},
		{"unknown service monitor top-level field", fmt.Sprintf(serviceMonitor, "path: /metrics") + "specc: {}\n", "specc"},
	} {
		err := kube.validate(c.name, []byte(c.doc))
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%s: %v", c.name, err)
		case c.want != "" && err == nil:
			t.Errorf("%s: kubeconform accepted it:\n%s", c.name, c.doc)
		case c.want != "" && !strings.Contains(err.Error(), c.want):
			t.Errorf("%s: the error does not name %s: %v", c.name, c.want, err)
		default:
			t.Logf("%s: %v", c.name, err)
		}
	}
}
