package main

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
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/mooncake-go/mooncake/client"
	"github.com/mooncake-go/mooncake/cmd/internal/mcconfig"
	"github.com/mooncake-go/mooncake/internal/base"
	"github.com/mooncake-go/mooncake/internal/testutil"
)

func TestMain(m *testing.M) {
	testutil.VerifyNoLeaks(m, goleak.Cleanup(func(code int) { built.Remove(); os.Exit(code) }))
}

// built is the library, the mooncake binary and the check program, built once for every test
// of this package that runs them (buildCheck).
var built testutil.Shared[struct{ dir, prog, bin string }]

// buildShared is buildCheck, once per test binary (see built); dir holds the library.
func buildShared(t *testing.T) (dir, prog, bin string) {
	t.Helper()
	v := built.Get(t, func(t testing.TB, dir string) struct{ dir, prog, bin string } {
		prog, bin := buildCheck(t, dir)
		return struct{ dir, prog, bin string }{dir, prog, bin}
	})
	return v.dir, v.prog, v.bin
}

// buildCheck builds the C library and the mooncake binary into dir (in parallel: the two
// links are most of the test's time), checks that every function the header declares is
// exported, and compiles testdata/check.c with gcc against the header alone. It returns the
// check program and the binary.
func buildCheck(tb testing.TB, dir string) (prog, bin string) {
	tb.Helper()
	gcc := testutil.LookTool(tb, "gcc")
	lib := filepath.Join(dir, "libmooncake_store.so")
	var wg sync.WaitGroup
	wg.Add(2)
	go func() {
		defer wg.Done()
		testutil.GoBuild(tb, []string{"CGO_ENABLED=1"}, "-buildmode=c-shared", "-o", lib, "./cmd/libmooncake_store")
	}()
	go func() {
		defer wg.Done()
		bin = testutil.BuildMooncake(tb, dir)
	}()
	wg.Wait()
	if tb.Failed() {
		tb.FailNow()
	}
	// The header is the contract: every function it declares is exported by the library.
	checkExports(tb, lib)
	return compileC(tb, gcc, dir, "testdata/check.c"), bin
}

// compileC compiles src with gcc against mooncake_store.h alone and links it to the library
// in dir, into dir; it returns the program.
func compileC(tb testing.TB, gcc, dir, src string) string {
	tb.Helper()
	// Only this directory's header is on the include path: not the generated one beside lib.
	hdr := tb.TempDir()
	h, err := os.ReadFile("mooncake_store.h")
	if err != nil {
		tb.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(hdr, "mooncake_store.h"), h, 0o644); err != nil {
		tb.Fatal(err)
	}
	prog := filepath.Join(dir, strings.TrimSuffix(filepath.Base(src), ".c"))
	cc := exec.Command(gcc, "-std=c11", "-O2", "-Wall", "-Wextra", "-Werror", "-I", hdr, "-o", prog, src,
		"-L", dir, "-lmooncake_store", "-Wl,-rpath,"+dir, "-lpthread")
	if out, err := cc.CombinedOutput(); err != nil {
		tb.Fatalf("gcc: %v\n%s", err, out)
	}
	return prog
}

// TestCProgram compiles testdata/check.c with gcc against mooncake_store.h alone, links it to
// the library built here and runs it against a real `mooncake standalone` process: put,
// get_into, upserts, parts, batch and multi-buffer forms, ranges, removes, error codes,
// misses, short buffers, bad pointers, eight threads, close and setup again with an embedded
// worker.
func TestCProgram(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the library and runs the binary; skipped with -short")
	}
	_, prog, bin := buildShared(t)
	dir := t.TempDir()

	// A short client_ttl: a closed embedded worker's objects go after it (see testEmbeddedWorker).
	master, _ := testutil.StartStandalone(t, bin, filepath.Join(dir, "data"), "256MiB", "--client_ttl", "3s")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	run := exec.CommandContext(ctx, prog, master)
	// The program runs with no MOONCAKE_* variables of the machine's.
	run.Env = slices.DeleteFunc(os.Environ(), func(e string) bool { return strings.HasPrefix(e, "MOONCAKE_") })
	out, err := run.CombinedOutput()
	t.Logf("check output:\n%s", out)
	if err != nil || !strings.Contains(string(out), "ok all") {
		t.Fatalf("check: %v", err)
	}
	t.Run("embedded worker, closed", func(t *testing.T) { testEmbeddedWorker(t, prog, master, "close") })
	t.Run("embedded worker, process exit", func(t *testing.T) { testEmbeddedWorker(t, prog, master, "exit") })

	// One warning each for the Mooncake values this build ignores (metadata_server is given
	// only to the second setup; the warning is printed once per process).
	for _, w := range []string{"protocol is not in this build", "device_name is ignored", "metadata_server is ignored"} {
		if n := strings.Count(string(out), w); n != 1 {
			t.Errorf("warning %q printed %d times, want once", w, n)
		}
	}
}

// serveProc is the check program in "serve" mode: a process whose embedded worker holds
// the object "served".
type serveProc struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
	lines *bufio.Scanner
	host  string // the embedded worker's address
}

func startServe(ctx context.Context, t *testing.T, prog, master string) *serveProc {
	t.Helper()
	sp := &serveProc{cmd: exec.CommandContext(ctx, prog, master, "serve")}
	var err error
	if sp.stdin, err = sp.cmd.StdinPipe(); err != nil {
		t.Fatal(err)
	}
	stdout, err := sp.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	sp.cmd.Stderr = os.Stderr
	if err := sp.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		sp.stdin.Close()
		if sp.cmd.ProcessState == nil {
			sp.cmd.Wait()
		}
	})
	sp.lines = bufio.NewScanner(stdout)
	if !sp.lines.Scan() || !strings.HasPrefix(sp.lines.Text(), "served ") {
		t.Fatalf("serve: %q", sp.lines.Text())
	}
	sp.host = strings.TrimPrefix(sp.lines.Text(), "served ")
	return sp
}

// testEmbeddedWorker runs the program's "serve" mode. This test process reads the object
// through the Go client (from the embedded worker, its only replica), then has the program
// destroy its store (how "close") or exit without closing it (how "exit"), and waits for the
// object to go (the leader finds an ephemeral worker dead after its client_ttl, 3 s here) and
// for the worker to be retired: by its own store after close, or, after an exit, by the next
// store set up anywhere (a second serve process here).
func testEmbeddedWorker(t *testing.T, prog, master, how string) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	sp := startServe(ctx, t, prog, master)
	cl, err := client.Connect(ctx, client.Config{MasterAddresses: []string{master}, LookupCacheTTL: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	info, err := cl.Describe(ctx, "served")
	if err != nil || len(info.Replicas) != 1 || info.Replicas[0].Address != sp.host {
		t.Fatalf("the object is not on the embedded worker %s: %+v %v", sp.host, info, err)
	}
	id := string(info.Replicas[0].WorkerID)
	if !strings.HasPrefix(id, embeddedPrefix) {
		t.Fatalf("embedded worker id %q", id)
	}
	got, err := cl.Get(ctx, "served")
	if err != nil || len(got) != 300000 || got[1] != 131+42 { // check.c's fill(v, n, 42)
		t.Fatalf("get from the embedded worker: %d bytes, %v", len(got), err)
	}

	io.WriteString(sp.stdin, how+"\n")
	if how == "exit" {
		if err := sp.cmd.Wait(); err != nil {
			t.Fatalf("serve exit: %v", err)
		}
	} else if !sp.lines.Scan() || sp.lines.Text() != "closed" {
		t.Fatalf("serve: %q", sp.lines.Text())
	}
	// After close the object is gone at once; after an exit without destroy the worker's
	// connection closed: a get fails at once (its only replica is unreachable), and the
	// object is gone from the metadata once the leader marks the worker dead, after
	// --client_disconnect_grace (docs/operations.md).
	if how != "exit" {
		if ok, err := cl.Exists(ctx, "served"); ok || err != nil {
			t.Fatalf("exists right after close: %v %v", ok, err)
		}
	}
	testutil.WaitFor(t, "the closed worker's object to go", 60*time.Second, func() error {
		if _, err := cl.Get(ctx, "served"); !errors.Is(err, base.ErrObjectNotFound) {
			return fmt.Errorf("get: %v", err)
		}
		if ok, err := cl.Exists(ctx, "served"); ok || err != nil {
			return fmt.Errorf("exists after its worker went: %v %v", ok, err)
		}
		return nil
	})
	if how == "exit" {
		startServe(ctx, t, prog, master) // its setup retires the dead embedded worker
	}
	testutil.WaitFor(t, "the worker to be retired", 60*time.Second, func() error {
		st, err := cl.Status(ctx)
		if err != nil {
			return err
		}
		for _, w := range st.Workers {
			if w.ID == id {
				return fmt.Errorf("worker %s is still listed (%s)", id, w.State)
			}
		}
		return nil
	})
}

// checkExports fails when a function the header declares is not exported by lib.
func checkExports(t testing.TB, lib string) {
	t.Helper()
	h, err := os.ReadFile("mooncake_store.h")
	if err != nil {
		t.Fatal(err)
	}
	declared := regexp.MustCompile(`(?m)\b(mooncake_store_[a-z_]+)\(`).FindAllStringSubmatch(string(h), -1)
	nm, err := exec.Command("nm", "-D", "--defined-only", lib).Output()
	if err != nil {
		t.Skipf("nm: %v", err)
	}
	if len(declared) < 30 {
		t.Fatalf("found only %d declarations in the header", len(declared))
	}
	for _, d := range declared {
		if !regexp.MustCompile(`(?m) T ` + d[1] + `$`).Match(nm) {
			t.Errorf("the header declares %s but the library does not export it", d[1])
		}
	}
}

func TestErrorCode(t *testing.T) {
	f := func(err error, want int) {
		t.Helper()
		if got := errorCode(err); got != want {
			t.Errorf("errorCode(%v) = %d, want %d", err, got, want)
		}
	}
	f(nil, 0)
	f(fmt.Errorf("get: %w", base.ErrObjectNotFound), -704)
	f(&base.CodeError{Code: base.CodeObjectAlreadyExists}, -705)
	f(base.ErrInvalidParams, -600)
	f(base.ErrTooLarge, -600)
	f(base.ErrInvalidKey, -400)
	f(base.ErrNoSpace, -200)
	f(base.ErrCorruption, -801)
	f(base.ErrNotSupported, -1012)
	f(base.ErrUnavailable, -900)
	f(context.DeadlineExceeded, -901)
	f(base.ErrClosed, -1010)
	f(errNotSetUp, -1010)
	f(&net.OpError{Op: "read", Err: syscall.ECONNRESET}, -800)
	f(io.ErrUnexpectedEOF, -800)
	f(errors.New("something else"), -1)
	// A get whose replicas failed differently: the sentinel wins over the transport error.
	f(errors.Join(io.EOF, base.ErrCorruption), -801)
	f(context.Canceled, -900)
}

func TestResolveMasters(t *testing.T) {
	env := map[string]string{}
	getenv := func(k string) string { return env[k] }
	file := &mcconfig.ClientFile{MasterServerAddress: []string{"f:1"}}
	f := func(arg string, want ...string) {
		t.Helper()
		got, err := resolveMasters(arg, getenv, file)
		if err != nil || !slices.Equal(got, want) {
			t.Errorf("resolveMasters(%q) = %v, %v; want %v", arg, got, err, want)
		}
	}
	f("a:1, b:2", "a:1", "b:2")
	f("", "f:1")
	env[mcconfig.EnvMaster] = "e:1"
	f("", "e:1")
	f("a:1", "a:1")
	delete(env, mcconfig.EnvMaster)
	file = &mcconfig.ClientFile{}
	f("", "127.0.0.1:50051")
	if _, err := resolveMasters("etcd://x:2379", getenv, file); !errors.Is(err, base.ErrNotSupported) {
		t.Errorf("etcd:// address: %v", err)
	}
	if _, err := resolveMasters("nohost", getenv, file); !errors.Is(err, base.ErrInvalidParams) {
		t.Errorf("address without a port: %v", err)
	}
	pick := func(string) int { return 12345 }
	for _, c := range []struct {
		in, want string
		picked   bool
	}{{"", "localhost:12345", true}, {"h", "h:12345", true}, {"h:5", "h:5", false}, {"10.0.0.1", "10.0.0.1:12345", true}, {"::1", "[::1]:12345", true}} {
		if got, picked, err := localAddress(c.in, pick); err != nil || got != c.want || picked != c.picked {
			t.Errorf("localAddress(%q) = %q, %v, %v; want %q, %v", c.in, got, picked, err, c.want, c.picked)
		}
	}
	// Mooncake's range, and a port that can be bound there now.
	for range 20 {
		p := pickHostPort("127.0.0.1")
		if p < hostPortMin || p > hostPortMax {
			t.Fatalf("pickHostPort = %d, want %d..%d", p, hostPortMin, hostPortMax)
		}
		l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(p)))
		if err != nil {
			t.Fatalf("picked port %d cannot be bound: %v", p, err)
		}
		l.Close()
	}
}
