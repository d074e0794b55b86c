package testutil

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// Helpers for tests that run the real mooncake binary as separate processes (the C library's
// and the Python package's tests): build it, start servers on free 127.0.0.1 ports, wait for
// their "ready" line, SIGKILL them at cleanup.

// RepoRoot returns the module's root directory (where go.mod is), found upward from the
// test's working directory.
func RepoRoot(t testing.TB) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("testutil: go.mod not found above the working directory")
		}
		dir = parent
	}
}

// GoBuild runs `go build args...` in the module root with extra environment entries and fails
// the test with the compiler's output on an error.
func GoBuild(t testing.TB, env []string, args ...string) {
	t.Helper()
	cmd := exec.Command("go", append([]string{"build"}, args...)...)
	cmd.Dir = RepoRoot(t)
	cmd.Env = append(os.Environ(), env...)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build %s: %v\n%s", strings.Join(args, " "), err, out)
	}
}

// BuildMooncake builds the mooncake binary as users get it (static, CGO_ENABLED=0) with the
// invariants tag into dir and returns its path.
func BuildMooncake(t testing.TB, dir string) string {
	t.Helper()
	bin := filepath.Join(dir, "mooncake")
	GoBuild(t, []string{"CGO_ENABLED=0"}, "-tags", "invariants", "-o", bin, "./cmd/mooncake")
	return bin
}

// Proc is one server process, SIGKILLed at the test's cleanup if still running.
type Proc struct {
	Name   string
	Cmd    *exec.Cmd
	Stderr *SyncBuffer
	ready  chan struct{} // closed at the first stdout line containing "ready"
	done   chan struct{} // closed when the process exited
}

// StartProc starts bin with args and returns at once (WaitReady waits for its ready line).
func StartProc(t testing.TB, name, bin string, args ...string) *Proc {
	t.Helper()
	p := &Proc{Name: name, Stderr: &SyncBuffer{}, ready: make(chan struct{}), done: make(chan struct{})}
	p.Cmd = exec.Command(bin, args...)
	p.Cmd.Stderr = p.Stderr
	out, err := p.Cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Cmd.Start(); err != nil {
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
		p.Cmd.Wait()
		close(p.done)
	}()
	t.Cleanup(func() {
		p.Kill()
		if t.Failed() {
			t.Logf("--- %s stderr (tail):\n%s", name, Tail(p.Stderr.String(), 3000))
		}
	})
	return p
}

// WaitReady waits up to timeout for the ready line; portInUse tells the caller to retry on
// other ports.
func (p *Proc) WaitReady(timeout time.Duration) (portInUse bool, err error) {
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case <-p.ready:
		return false, nil
	case <-p.done:
		s := p.Stderr.String()
		return strings.Contains(s, "address already in use"), fmt.Errorf("%s exited before ready: %s", p.Name, Tail(s, 2000))
	case <-t.C:
		return false, fmt.Errorf("%s not ready after %v: %s", p.Name, timeout, Tail(p.Stderr.String(), 2000))
	}
}

// Kill SIGKILLs the process if it runs and waits for it to exit.
func (p *Proc) Kill() {
	select {
	case <-p.done:
		return
	default:
	}
	_ = p.Cmd.Process.Signal(syscall.SIGKILL)
	<-p.done
}

// StartReady starts a process and waits until it is ready, retrying with new ports (args is
// called again) when a port was taken between FreePorts and the bind.
func StartReady(t testing.TB, name, bin string, args func() []string) *Proc {
	t.Helper()
	for attempt := 0; ; attempt++ {
		p := StartProc(t, name, bin, args()...)
		inUse, err := p.WaitReady(60 * time.Second)
		if err == nil {
			return p
		}
		p.Kill()
		if !inUse || attempt == 3 {
			t.Fatal(err)
		}
	}
}

// StartStandalone runs `mooncake standalone` with a segment of the given size (e.g. "256MiB"),
// its data under dataDir and any extra flags, and returns its master address.
func StartStandalone(t testing.TB, bin, dataDir, segment string, extra ...string) (string, *Proc) {
	t.Helper()
	var addr string
	p := StartReady(t, "standalone", bin, func() []string {
		port := FreePorts(t, 1)[0]
		addr = HostPort(port)
		return append([]string{"standalone", "--data_dir", dataDir, "--rpc_port", strconv.Itoa(port),
			"--metrics_port", "0", "--global_segment_size", segment}, extra...)
	})
	return addr, p
}

// FreePorts returns n distinct ports that were free a moment ago: all n listeners are open at
// once, so no port is handed out twice.
func FreePorts(t testing.TB, n int) []int {
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

// HostPort is "127.0.0.1:<p>".
func HostPort(p int) string { return "127.0.0.1:" + strconv.Itoa(p) }

// Tail returns the last n bytes of s.
func Tail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return "..." + s[len(s)-n:]
}

// LookTool finds an external tool on PATH or skips the test: the C library's and the Python
// package's tests need gcc or python3, which CI has and a bare machine may not. With
// MOONCAKE_TEST_STRICT=1 (CI) a missing tool fails the test instead: a skip there would hide
// a check that never ran.
func LookTool(t testing.TB, name string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err != nil {
		if os.Getenv("MOONCAKE_TEST_STRICT") == "1" {
			t.Fatalf("%s is not on PATH (%s/%s) and MOONCAKE_TEST_STRICT=1", name, runtime.GOOS, runtime.GOARCH)
		}
		t.Skipf("%s is not on PATH (%s/%s)", name, runtime.GOOS, runtime.GOARCH)
	}
	return p
}

// StartMaster runs `mooncake master` alone (a one-voter raft cluster, no worker: clients with
// segments hold the data), its raft data under dataDir, with any extra flags, and returns its
// client RPC address.
func StartMaster(t testing.TB, bin, dataDir string, extra ...string) (string, *Proc) {
	t.Helper()
	var addr string
	attempt := 0
	p := StartReady(t, "master", bin, func() []string {
		ports := FreePorts(t, 2)
		addr = HostPort(ports[0])
		// A new directory per attempt: raft keeps the address it bootstrapped with.
		attempt++
		dir := filepath.Join(dataDir, fmt.Sprintf("attempt%d", attempt))
		return append([]string{"master", "--id", "m1", "--data_dir", dir, "--rpc_address", addr,
			"--raft_address", HostPort(ports[1]), "--metrics_port", "0"}, extra...)
	})
	return addr, p
}
