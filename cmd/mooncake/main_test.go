package main

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"
	"go.uber.org/goleak"

	"github.com/mooncake-go/mooncake/internal/base"
	"github.com/mooncake-go/mooncake/internal/testutil"
	"github.com/mooncake-go/mooncake/server/config"
	"github.com/mooncake-go/mooncake/server/master"
)

func TestMain(m *testing.M) {
	testutil.VerifyNoLeaks(m, goleak.Cleanup(func(code int) {
		removeBinary()
		os.Exit(code)
	}))
}

// runCLI runs one command line in-process with the given environment.
func runCLI(t *testing.T, envv map[string]string, stdin string, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errb bytes.Buffer
	getenv := func(k string) string { return envv[k] }
	code = run(context.Background(), append([]string{"mooncake"}, args...), strings.NewReader(stdin), &out, &errb, getenv)
	return code, out.String(), errb.String()
}

// TestBadInput: every bad command line gets one line on stderr and a non-zero exit, before
// anything is started or sent.
func TestBadInput(t *testing.T) {
	dir := t.TempDir()
	badJSON := filepath.Join(dir, "bad.json")
	os.WriteFile(badJSON, []byte(`{"global_segment_size": "4GiB", "colour": "blue"}`), 0o644)
	f := func(want int, wantSub string, envv map[string]string, args ...string) {
		t.Helper()
		code, _, stderr := runCLI(t, envv, "", args...)
		if code != want {
			t.Fatalf("%v: exit %d, want %d (stderr %q)", args, code, want, stderr)
		}
		if strings.Count(stderr, "\n") != 1 || !strings.HasPrefix(stderr, "mooncake: ") || !strings.Contains(stderr, wantSub) {
			t.Fatalf("%v: stderr %q, want one line containing %q", args, stderr, wantSub)
		}
	}
	f(exitUsage, "unknown flag: --bogus", nil, "standalone", "--bogus")
	f(exitUsage, "unknown command", nil, "frobnicate")
	f(exitUsage, `invalid size "12XB"`, nil, "standalone", "--global_segment_size", "12XB")
	f(exitUsage, `invalid size "12XB"`, nil, "worker", "--global_segment_size", "12XB")
	f(exitUsage, `invalid size "lots"`, nil, "bench", "--size", "lots")
	f(exitUsage, "key is 4097 bytes", nil, "put", strings.Repeat("k", base.MaxKeyLen+1), "/dev/null")
	f(exitUsage, "key is empty", nil, "get", "")
	f(exitUsage, "want KEY FILE", nil, "put", "onlykey")
	f(exitUsage, "--replicas must be", nil, "put", "--replicas", "0", "k", "-")
	f(exitUsage, "unknown persistence", nil, "put", "--persistence", "sometimes", "k", "-")
	f(exitUsage, "exactly one of", nil, "rm")
	f(exitUsage, "exactly one of", nil, "rm", "k", "--all")
	f(exitUsage, "--regex", nil, "rm", "--regex", "a(")
	f(exitUsage, "unknown op", nil, "bench", "--op", "scan")
	f(exitUsage, "concurrency must be", nil, "bench", "--concurrency", "0")
	f(exitUsage, "batch is for puts only", nil, "bench", "--op", "get", "--batch", "2")
	f(exitUsage, "exists first is for gets only", nil, "bench", "--op", "put", "--exists")
	f(exitUsage, "--data_dir is required", nil, "master", "--id", "m1")
	f(exitUsage, "--id is required", nil, "master")
	f(exitUsage, "does not list this master", nil, "master", "--id", "m4", "--data_dir", dir, "--raft_address", "127.0.0.1:7004",
		"--peers", "m1=127.0.0.1:7001,m2=127.0.0.1:7002")
	f(exitUsage, "want id=host:port", nil, "master", "--id", "m1", "--data_dir", dir, "--raft_address", "127.0.0.1:7001", "--peers", "m1")
	f(exitUsage, `--id: invalid params: master id "m 1"`, nil, "master", "--id", "m 1", "--data_dir", dir, "--raft_address", "127.0.0.1:7001")
	f(exitUsage, "which --peers does not list", nil, "master", "--id", "m1", "--data_dir", dir, "--raft_address", "127.0.0.1:7001",
		"--peer_rpc_addresses", "m9=127.0.0.1:50059")
	f(exitUsage, "but --rpc_address is", nil, "master", "--id", "m1", "--data_dir", dir, "--raft_address", "127.0.0.1:7001",
		"--rpc_address", "127.0.0.1:50051", "--peer_rpc_addresses", "m1=127.0.0.1:50052")
	f(exitUsage, "eviction_ratio", nil, "master", "--id", "m1", "--data_dir", dir, "--raft_address", "127.0.0.1:7001", "--eviction_ratio", "1.5")
	f(exitUsage, "--kv_events_backend_id is required", nil, "master", "--id", "m1", "--data_dir", dir, "--raft_address", "127.0.0.1:7001",
		"--enable_kv_events", "--kv_events_bind_endpoint", "tcp://127.0.0.1:5557")
	f(exitUsage, "want tcp://host:port", nil, "standalone", "--enable_kv_events", "--kv_events_backend_id", "b",
		"--kv_events_bind_endpoint", "ipc:///tmp/x")
	f(exitUsage, "--persistence durable needs --root_fs_dir", nil, "worker", "--persistence", "durable")
	f(exitUsage, "--huge_pages", nil, "worker", "--huge_pages", "sometimes")
	f(exitUsage, "--warm_up needs the NVMe tier (standalone has one unless --dram_only)", nil, "standalone", "--dram_only", "--warm_up")
	f(exitUsage, "--persistence durable needs the NVMe tier", nil, "standalone", "--dram_only", "--persistence", "durable")
	f(exitUsage, "--dram_only and root_fs_dir both given", nil, "standalone", "--dram_only", "--root_fs_dir", dir)
	f(exitUsage, "--ssd_capacity needs --root_fs_dir", nil, "worker", "--ssd_capacity", "1GiB")
	f(exitUsage, "--log_level", nil, "status", "--log_level", "loud")
	f(exitUsage, `unknown field "colour"`, map[string]string{envConfigPath: badJSON}, "standalone")
	f(exitUsage, "no such file", map[string]string{envConfigPath: filepath.Join(dir, "missing.json")}, "status")
	f(exitUsage, "want host:port", map[string]string{envMaster: "nocolon"}, "status")
	f(exitError, "no such file", nil, "put", "k", filepath.Join(dir, "missing"))
}

func TestFileConfig(t *testing.T) {
	good := `{
	  "local_hostname": "10.0.0.5",
	  "metadata_server": "etcd://localhost:2379",
	  "global_segment_size": 3355443200,
	  "local_buffer_size": "1GiB",
	  "protocol": "tcp",
	  "device_name": "erdma_0",
	  "master_server_address": "10.0.0.1:50051, 10.0.0.2:50051",
	  "root_fs_dir": "/mnt/nvme",
	  "cluster_id": "prod_1"
	}`
	fc, err := parseFileConfig(strings.NewReader(good))
	if err != nil {
		t.Fatal(err)
	}
	if *fc.GlobalSegmentSize != 3355443200 || *fc.LocalBufferSize != 1<<30 || len(fc.MasterServerAddress) != 2 ||
		fc.MasterServerAddress[1] != "10.0.0.2:50051" || fc.RootFSDir != "/mnt/nvme" || fc.ClusterID != "prod_1" {
		t.Fatalf("%+v", fc)
	}
	fc, err = parseFileConfig(strings.NewReader(`{"master_server_address": ["a:1", "b:2,c:3"]}`))
	if err != nil || strings.Join(fc.MasterServerAddress, " ") != "a:1 b:2 c:3" {
		t.Fatalf("%v %v", fc, err)
	}
	bad := func(s, sub string) {
		t.Helper()
		_, err := parseFileConfig(strings.NewReader(s))
		if err == nil || !strings.Contains(err.Error(), sub) {
			t.Fatalf("%s: %v, want %q", s, err, sub)
		}
		if !errors.Is(err, base.ErrInvalidParams) && !errors.Is(err, base.ErrNotSupported) {
			t.Fatalf("%s: %v is not typed", s, err)
		}
	}
	bad(`{"global_segment_size": "12XB"}`, "12XB")
	bad(`{"global_segment_size": 0}`, "must be positive")
	bad(`{"colour": 1}`, "unknown field")
	bad(`{"master_server_address": 5}`, "want a string")
	bad(`{"master_server_address": "etcd://x:2379"}`, "etcd discovery is not supported")
	bad(`{"master_server_address": "host"}`, "host:port")
	bad(`{"cluster_id": "a/b"}`, "cluster id")
	bad(`{"local_hostname": "h:1"}`, "without a port")
	bad(`{"protocol": 5}`, `key "protocol"`)
	bad(`{} {}`, "data after")
	bad(`[`, "invalid params")
}

// TestFlagsOverrideFile: a flag on the command line beats the file; the file beats defaults.
func TestFlagsOverrideFile(t *testing.T) {
	fc, err := parseFileConfig(strings.NewReader(`{"global_segment_size": "2GiB", "master_server_address": "10.0.0.1:50051",
		"root_fs_dir": "/tmp/x", "cluster_id": "c1", "local_hostname": "10.0.0.9"}`))
	if err != nil {
		t.Fatal(err)
	}
	resolve := func(args ...string) workerSettings {
		t.Helper()
		var f workerFlags
		fs := pflag.NewFlagSet("worker", pflag.ContinueOnError)
		f.register(fs, false)
		if err := fs.Parse(args); err != nil {
			t.Fatal(err)
		}
		s, err := f.resolve(fs, fc, false)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	s := resolve()
	if s.GlobalSegmentSize != 2<<30 || s.MasterAddresses[0] != "10.0.0.1:50051" || s.RootFSDir != "/tmp/x" ||
		s.ClusterID != "c1" || s.Address != "10.0.0.9:12300" || s.WorkerID != "" || s.MetricsAddress != "10.0.0.9:0" {
		t.Fatalf("file values not used: %+v", s)
	}
	s = resolve("--global_segment_size", "256MiB", "--master_server_address", "a:1,b:2", "--cluster_id", "c2",
		"--worker_address", "127.0.0.1:12301", "--worker_id", "w1", "--persistence", "durable", "--ssd_capacity", "10GiB")
	if s.GlobalSegmentSize != 256<<20 || len(s.MasterAddresses) != 2 || s.ClusterID != "c2" || s.Address != "127.0.0.1:12301" ||
		s.WorkerID != "w1" || s.Persistence != base.PersistenceDurable || s.SSDCapacity != 10<<30 {
		t.Fatalf("flags did not override: %+v", s)
	}
	if s.PrefaultArena || !resolve("--prefault_arena").PrefaultArena {
		t.Fatalf("--prefault_arena: default %v, want false; set: not passed on", s.PrefaultArena)
	}
	if !s.PopulateArena || resolve("--populate_arena=false").PopulateArena {
		t.Fatalf("--populate_arena: default %v, want true; false: not passed on", s.PopulateArena)
	}
}

func TestMasterSettings(t *testing.T) {
	var f masterFlags
	fs := pflag.NewFlagSet("master", pflag.ContinueOnError)
	f.register(fs, false)
	err := fs.Parse([]string{"--id", "m2", "--data_dir", "/d", "--rpc_address", "127.0.0.1:50052", "--raft_address", "127.0.0.1:7002",
		"--peers", "m1=127.0.0.1:7001,m2=127.0.0.1:7002,m3=127.0.0.1:7003", "--metrics_port", "9004",
		"--peer_rpc_addresses", "m1=127.0.0.1:50051,m2=127.0.0.1:50052"})
	if err != nil {
		t.Fatal(err)
	}
	s, err := f.resolve(fs, &fileConfig{}, false)
	if err != nil {
		t.Fatal(err)
	}
	if s.ID != "m2" || len(s.Peers) != 3 || s.Peers[2] != (peer{"m3", "127.0.0.1:7003", ""}) || s.Peers[0].RPCAddr != "127.0.0.1:50051" || s.MetricsAddress != "127.0.0.1:9004" ||
		s.ClusterID != base.DefaultClusterID || s.ClientTTL != config.MasterDefaults.ClientTTL || s.EvictionRatio != config.MasterDefaults.EvictionRatio ||
		s.WorkerRestartGrace != config.MasterDefaults.WorkerRestartGrace {
		t.Fatalf("%+v", s)
	}
	if s.WorkerRestartGrace != master.DefaultWorkerRestartGrace {
		t.Fatalf("--worker_restart_grace default %v, the server's %v", s.WorkerRestartGrace, master.DefaultWorkerRestartGrace)
	}
	if s.ClientDisconnectGrace != master.DefaultClientDisconnectGrace {
		t.Fatalf("--client_disconnect_grace default %v, the server's %v", s.ClientDisconnectGrace, master.DefaultClientDisconnectGrace)
	}
	// --worker_restart_grace 0 gives no grace: the master gets a grace of client_ttl (a zero
	// would take the server's default); a negative one is refused.
	e := env{stderr: io.Discard}
	for _, tc := range []struct {
		arg  string
		want time.Duration
	}{{"0", config.MasterDefaults.ClientTTL}, {"5m", 5 * time.Minute}} {
		f := masterFlags{}
		fs := pflag.NewFlagSet("master", pflag.ContinueOnError)
		f.register(fs, true)
		if err := fs.Parse([]string{"--worker_restart_grace", tc.arg}); err != nil {
			t.Fatal(err)
		}
		s, err := f.resolve(fs, &fileConfig{}, true)
		if err != nil {
			t.Fatal(err)
		}
		if got := e.masterConfig(s).WorkerRestartGrace; got != tc.want {
			t.Fatalf("--worker_restart_grace %s: master config %v, want %v", tc.arg, got, tc.want)
		}
	}
	f = masterFlags{}
	fs = pflag.NewFlagSet("master", pflag.ContinueOnError)
	f.register(fs, true)
	if err := fs.Parse([]string{"--worker_restart_grace", "-1s"}); err != nil {
		t.Fatal(err)
	}
	if _, err := f.resolve(fs, &fileConfig{}, true); !errors.Is(err, base.ErrInvalidParams) {
		t.Fatalf("negative --worker_restart_grace: %v", err)
	}
}

// TestRaftFsyncFlag: the raft log is fsynced unless --raft_fsync=false (master and standalone).
func TestRaftFsyncFlag(t *testing.T) {
	e := env{stderr: io.Discard}
	for _, standalone := range []bool{false, true} {
		for _, tc := range []struct {
			args       []string
			wantNoSync bool
		}{{nil, false}, {[]string{"--raft_fsync=false"}, true}, {[]string{"--raft_fsync"}, false}} {
			if got := resolveMasterFlags(t, &e, standalone, tc.args).RaftNoSync; got != tc.wantNoSync {
				t.Fatalf("standalone %v, %v: RaftNoSync %v, want %v", standalone, tc.args, got, tc.wantNoSync)
			}
		}
	}
}

// resolveMasterFlags parses args as `mooncake master` (with the flags it requires) or standalone
// does and returns the master config they resolve to.
func resolveMasterFlags(t *testing.T, e *env, standalone bool, args []string) master.Config {
	t.Helper()
	var f masterFlags
	fs := pflag.NewFlagSet("master", pflag.ContinueOnError)
	f.register(fs, standalone)
	if !standalone {
		args = append([]string{"--id", "m1", "--data_dir", "/d", "--raft_address", "127.0.0.1:7001"}, args...)
	}
	if err := fs.Parse(args); err != nil {
		t.Fatal(err)
	}
	s, err := f.resolve(fs, &fileConfig{}, standalone)
	if err != nil {
		t.Fatal(err)
	}
	return e.masterConfig(s)
}

// TestSummaryIntervalFlag: --summary_interval (declared once, in the config table) reaches the
// master's config, in `mooncake master` and standalone alike; the default is the table's.
func TestSummaryIntervalFlag(t *testing.T) {
	e := env{stderr: io.Discard}
	for _, standalone := range []bool{false, true} {
		for _, tc := range []struct {
			args []string
			want time.Duration
		}{{nil, config.MasterDefaults.SummaryInterval}, {[]string{"--summary_interval", "3s"}, 3 * time.Second}} {
			if got := resolveMasterFlags(t, &e, standalone, tc.args).SummaryInterval; got != tc.want {
				t.Fatalf("standalone %v, %v: SummaryInterval %v, want %v", standalone, tc.args, got, tc.want)
			}
		}
	}
}
