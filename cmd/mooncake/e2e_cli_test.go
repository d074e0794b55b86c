package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/mooncake-go/mooncake/internal/base"
)

// startStandalone runs `mooncake standalone` with the flags on free ports and returns it with
// its master address.
func startStandalone(t *testing.T, bin, dataDir string, flags ...string) (*proc, string) {
	t.Helper()
	for attempt := 0; ; attempt++ {
		ports := freePorts(t, 2)
		rpc, metrics := ports[0], ports[1]
		args := append([]string{"standalone", "--data_dir", dataDir, "--rpc_port", strconv.Itoa(rpc),
			"--metrics_port", strconv.Itoa(metrics)}, flags...)
		p := startProc(t, "standalone", bin, args...)
		inUse, err := p.waitReady(60 * time.Second)
		if err == nil {
			return p, hostPort(rpc)
		}
		p.kill()
		if !inUse || attempt == 3 {
			t.Fatal(err)
		}
	}
}

// TestCLIStandalone drives the CLI as a user would against `mooncake standalone`: put (file
// and standard input), get (standard output and -o), ls, status, rm in its three forms, bench;
// then the bad-input cases: each one line on stderr, a non-zero exit, and nothing visible.
func TestCLIStandalone(t *testing.T) {
	bin := buildBinary(t)
	dir := t.TempDir()
	// DRAM only, so that a durable put is refused (below).
	sa, master := startStandalone(t, bin, filepath.Join(dir, "data"), "--global_segment_size", "64MiB", "--dram_only")
	env := []string{envMaster + "=" + master}
	cli := func(stdin []byte, args ...string) cliResult {
		t.Helper()
		return runBin(t, bin, env, bytes.NewReader(stdin), args...)
	}
	ok := func(r cliResult, args ...string) cliResult {
		t.Helper()
		if r.code != 0 {
			t.Fatalf("%v: exit %d: %s", args, r.code, r.stderr)
		}
		return r
	}
	// fails checks a bad-input case: one line on stderr starting "mooncake: ", the substring,
	// and a non-zero exit.
	fails := func(r cliResult, sub string) {
		t.Helper()
		if r.code == 0 || strings.Count(r.stderr, "\n") != 1 || !strings.HasPrefix(r.stderr, "mooncake: ") || !strings.Contains(r.stderr, sub) {
			t.Fatalf("want one error line containing %q and a non-zero exit; got exit %d, stderr %q", sub, r.code, r.stderr)
		}
	}

	file := filepath.Join(dir, "v.bin")
	v := objectValue(3, 0, 3<<20+5)
	os.WriteFile(file, v, 0o644)
	ok(cli(nil, "put", "dir/a", file))
	ok(cli([]byte("from stdin"), "put", "dir/b", "-"))
	ok(cli([]byte("other"), "put", "other", "-"))
	if r := ok(cli(nil, "get", "dir/a")); r.stdout != string(v) {
		t.Fatalf("get to stdout: %d bytes, want %d", len(r.stdout), len(v))
	}
	out := filepath.Join(dir, "out.bin")
	ok(cli(nil, "get", "dir/b", "-o", out))
	if b, _ := os.ReadFile(out); string(b) != "from stdin" {
		t.Fatalf("get -o: %q", b)
	}
	if r := ok(cli(nil, "ls")); r.stdout != "3145733\tdir/a\n10\tdir/b\n5\tother\n" {
		t.Fatalf("ls: %q", r.stdout)
	}
	if r := ok(cli(nil, "ls", "--prefix", "dir/")); strings.Count(r.stdout, "\n") != 2 {
		t.Fatalf("ls --prefix: %q", r.stdout)
	}
	r := ok(cli(nil, "status", "--json"))
	var st struct {
		Leader  string `json:"leader"`
		Keys    int64  `json:"keys"`
		Workers []any  `json:"workers"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &st); err != nil || st.Leader != "m1" || st.Keys != 3 || len(st.Workers) != 1 {
		t.Fatalf("status --json: %v %+v\n%s", err, st, r.stdout)
	}
	if r := ok(cli(nil, "status")); !strings.Contains(r.stdout, "leader") || !strings.Contains(r.stdout, "keys     3") {
		t.Fatalf("status:\n%s", r.stdout)
	}

	// A Mooncake-style mooncake.json names the master (its etcd metadata_server and RDMA
	// device are accepted and ignored); a flag overrides the file.
	cfgFile := filepath.Join(dir, "mooncake.json")
	os.WriteFile(cfgFile, []byte(`{"local_hostname": "127.0.0.1", "metadata_server": "etcd://127.0.0.1:2379",
		"master_server_address": "`+master+`", "global_segment_size": 3355443200, "local_buffer_size": "1GiB",
		"protocol": "tcp", "device_name": "mlx5_0"}`), 0o644)
	fileEnv := []string{envConfigPath + "=" + cfgFile}
	if r := runBin(t, bin, fileEnv, nil, "ls", "--prefix", "other"); r.code != 0 || r.stdout != "5\tother\n" {
		t.Fatalf("ls with a config file: exit %d %q %q", r.code, r.stdout, r.stderr)
	}
	fails(runBin(t, bin, fileEnv, nil, "ls", "--master_server_address", hostPort(freePort(t))), "no master reachable")

	// Bad input.
	fails(cli(nil, "put", "--bogus", "k", file), "unknown flag: --bogus")
	fails(cli(nil, "bench", "--size", "12XB"), `invalid size "12XB"`)
	fails(runBin(t, bin, []string{envMaster + "=127.0.0.1:" + strconv.Itoa(freePort(t))}, nil, "get", "dir/a"), "no master reachable")
	fails(cli(nil, "put", strings.Repeat("k", base.MaxKeyLen+1), file), "the limit is 4096")
	big := filepath.Join(dir, "big.bin")
	f, _ := os.Create(big)
	f.Truncate(65 << 20) // a sparse file larger than the one 64 MiB segment
	f.Close()
	fails(cli(nil, "put", "big", big), "larger than every worker segment")
	fails(cli(nil, "put", "--replicas", "2", "two", file), "replicas")
	fails(cli(nil, "put", "dir/a", file), "already exists")
	fails(cli(nil, "get", "missing"), "not found")
	fails(cli(nil, "get", "missing", "-o", filepath.Join(dir, "missing.out")), "not found")
	if _, err := os.Stat(filepath.Join(dir, "missing.out")); !os.IsNotExist(err) {
		t.Fatalf("a failed get -o left a file: %v", err)
	}
	fails(cli(nil, "rm", "missing"), "not found")
	fails(cli([]byte("x"), "put", "--persistence", "durable", "dur", "-"), "durable needs a lower tier") // --dram_only
	for _, k := range []string{"big", "two", "dur"} {
		if r := ok(cli(nil, "ls", "--prefix", k)); r.stdout != "" {
			t.Fatalf("a refused put is visible: %q", r.stdout)
		}
	}

	// Remove, three ways.
	ok(cli(nil, "rm", "other"))
	if r := ok(cli(nil, "rm", "--regex", "^dir/")); !strings.Contains(r.stdout, "removed 2 object(s)") {
		t.Fatalf("rm --regex: %q", r.stdout)
	}
	ok(cli([]byte("x"), "put", "again", "-"))
	if r := ok(cli(nil, "rm", "--all")); !strings.Contains(r.stdout, "removed 1 object(s)") {
		t.Fatalf("rm --all: %q", r.stdout)
	}
	if r := ok(cli(nil, "ls")); r.stdout != "" {
		t.Fatalf("ls after rm --all: %q", r.stdout)
	}

	// bench prints GB/s, ops/s, p50, p99 and, with --baseline, loopback TCP and the ratio.
	for _, op := range []string{"put", "get"} {
		r := ok(cli(nil, "bench", "--op", op, "--size", "256KiB", "--count", "40", "--concurrency", "4", "--baseline"))
		for _, want := range []string{"mooncake " + op, "loopback " + op, "GB/s", "ops/s", "p50", "p99", "ratio"} {
			if !strings.Contains(r.stdout, want) {
				t.Fatalf("bench --op %s output lacks %q:\n%s", op, want, r.stdout)
			}
		}
		t.Logf("bench --op %s (noisy, shared machine):\n%s", op, r.stdout)
		if op != "put" {
			continue
		}
		// A put from this host goes through shared memory (a staging area the worker copies
		// from); --baseline also times the same puts over TCP in each round.
		m := regexp.MustCompile(`write path +(\d+) replica writes through shared memory, (\d+) over TCP`).FindStringSubmatch(r.stdout)
		if !strings.Contains(r.stdout, "put over TCP") || m == nil || m[1] != "40" || m[2] != "0" {
			t.Fatalf("bench --op put --baseline: want a put over TCP line and 40 writes through shared memory:\n%s", r.stdout)
		}
	}
	// A get from another process on this host copies out of the worker's shared arena
	// (gets racing the first one, which maps it, may go over TCP); with
	// --shared_memory=false every get goes over TCP.
	r = ok(cli(nil, "bench", "--op", "get", "--size", "64KiB", "--count", "40", "--concurrency", "1"))
	if m := regexp.MustCompile(`read path +(\d+) gets through shared memory, (\d+) over TCP`).FindStringSubmatch(r.stdout); m == nil || m[1] != "40" || m[2] != "0" {
		t.Fatalf("bench get with shared memory: want 40 gets through shared memory:\n%s", r.stdout)
	}
	r = ok(cli(nil, "bench", "--op", "get", "--size", "64KiB", "--count", "40", "--concurrency", "4", "--shared_memory=false"))
	if !strings.Contains(r.stdout, "read path      0 gets through shared memory, 40 over TCP") {
		t.Fatalf("bench get --shared_memory=false:\n%s", r.stdout)
	}
	// --exists: an exists before each get (40 pairs).
	r = ok(cli(nil, "bench", "--op", "get", "--exists", "--size", "4KiB", "--count", "40", "--concurrency", "4", "--shared_memory=false"))
	if !strings.Contains(r.stdout, "(40 ops, 160.0 KiB") {
		t.Fatalf("bench get --exists:\n%s", r.stdout)
	}
	// --batch 8: each put operation is one BatchPut of 8 objects; GB/s counts all of them.
	r = ok(cli(nil, "bench", "--op", "put", "--size", "16KiB", "--count", "5", "--batch", "8", "--concurrency", "2", "--baseline"))
	if !strings.Contains(r.stdout, "mooncake put x8") || !strings.Contains(r.stdout, "(5 ops, 640.0 KiB") || !strings.Contains(r.stdout, "(40 ops, 640.0 KiB") {
		t.Fatalf("bench --batch 8: want 5 batches of 8 objects and a baseline of 40 exchanges:\n%s", r.stdout)
	}
	if r := ok(cli(nil, "ls")); r.stdout != "" {
		t.Fatalf("bench left objects: %q", r.stdout)
	}
	if err := sa.term(60 * time.Second); err != nil {
		t.Fatalf("standalone SIGTERM: %v\n%s", err, tail(sa.stderr.String(), 2000))
	}
}
