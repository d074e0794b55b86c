package main

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"
)

func TestCompatArgs(t *testing.T) {
	f := func(in, want []string) {
		t.Helper()
		if got := compatArgs(in); !slices.Equal(got, want) {
			t.Fatalf("compatArgs(%q) = %q, want %q", in, got, want)
		}
	}
	f([]string{"/usr/bin/mooncake_master", "-port=10001", "-v=1", "--root_fs_dir", "/d"},
		[]string{"/usr/bin/mooncake_master", "mooncake_master", "--port=10001", "-v=1", "--root_fs_dir", "/d"})
	f([]string{"mooncake", "mooncake_client", "-host", "h", "--eviction_ratio", "-0.5"},
		[]string{"mooncake", "mooncake_client", "--host", "h", "--eviction_ratio", "-0.5"})
	f([]string{"./mooncake_http_metadata_server", "--port", "8080", "--", "-x"},
		[]string{"./mooncake_http_metadata_server", "mooncake_http_metadata_server", "--port", "8080", "--", "-x"})
	f([]string{"mooncake", "put", "-k"}, []string{"mooncake", "put", "-k"}) // other commands untouched
	// The image's entrypoint given its own name first (docker run IMAGE mooncake ...).
	f([]string{"/usr/local/bin/mooncake", "mooncake", "master", "--id", "m1"}, []string{"/usr/local/bin/mooncake", "master", "--id", "m1"})
	f([]string{"/usr/local/bin/mooncake", "mooncake", "mooncake_master", "-port=1"},
		[]string{"/usr/local/bin/mooncake", "mooncake_master", "--port=1"})
	f([]string{"mooncake", "mooncake"}, []string{"mooncake"})
}

// TestMooncakeConfigKeys: Mooncake's client config keys are accepted; enable_ssd_offload maps
// onto root_fs_dir; rdma runs over tcp with one warning; MOONCAKE_* variables fill what the
// file does not set; keys Mooncake does not have either stay errors.
func TestMooncakeConfigKeys(t *testing.T) {
	dir := t.TempDir()
	write := func(body string) string {
		p := filepath.Join(dir, "m.json")
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	env := func(kv ...string) func(string) string {
		return func(k string) string {
			for i := 0; i+1 < len(kv); i += 2 {
				if kv[i] == k {
					return kv[i+1]
				}
			}
			return ""
		}
	}
	p := write(`{"local_hostname": "127.0.0.1", "metadata_server": "etcd://127.0.0.1:2379", "master_server_address": "127.0.0.1:50051",
		"protocol": "rdma", "device_name": "mlx5_0", "enable_ssd_offload": true, "ssd_offload_path": "/mnt/ssd", "tenant_id": "t",
		"check_server": false, "prefer_alloc_in_same_node": true, "mode": "standalone-store", "enable_offload": true,
		"enable_client_http_server": true, "client_http_port": 9300, "ipc_socket_path": "@mooncake_client_50052.sock"}`)
	fc, err := loadConfig(env(envConfigPath, p))
	if err != nil {
		t.Fatal(err)
	}
	if fc.RootFSDir != "/mnt/ssd" || fc.Protocol != "tcp" {
		t.Fatalf("root %q protocol %q", fc.RootFSDir, fc.Protocol)
	}
	warns := 0
	for _, n := range fc.notices {
		if n.warn {
			warns++
			if !strings.Contains(n.msg, `"rdma" runs over TCP`) {
				t.Fatalf("warning %q", n.msg)
			}
		}
	}
	has := func(sub string) bool {
		return slices.ContainsFunc(fc.notices, func(n notice) bool { return strings.Contains(n.msg, sub) })
	}
	if warns != 1 || !has("tenant_id has no effect") || !has("enable_client_http_server has no effect") || !has("ipc_socket_path has no effect") {
		t.Fatalf("notices %+v", fc.notices)
	}

	// Environment: fills what there is no file for.
	fc, err = loadConfig(env("MOONCAKE_MASTER", "10.0.0.1:50051,10.0.0.2:50051", "MOONCAKE_PROTOCOL", "rdma", "MOONCAKE_LOCAL_HOSTNAME", "10.0.0.9",
		"MOONCAKE_GLOBAL_SEGMENT_SIZE", "4GB", "MOONCAKE_ENABLE_SSD_OFFLOAD", "true", "MOONCAKE_OFFLOAD_FILE_STORAGE_PATH", "/nvme"))
	if err != nil {
		t.Fatal(err)
	}
	if len(fc.EnvMasters) != 2 || fc.LocalHostname != "10.0.0.9" || *fc.GlobalSegmentSize != 4<<30 || fc.RootFSDir != "/nvme" || fc.Protocol != "tcp" {
		t.Fatalf("from env: %+v", fc)
	}

	bad := func(wantSub string, getenv func(string) string) {
		t.Helper()
		if _, err := loadConfig(getenv); err == nil || !strings.Contains(err.Error(), wantSub) {
			t.Fatalf("want an error containing %q, got %v", wantSub, err)
		}
	}
	bad(`unknown field "colour"`, env(envConfigPath, write(`{"colour": "blue"}`)))
	bad("enable_ssd_offload needs ssd_offload_path", env(envConfigPath, write(`{"enable_ssd_offload": true}`)))
	bad("MOONCAKE_GLOBAL_SEGMENT_SIZE", env("MOONCAKE_GLOBAL_SEGMENT_SIZE", "lots"))
	bad("MOONCAKE_MASTER", env("MOONCAKE_MASTER", "nohostport"))
}

// TestMooncakeMasterFlags: mooncake_master's flags resolve as Mooncake's do, from the command
// line and from a --config_path file; bad values fail with one line.
func TestMooncakeMasterFlags(t *testing.T) {
	dir := t.TempDir()
	resolve := func(args ...string) (masterSettings, *env, error) {
		t.Helper()
		e := &env{file: &fileConfig{}, stderr: &strings.Builder{}}
		var f masterFlags
		fs := pflag.NewFlagSet("m", pflag.ContinueOnError)
		f.register(fs, false)
		if err := fs.Parse(compatArgs(append([]string{nameMaster}, args...))[2:]); err != nil {
			return masterSettings{}, e, err
		}
		s, err := resolveMooncakeMaster(fs, &f, e, true)
		return s, e, err
	}
	s, e, err := resolve("--port", "10001", "--root_fs_dir", dir, "--cluster_id", "mooncake_cluster", "--client_ttl", "20",
		"-v=1", "--enable_ha", "--etcd_endpoints", "a:2379", "--enable_metric_reporting=false", "--rpc_address", "0.0.0.0")
	if err != nil {
		t.Fatal(err)
	}
	if s.RPCAddress != "0.0.0.0:10001" || s.ID != "m1" || s.DataDir != defaultStandaloneDir || s.RootFSDir != dir ||
		s.ClientTTL != 20*time.Second || !s.NoSummary || e.verbosity != 1 || s.RaftAddress != "127.0.0.1:0" {
		t.Fatalf("settings %+v", s)
	}
	var lines []string
	for _, n := range e.file.notices {
		lines = append(lines, n.msg)
	}
	if len(lines) != 2 || !strings.Contains(lines[0], "--enable_ha=true: accepted, no effect here: masters replicate") ||
		!strings.Contains(lines[1], "--etcd_endpoints=a:2379: accepted, no effect here") {
		t.Fatalf("notices %q", lines)
	}

	cfg := filepath.Join(dir, "master.json")
	os.WriteFile(cfg, []byte(`{"rpc_port": 10002, "client_live_ttl_sec": 30, "eviction_ratio": 0.1, "enable_gc": false}`), 0o644)
	if _, _, err := resolve("--config_path", cfg); err == nil || !strings.Contains(err.Error(), `unknown key "enable_gc"`) {
		t.Fatalf("unknown key: %v", err)
	}
	os.WriteFile(cfg, []byte(`{"rpc_port": 10002, "client_live_ttl_sec": 30, "eviction_ratio": 0.1, "default_kv_lease_ttl": 5000}`), 0o644)
	s, _, err = resolve("--config_path", cfg, "--client_ttl", "5s")
	if err != nil {
		t.Fatal(err)
	}
	if s.ClientTTL != 5*time.Second || s.EvictionRatio != 0.1 || !strings.HasSuffix(s.RPCAddress, ":10002") {
		t.Fatalf("from the config file: %+v", s)
	}
	// Mooncake's kv_events keys in the config file, a flag winning over one of them.
	os.WriteFile(cfg, []byte(`{"enable_kv_events": true, "kv_events_bind_endpoint": "tcp://127.0.0.1:5557", "kv_events_backend_id": "pool-a", "kv_events_block_size": 16, "kv_events_emit_legacy_compat": false}`), 0o644)
	s, _, err = resolve("--config_path", cfg, "--kv_events_backend_id", "pool-b")
	if err != nil {
		t.Fatal(err)
	}
	if kv := s.KVEvents; !kv.Enabled || kv.BindEndpoint != "tcp://127.0.0.1:5557" || kv.BackendID != "pool-b" || kv.BlockSize != 16 ||
		kv.EmitLegacyCompat || !kv.EmitObjectKey {
		t.Fatalf("kv events from the config file: %+v", kv)
	}

	for _, c := range []struct {
		want string
		args []string
	}{
		{"--port 70000 is not a port", []string{"--port", "70000"}},
		{"--eviction_ratio must be in (0, 1), got -0.5", []string{"--eviction_ratio", "-0.5"}},
		{"--eviction_high_watermark_ratio must be in (0, 1]", []string{"--eviction_high_watermark_ratio", "1.5"}},
		{"want seconds", []string{"--client_ttl", "soon"}},
	} {
		if _, _, err := resolve(c.args...); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: want %q, got %v", c.args, c.want, err)
		}
	}
}

// TestMooncakeBadInput: bad values on the Mooncake commands fail with one line, before
// anything starts.
func TestMooncakeBadInput(t *testing.T) {
	dir := t.TempDir()
	unknown := filepath.Join(dir, "unknown.json")
	os.WriteFile(unknown, []byte(`{"protocol": "rdma", "colour": "blue"}`), 0o644)
	badMaster := filepath.Join(dir, "master.json")
	os.WriteFile(badMaster, []byte(`{"rpc_port": 1, "enable_gc": true}`), 0o644)
	f := func(wantSub string, envv map[string]string, args ...string) {
		t.Helper()
		code, _, stderr := runCLI(t, envv, "", args...)
		if code != exitUsage || strings.Count(stderr, "\n") != 1 || !strings.Contains(stderr, wantSub) {
			t.Fatalf("%v: exit %d, stderr %q; want one line containing %q", args, code, stderr, wantSub)
		}
	}
	f("--eviction_ratio must be in (0, 1), got -0.1", nil, nameMaster, "--data_dir", dir, "--eviction_ratio=-0.1")
	f("--port 65536 is not a port", nil, nameMaster, "--data_dir", dir, "--port", "65536")
	f(`unknown key "enable_gc"`, nil, nameMaster, "--data_dir", dir, "--config_path", badMaster)
	f(`unknown field "colour"`, map[string]string{envConfigPath: unknown}, nameClient)
	f(`unknown field "colour"`, map[string]string{envConfigPath: unknown}, "ls")
	f("--port 70000 is not a port", nil, nameClient, "--port", "70000")
	f("--port -1 is not a port", nil, nameMetadataHTTP, "--port=-1")
	f("unknown flag: --bogus", nil, nameMaster, "--bogus")
	// `mooncake master` takes Mooncake's flags too (--port, --client_ttl 10, a bare
	// --rpc_address), but stays a raft member that needs an id.
	f("--id is required (e.g. --id m1; mooncake_master without --id runs a one-master cluster)", nil,
		"master", "--port", "10001", "--root_fs_dir", dir, "--cluster_id", "mooncake_cluster")
	f("--eviction_ratio must be in (0, 1), got -1", nil, "master", "--id", "m1", "--data_dir", dir, "--raft_address", "127.0.0.1:7001",
		"--port", "10001", "--client_ttl", "10", "--rpc_address", "0.0.0.0", "--eviction_ratio", "-1")
}
