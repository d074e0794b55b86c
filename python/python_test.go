package python

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/mooncake-go/mooncake/internal/testutil"
)

func TestMain(m *testing.M) { testutil.VerifyNoLeaks(m) }

// TestPythonSuite runs the Python unittest suite (tests/) against real processes: a
// `mooncake standalone` and a cluster of three masters and two workers, all on 127.0.0.1.
// The package is installed with pip (no network, the library built here) into a scratch
// directory and imported from there, so the installed layout is what the suite tests.
// It fails if any Python test fails or is skipped.
func TestPythonSuite(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the library and runs servers; skipped with -short")
	}
	py := lookTool(t, "python3")
	lookTool(t, "gcc") // cgo needs it for the library
	dir := t.TempDir()
	bin, lib := buildAll(t, dir)

	sa := startStandalone(t, bin, filepath.Join(dir, "standalone"), "256MiB")
	cl := startCluster(t, bin, filepath.Join(dir, "cluster"))

	site := filepath.Join(dir, "site")
	install(t, py, lib, site)

	env := append(os.Environ(),
		"PYTHONPATH="+site,
		"MOONCAKE_STORE_LIB=", // the installed package must find its library beside itself
		"MOONCAKE_MASTER=",    // tests name their masters explicitly
		"MOONCAKE_CONFIG_PATH=",
		"MOONCAKE_TEST_STRICT=1", // a missing fixture fails instead of skipping
		"MOONCAKE_TEST_MASTER="+sa,
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

func lookTool(t testing.TB, name string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err != nil {
		t.Skipf("%s is not installed: %v", name, err)
	}
	return p
}

// buildAll builds the mooncake binary (static, no cgo, invariants on) and the C library
// (c-shared) into dir, in parallel: the two links are most of this test's time.
func buildAll(t testing.TB, dir string) (bin, lib string) {
	t.Helper()
	bin, lib = filepath.Join(dir, "mooncake"), filepath.Join(dir, "libmooncake_store.so")
	var wg sync.WaitGroup
	errs := make([]error, 2)
	build := func(i int, env string, args ...string) {
		defer wg.Done()
		cmd := exec.Command("go", append([]string{"build"}, args...)...)
		cmd.Dir = ".."
		cmd.Env = append(os.Environ(), env)
		if out, err := cmd.CombinedOutput(); err != nil {
			errs[i] = fmt.Errorf("go build %v: %v\n%s", args, err, out)
		}
	}
	wg.Add(2)
	go build(0, "CGO_ENABLED=0", "-tags", "invariants", "-o", bin, "./cmd/mooncake")
	go build(1, "CGO_ENABLED=1", "-buildmode=c-shared", "-o", lib, "./cmd/libmooncake_store")
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	return bin, lib
}

// install runs the README's install command into a --target directory, packing the library
// built above (MOONCAKE_BUILD_LIB) instead of compiling it a second time.
func install(t testing.TB, py, lib, site string) {
	t.Helper()
	cmd := exec.Command(py, "-m", "pip", "install", "--no-index", "--no-cache-dir", "--target", site, ".")
	cmd.Env = append(os.Environ(), "MOONCAKE_BUILD_LIB="+lib, "PIP_DISABLE_PIP_VERSION_CHECK=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		if strings.Contains(string(out), "No module named pip") {
			t.Skipf("pip is not installed for %s", py)
		}
		t.Fatalf("pip install: %v\n%s", err, out)
	}
	if _, err := os.Stat(filepath.Join(site, "mooncake", "libmooncake_store.so")); err != nil {
		t.Fatalf("pip install did not put the library beside the package: %v", err)
	}
}

// --- processes ---------------------------------------------------------------------------------

// proc is one server process; it is SIGKILLed at cleanup if still running.
type proc struct {
	name   string
	cmd    *exec.Cmd
	stderr *testutil.SyncBuffer
	ready  chan struct{} // closed at the first stdout line containing "ready"
	done   chan struct{} // closed when the process exited
}

func startProc(t testing.TB, name, bin string, args ...string) *proc {
	t.Helper()
	p := &proc{name: name, stderr: &testutil.SyncBuffer{}, ready: make(chan struct{}), done: make(chan struct{})}
	p.cmd = exec.Command(bin, args...)
	p.cmd.Stderr = p.stderr
	out, err := p.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := p.cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", name, err)
	}
	go func() {
		sc := bufio.NewScanner(out)
		sent := false
		for sc.Scan() {
			if !sent && strings.Contains(sc.Text(), "ready") {
				close(p.ready)
				sent = true
			}
		}
		io.Copy(io.Discard, out)
		p.cmd.Wait()
		close(p.done)
	}()
	t.Cleanup(func() {
		select {
		case <-p.done:
		default:
			p.cmd.Process.Signal(syscall.SIGKILL)
			<-p.done
		}
		if t.Failed() {
			t.Logf("--- %s stderr (tail):\n%s", name, tail(p.stderr.String(), 3000))
		}
	})
	return p
}

// waitReady waits for the ready line; portInUse tells the caller to retry on other ports.
func (p *proc) waitReady() (portInUse bool, err error) {
	select {
	case <-p.ready:
		return false, nil
	case <-p.done:
		s := p.stderr.String()
		return strings.Contains(s, "address already in use"), fmt.Errorf("%s exited before ready: %s", p.name, tail(s, 2000))
	case <-time.After(60 * time.Second):
		return false, fmt.Errorf("%s not ready after 60s: %s", p.name, tail(p.stderr.String(), 2000))
	}
}

// startReady starts the process and waits until it is ready, retrying with new ports (args is
// called again) when one was taken meanwhile.
func startReady(t testing.TB, name, bin string, args func() []string) *proc {
	t.Helper()
	for attempt := 0; ; attempt++ {
		p := startProc(t, name, bin, args()...)
		inUse, err := p.waitReady()
		if err == nil {
			return p
		}
		p.cmd.Process.Signal(syscall.SIGKILL)
		if !inUse || attempt == 3 {
			t.Fatal(err)
		}
	}
}

func freePorts(t testing.TB, n int) []int {
	t.Helper()
	ports := make([]int, n)
	for i := range ports {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		ports[i] = l.Addr().(*net.TCPAddr).Port
	}
	return ports
}

func hostPort(p int) string { return "127.0.0.1:" + strconv.Itoa(p) }

func tail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return "..." + s[len(s)-n:]
}

// startStandalone runs `mooncake standalone` and returns its master address.
func startStandalone(t testing.TB, bin, dataDir, segment string) string {
	t.Helper()
	var addr string
	startReady(t, "standalone", bin, func() []string {
		p := freePorts(t, 1)[0]
		addr = hostPort(p)
		return []string{"standalone", "--data_dir", dataDir, "--rpc_port", strconv.Itoa(p),
			"--metrics_port", "0", "--global_segment_size", segment}
	})
	return addr
}

// cluster is three masters and two workers.
type cluster struct {
	masters []string // client RPC addresses
	workers []*proc
}

func (c *cluster) workerPIDs() string {
	var s []string
	for i, w := range c.workers {
		s = append(s, fmt.Sprintf("w%d=%d", i+1, w.cmd.Process.Pid))
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
		ports := freePorts(t, 6)
		var peers, rpcs []string
		c.masters = nil
		for i := range 3 {
			peers = append(peers, fmt.Sprintf("m%d=%s", i+1, hostPort(ports[2*i])))
			c.masters = append(c.masters, hostPort(ports[2*i+1]))
			rpcs = append(rpcs, fmt.Sprintf("m%d=%s", i+1, c.masters[i]))
		}
		var ms []*proc
		for i := range 3 {
			id := fmt.Sprintf("m%d", i+1)
			ms = append(ms, startProc(t, id, bin, "master", "--id", id,
				"--data_dir", filepath.Join(dir, fmt.Sprintf("attempt%d", attempt), id),
				"--rpc_address", c.masters[i], "--raft_address", hostPort(ports[2*i]), "--metrics_port", "0",
				"--peers", strings.Join(peers, ","), "--peer_rpc_addresses", strings.Join(rpcs, ",")))
		}
		var err error
		inUse := false
		for _, m := range ms {
			if inUse, err = m.waitReady(); err != nil {
				break
			}
		}
		if err == nil {
			break
		}
		for _, m := range ms {
			m.cmd.Process.Signal(syscall.SIGKILL)
		}
		if !inUse || attempt == 3 {
			t.Fatal(err)
		}
	}
	for i := range 2 {
		id := fmt.Sprintf("w%d", i+1)
		c.workers = append(c.workers, startReady(t, id, bin, func() []string {
			return []string{"worker", "--master_server_address", strings.Join(c.masters, ","),
				"--worker_address", hostPort(freePorts(t, 1)[0]), "--worker_id", id, "--metrics_port", "0",
				"--global_segment_size", "128MiB"}
		}))
	}
	return c
}
