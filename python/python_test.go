package python

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/mooncake-go/mooncake/internal/testutil"
)

func TestMain(m *testing.M) {
	testutil.VerifyNoLeaks(m, goleak.Cleanup(func(code int) { built.Remove(); installed.Remove(); os.Exit(code) }))
}

// builtPaths are the mooncake binary and the C library (buildAll).
type builtPaths struct{ bin, lib string }

// built is the binary and the library, built once for every test and benchmark of this
// package (the suite, churn and the wheel each used to link their own: several seconds of
// both cores each); installed is the package installed with that library (pip), once.
var (
	built     testutil.Shared[builtPaths]
	installed testutil.Shared[string]
)

// prepareBuilt builds once (see built) and returns python3, the mooncake binary and the
// library. It skips with -short and without python3 or gcc.
func prepareBuilt(t testing.TB) (py, bin, lib string) {
	t.Helper()
	if testing.Short() {
		t.Skip("builds the library and runs servers; skipped with -short")
	}
	py = testutil.LookTool(t, "python3")
	testutil.LookTool(t, "gcc") // cgo needs it for the library
	v := built.Get(t, func(t testing.TB, dir string) builtPaths {
		bin, lib := buildAll(t, dir)
		return builtPaths{bin, lib}
	})
	return py, v.bin, v.lib
}

// prepare is prepareBuilt plus the package installed once (see installed): it returns
// python3, the mooncake binary and the directory the package is installed in.
func prepare(t *testing.T) (py, bin, site string) {
	t.Helper()
	py, bin, lib := prepareBuilt(t)
	site = installed.Get(t, func(t testing.TB, dir string) string {
		site := filepath.Join(dir, "site")
		install(t, py, lib, site)
		return site
	})
	return py, bin, site
}

// TestPythonSuite runs the Python unittest suite (tests/) against real processes: a
// `mooncake standalone` and a cluster of three masters and two workers, all on 127.0.0.1.
// The package is installed with pip (no network, the library built here) into a scratch
// directory and imported from there, so the installed layout is what the suite tests.
// It fails if any Python test fails or is skipped.
func TestPythonSuite(t *testing.T) {
	py, bin, site := prepare(t)
	dir := t.TempDir()
	// The standalone publishes KV events for tests/test_kv_events.py.
	kvEvents := "tcp://" + testutil.HostPort(testutil.FreePorts(t, 1)[0])
	sa, _ := testutil.StartStandalone(t, bin, filepath.Join(dir, "standalone"), "256MiB",
		"--enable_kv_events", "--kv_events_bind_endpoint", kvEvents, "--kv_events_backend_id", "pytest",
		"--kv_events_model_name", "test-model", "--kv_events_block_size", "16")
	cl := startCluster(t, bin, filepath.Join(dir, "cluster"))

	pypath := site
	for _, script := range []string{"ensure-torch.sh", "ensure-pyzmq.sh"} {
		if extra := debianPath(t, py, script); extra != "" && !strings.Contains(pypath, extra) {
			pypath += string(os.PathListSeparator) + extra // after site: the installed package wins
		}
	}
	env := append(os.Environ(),
		"PYTHONPATH="+pypath,
		"MOONCAKE_STORE_LIB=", // the installed package must find its library beside itself
		"MOONCAKE_MASTER=",    // tests name their masters explicitly
		"MOONCAKE_CONFIG_PATH=",
		"MOONCAKE_TEST_STRICT=1", // a missing fixture fails instead of skipping
		"MOONCAKE_TEST_MASTER="+sa,
		"MOONCAKE_TEST_KV_EVENTS="+kvEvents,
		"MOONCAKE_TEST_CLUSTER="+strings.Join(cl.masters, ","),
		"MOONCAKE_TEST_CLUSTER_WORKER_PIDS="+cl.workerPIDs(),
	)
	tests, err := filepath.Abs("tests")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	// Run from the scratch directory so `import mooncake` cannot pick up the sources in
	// python/mooncake instead of the installed package.
	cmd := exec.CommandContext(ctx, py, "-m", "unittest", "discover", "-v", "-s", tests, "-t", tests)
	cmd.Dir = dir
	cmd.Env = env
	out, err := cmd.CombinedOutput()
	t.Logf("python3 -m unittest:\n%s", out)
	if err != nil {
		t.Fatalf("Python suite failed: %v", err)
	}
	if strings.Contains(string(out), "skipped") {
		t.Fatal("Python suite skipped tests: every fixture is provided here, so a skip hides a failure")
	}
}

// buildAll builds the mooncake binary (static, no cgo, invariants on) and the C library
// (c-shared) into dir.
func buildAll(t testing.TB, dir string) (bin, lib string) {
	t.Helper()
	bin = testutil.BuildMooncake(t, dir)
	lib = filepath.Join(dir, "libmooncake_store.so")
	testutil.GoBuild(t, []string{"CGO_ENABLED=1"}, "-buildmode=c-shared", "-o", lib, "./cmd/libmooncake_store")
	return bin, lib
}

// install runs the README's install command into a --target directory, packing the library
// built above (MOONCAKE_BUILD_LIB) instead of compiling it a second time.
func install(t testing.TB, py, lib, site string) {
	t.Helper()
	// pip comes from Debian (python3-pip); the project's script installs it when missing,
	// so the suite never skips on a fresh machine.
	if out, err := exec.Command("sh", filepath.Join("..", ".ci", "ensure-pip.sh"), py).CombinedOutput(); err != nil {
		t.Fatalf(".ci/ensure-pip.sh: %v\n%s", err, out)
	}
	cmd := exec.Command(py, "-m", "pip", "install", "--no-index", "--no-cache-dir", "--target", site, ".")
	cmd.Env = append(os.Environ(), "MOONCAKE_BUILD_LIB="+lib, "PIP_DISABLE_PIP_VERSION_CHECK=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("pip install: %v\n%s", err, out)
	}
	if _, err := os.Stat(filepath.Join(site, "mooncake", "libmooncake_store.so")); err != nil {
		t.Fatalf("pip install did not put the library beside the package: %v", err)
	}
}

// debianPath runs one of the .ci scripts that make a Debian Python package importable for
// the tests that need it (ensure-torch.sh: torch for the tensor tests; ensure-pyzmq.sh: zmq
// and msgpack for the KV event subscriber), installing it when missing, and returns the
// directory py needs on PYTHONPATH to find it, or "". The suite runs with
// MOONCAKE_TEST_STRICT=1, so without them those tests fail rather than skip.
func debianPath(t testing.TB, py, script string) string {
	t.Helper()
	var stderr strings.Builder
	cmd := exec.Command("sh", filepath.Join("..", ".ci", script), py)
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf(".ci/%s: %v\n%s", script, err, stderr.String())
	}
	return strings.TrimSpace(string(out))
}

// --- processes (helpers in internal/testutil) ----------------------------------------------

// cluster is three masters and two workers.
type cluster struct {
	masters []string // client RPC addresses
	workers []*testutil.Proc
}

func (c *cluster) workerPIDs() string {
	var s []string
	for i, w := range c.workers {
		s = append(s, fmt.Sprintf("w%d=%d", i+1, w.Cmd.Process.Pid))
	}
	return strings.Join(s, ",")
}

// startCluster starts three masters (raft peers) and two workers. A start that loses a port
// race is retried on new ports, in a data directory of its own (see cmd/mooncake's
// e2e_cluster_test.go for why).
func startCluster(t testing.TB, bin, dir string) *cluster {
	t.Helper()
	c := &cluster{}
	for attempt := 0; ; attempt++ {
		ports := testutil.FreePorts(t, 6)
		var peers, rpcs []string
		c.masters = nil
		for i := range 3 {
			peers = append(peers, fmt.Sprintf("m%d=%s", i+1, testutil.HostPort(ports[2*i])))
			c.masters = append(c.masters, testutil.HostPort(ports[2*i+1]))
			rpcs = append(rpcs, fmt.Sprintf("m%d=%s", i+1, c.masters[i]))
		}
		var ms []*testutil.Proc
		for i := range 3 {
			id := fmt.Sprintf("m%d", i+1)
			ms = append(ms, testutil.StartProc(t, id, bin, "master", "--id", id,
				"--data_dir", filepath.Join(dir, fmt.Sprintf("attempt%d", attempt), id),
				"--rpc_address", c.masters[i], "--raft_address", testutil.HostPort(ports[2*i]), "--metrics_port", "0",
				"--peers", strings.Join(peers, ","), "--peer_rpc_addresses", strings.Join(rpcs, ",")))
		}
		var err error
		inUse := false
		for _, m := range ms {
			if inUse, err = m.WaitReady(60 * time.Second); err != nil {
				break
			}
		}
		if err == nil {
			break
		}
		for _, m := range ms {
			m.Kill()
		}
		if !inUse || attempt == 3 {
			t.Fatal(err)
		}
	}
	for i := range 2 {
		id := fmt.Sprintf("w%d", i+1)
		c.workers = append(c.workers, testutil.StartReady(t, id, bin, func() []string {
			return []string{"worker", "--master_server_address", strings.Join(c.masters, ","),
				"--worker_address", testutil.HostPort(testutil.FreePorts(t, 1)[0]), "--worker_id", id, "--metrics_port", "0",
				"--global_segment_size", "128MiB"}
		}))
	}
	return c
}
