package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/mooncake-go/mooncake/benchmarks"
	"github.com/mooncake-go/mooncake/client"
	"github.com/mooncake-go/mooncake/internal/testutil"
)

// The end-to-end tests build the real binary and run masters, workers and CLI commands as
// separate processes on 127.0.0.1. Processes are SIGKILLed at cleanup if still running.

// built is the binary the end-to-end tests run, built by the first of them (a link takes
// seconds, and every test runs the same binary). TestMain removes dir at the end of the run.
var built struct {
	once     sync.Once
	dir, bin string
	err      error
}

// buildBinary builds cmd/mooncake (with the invariants tag, so assertions panic) once per test
// run and returns its path.
func buildBinary(t *testing.T) string {
	t.Helper()
	if testing.Short() {
		t.Skip("end-to-end tests build and run the binary; skipped with -short")
	}
	built.once.Do(func() {
		dir, err := os.MkdirTemp("", "mooncake-e2e-")
		if err != nil {
			built.err = err
			return
		}
		built.dir = dir
		bin := filepath.Join(dir, "mooncake")
		cmd := exec.Command("go", "build", "-tags", "invariants", "-o", bin, ".")
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := cmd.CombinedOutput(); err != nil {
			built.err = fmt.Errorf("go build: %v\n%s", err, out)
			return
		}
		built.bin = bin
	})
	if built.err != nil {
		t.Fatal(built.err)
	}
	return built.bin
}

// removeBinary removes what buildBinary built (TestMain calls it after the tests).
func removeBinary() {
	if built.dir != "" {
		os.RemoveAll(built.dir)
	}
}

// freePort, freePorts and hostPort are testutil's (one copy for every process test).
func freePort(t *testing.T) int           { return testutil.FreePorts(t, 1)[0] }
func freePorts(t *testing.T, n int) []int { return testutil.FreePorts(t, n) }
func hostPort(p int) string               { return testutil.HostPort(p) }

// proc is one server process.
type proc struct {
	t      *testing.T
	name   string
	bin    string
	args   []string
	env    []string // added to the test's environment
	dir    string   // working directory ("" the test's)
	cmd    *exec.Cmd
	stderr *testutil.SyncBuffer
	ready  chan string   // the "ready" line from stdout
	done   chan struct{} // closed when the process exited
	err    error         // set before done is closed
}

// startProc starts bin with args and returns at once; waitReady waits for its ready line.
func startProc(t *testing.T, name, bin string, args ...string) *proc {
	t.Helper()
	return startProcIn(t, "", nil, name, bin, args...)
}

// startProcIn is startProc with a working directory and extra environment variables.
func startProcIn(t *testing.T, dir string, env []string, name, bin string, args ...string) *proc {
	t.Helper()
	p := &proc{t: t, name: name, bin: bin, args: args, env: env, dir: dir}
	p.start()
	t.Cleanup(func() {
		p.kill()
		if t.Failed() {
			t.Logf("--- %s stderr (last 3000 bytes):\n%s", p.name, tail(p.stderr.String(), 3000))
		}
	})
	return p
}

func (p *proc) start() {
	p.t.Helper()
	p.cmd = exec.Command(p.bin, p.args...)
	p.cmd.Env = append(os.Environ(), p.env...)
	p.cmd.Dir = p.dir
	p.stderr = &testutil.SyncBuffer{}
	p.cmd.Stderr = p.stderr
	out, err := p.cmd.StdoutPipe()
	if err != nil {
		p.t.Fatal(err)
	}
	p.ready = make(chan string, 1)
	p.done = make(chan struct{})
	if err := p.cmd.Start(); err != nil {
		p.t.Fatalf("start %s: %v", p.name, err)
	}
	go func() {
		sc := bufio.NewScanner(out)
		sent := false
		for sc.Scan() {
			if !sent && strings.Contains(sc.Text(), "ready") {
				p.ready <- sc.Text()
				sent = true
			}
		}
		io.Copy(io.Discard, out)
		p.err = p.cmd.Wait()
		close(p.done)
	}()
}

// waitReady waits for the ready line; it reports whether the process failed to bind a port
// (so the caller can retry on other ports).
func (p *proc) waitReady(timeout time.Duration) (portInUse bool, err error) {
	select {
	case line := <-p.ready:
		p.t.Logf("%s: %s", p.name, line)
		return false, nil
	case <-p.done:
		s := p.stderr.String()
		return strings.Contains(s, "address already in use"), fmt.Errorf("%s exited before ready: %v: %s", p.name, p.err, tail(s, 2000))
	case <-time.After(timeout):
		return false, fmt.Errorf("%s not ready after %v: %s", p.name, timeout, tail(p.stderr.String(), 2000))
	}
}

func (p *proc) mustReady() {
	p.t.Helper()
	if _, err := p.waitReady(60 * time.Second); err != nil {
		p.t.Fatal(err)
	}
}

// kill SIGKILLs the process (if running) and waits for it.
func (p *proc) kill() {
	select {
	case <-p.done:
		return
	default:
	}
	_ = p.cmd.Process.Signal(syscall.SIGKILL)
	<-p.done
}

// term sends SIGTERM and waits for a clean exit.
func (p *proc) term(timeout time.Duration) error {
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
		return p.err
	case <-time.After(timeout):
		p.kill()
		return fmt.Errorf("%s did not exit within %v of SIGTERM", p.name, timeout)
	}
}

// restart starts the same command line again.
func (p *proc) restart() {
	p.t.Helper()
	p.kill()
	p.start()
}

// tail is testutil.Tail.
func tail(s string, n int) string { return testutil.Tail(s, n) }

// cliResult is one CLI run.
type cliResult struct {
	code           int
	stdout, stderr string
}

// runBin runs a CLI command to completion with the environment and standard input given.
func runBin(t *testing.T, bin string, env []string, stdin io.Reader, args ...string) cliResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Env = append(os.Environ(), env...)
	cmd.Stdin = stdin
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	r := cliResult{stdout: out.String(), stderr: errb.String()}
	var ee *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &ee):
		r.code = ee.ExitCode()
	default:
		t.Fatalf("run %v: %v", args, err)
	}
	return r
}

// objectValue is the deterministic value of object i of a test (so tests keep checksums only).
func objectValue(seed uint64, i int, size int64) []byte {
	b := make([]byte, size)
	benchmarks.Fill(b, seed<<32|uint64(i))
	return b
}

// logUniformSize draws sizes from lo to hi, uniform in log scale (most objects small, some large).
func logUniformSize(i int, lo, hi int64) int64 {
	// A fixed, spread sequence instead of a random one: reproducible without printing a seed.
	f := float64((i*7919)%1000) / 999
	return int64(float64(lo) * math.Pow(float64(hi)/float64(lo), f))
}

func connectClient(t *testing.T, masters ...string) *client.Client {
	t.Helper()
	c, err := client.Connect(context.Background(), client.Config{MasterAddresses: masters, Timeout: 30 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}
