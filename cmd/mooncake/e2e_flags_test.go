package main

import (
	"encoding/json"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/mooncake-go/mooncake/server/config"
)

// mooncakeMasterFlagValues is every flag of Mooncake's mooncake_master (mooncake-store/src/
// master.cpp, DEFINE_*, and glog's) with Mooncake's default and one other value, written
// independently of the table in compat_flags.go so that each checks the other. $P is the
// test's RPC port, $M its metrics port and $H its HTTP metadata port (free ports, in both
// runs: Mooncake's 50051, 9003 and 8080 may be taken on a shared machine); $D is a directory.
var mooncakeMasterFlagValues = append([]flagValue{
	{"config_path", "", "$D/master.json"},
	{"port", "$P", "$P2"},
	{"max_threads", "4", "8"},
	{"enable_metric_reporting", "true", "false"},
	{"metrics_port", "$M", "$M"},
	{"default_kv_lease_ttl", "5000", "10s"},
	{"default_kv_soft_pin_ttl", "1800000", "30m"},
	{"allow_evict_soft_pinned_objects", "true", "false"},
	{"eviction_ratio", "0.05", "0.1"},
	{"eviction_high_watermark_ratio", "0.95", "0.9"},
	{"default_tenant_quota_bytes", "0", "1073741824"},
	{"rpc_thread_num", "0", "8"},
	{"rpc_port", "0", "$P"},
	{"rpc_address", "0.0.0.0", "127.0.0.1"},
	{"rpc_interface", "", "lo"},
	{"rpc_conn_timeout_seconds", "0", "60"},
	{"rpc_enable_tcp_no_delay", "true", "false"},
	{"enable_ha", "false", "true"},
	{"enable_offload", "false", "true"},
	{"ha_backend_type", "etcd", "redis"},
	{"ha_backend_connstring", "", "redis://127.0.0.1:6379"},
	{"etcd_endpoints", "", "127.0.0.1:2379;127.0.0.1:2380"},
	{"client_ttl", "10", "20"},
	{"root_fs_dir", "", "$D/root"},
	{"global_file_segment_size", "9223372036854775807", "1073741824"},
	{"cluster_id", "mooncake_cluster", "other_cluster"},
	{"memory_allocator", "offset", "cachelib"},
	{"allocation_strategy", "random", "free_ratio_first"},
	{"enable_http_metadata_server", "false", "true"},
	{"http_metadata_server_port", "$H", "$H"},
	{"http_metadata_server_host", "0.0.0.0", "127.0.0.1"},
	{"enable_metadata_cleanup_on_timeout", "false", "true"},
	{"put_start_discard_timeout_sec", "30", "60"},
	{"put_start_release_timeout_sec", "600", "900"},
	{"enable_disk_eviction", "true", "false"},
	{"quota_bytes", "0", "1073741824"},
	{"snapshot_backup_dir", "", "$D/backup"},
	{"enable_snapshot_restore", "false", "true"},
	{"enable_snapshot", "false", "true"},
	{"snapshot_interval_seconds", "600", "60"},
	{"snapshot_child_timeout_seconds", "300", "30"},
	{"snapshot_retention_count", "2", "5"},
	{"snapshot_object_store_type", "", "local"},
	{"snapshot_payload_store_type", "", "local"},
	{"snapshot_payload_backend_type", "", "local"},
	{"snapshot_catalog_store_type", "", "embedded"},
	{"snapshot_catalog_backend_type", "", "embedded"},
	{"snapshot_catalog_store_connstring", "", "redis://127.0.0.1:6379"},
	{"snapshot_catalog_backend_connstring", "", "redis://127.0.0.1:6379"},
	{"max_total_finished_tasks", "10000", "100"},
	{"max_total_pending_tasks", "10000", "100"},
	{"max_total_processing_tasks", "10000", "100"},
	{"pending_task_timeout_sec", "300", "60"},
	{"processing_task_timeout_sec", "300", "60"},
	{"max_retry_attempts", "10", "3"},
	{"cxl_path", "/dev/dax0.0", "/dev/dax1.0"},
	{"cxl_size", "8589934592", "1073741824"},
	{"enable_cxl", "false", "true"},
	{"enable_kv_events", "false", "true"},
	{"kv_events_bind_endpoint", "", "tcp://127.0.0.1:0"},
	{"kv_events_backend_id", "", "pool-a"},
	{"kv_events_model_name", "", "Qwen/Qwen2.5-7B-Instruct"},
	{"kv_events_block_size", "0", "16"},
	{"kv_events_lora_name", "", "lora-a"},
	{"kv_events_additional_salt", "", "salt"},
	{"kv_events_dp_rank", "0", "1"},
	{"kv_events_tenant_id", "default", "t1"},
	{"kv_events_emit_object_key", "true", "false"},
	{"kv_events_emit_legacy_compat", "true", "false"},
	{"kv_events_queue_capacity", "65536", "1024"},
}, glogFlagValues...)

// TestMooncakeMasterEveryFlag starts the built binary as mooncake_master twice: with every
// flag of Mooncake's at Mooncake's default (it serves, and says nothing about them), then
// with one other value each (it serves, the flags with an equivalent took effect, and each
// without one is listed once as "accepted, no effect here").
func TestMooncakeMasterEveryFlag(t *testing.T) {
	bin := buildBinary(t)
	dir := t.TempDir()
	master := filepath.Join(dir, nameMaster)
	if err := os.Symlink(bin, master); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "master.json"), []byte(`{"cluster_id": "from_file", "client_live_ttl_sec": 15}`), 0o644); err != nil {
		t.Fatal(err)
	}
	checkFlagList(t, nameMaster, mooncakeMasterFlagValues)

	run := func(name string, other bool) (*proc, string, string, int) {
		t.Helper()
		p := freePorts(t, 4)
		cwd := filepath.Join(dir, name)
		os.Mkdir(cwd, 0o755)
		repl := strings.NewReplacer("$P2", strconv.Itoa(p[3]), "$P", strconv.Itoa(p[0]), "$M", strconv.Itoa(p[1]),
			"$H", strconv.Itoa(p[2]), "$D", dir)
		args := flagArgs(mooncakeMasterFlagValues, other, repl)
		m := startProcIn(t, cwd, nil, name, master, args...)
		m.mustReady()
		return m, hostPort(p[0]), "http://" + hostPort(p[1]), p[2]
	}

	m, rpc, metrics, _ := run("defaults", false)
	if c, err := net.DialTimeout("tcp", rpc, 5*time.Second); err != nil {
		t.Fatalf("--port with --rpc_port=0 (Mooncake's defaults): the RPC port is --port: %v", err)
	} else {
		c.Close()
	}
	mustHTTP(t, metrics+"/health", 200, `"role":"leader"`)
	if s := m.stderr.String(); strings.Contains(s, "no effect here") {
		t.Errorf("Mooncake's defaults are noted as having no effect:\n%s", grepLinesOf(s, "no effect here"))
	}
	if err := m.term(30 * time.Second); err != nil {
		t.Fatal(err)
	}

	m, rpc, metrics, httpMeta := run("others", true)
	if c, err := net.DialTimeout("tcp", rpc, 5*time.Second); err != nil {
		t.Fatalf("--rpc_port wins over --port: %v", err)
	} else {
		c.Close()
	}
	var st struct {
		ClusterID string  `json:"cluster_id"`
		RootFSDir string  `json:"root_fs_dir"`
		High      float64 `json:"eviction_high_watermark_ratio"`
		Ratio     float64 `json:"eviction_ratio"`
	}
	body := mustHTTP(t, metrics+"/api/v1/status", 200)
	if err := json.Unmarshal([]byte(body), &st); err != nil {
		t.Fatal(err)
	}
	if st.ClusterID != "other_cluster" || st.RootFSDir != filepath.Join(dir, "root") || st.High != 0.9 || st.Ratio != 0.1 {
		t.Errorf("status %+v: want cluster other_cluster, root_fs_dir, ratios 0.9/0.1", st)
	}
	// --rpc_interface lo gives the RPC address; --client_ttl and --put_start_discard_timeout_sec
	// are seconds (the effective-config line).
	for _, want := range []string{"rpc_address=" + rpc, "client_ttl=20s", "put_timeout=1m0s"} {
		if !strings.Contains(m.stderr.String(), want) {
			t.Errorf("the effective-config line lacks %s", want)
		}
	}
	mustHTTP(t, metrics+"/kv_events/status", 200, `"enabled":true`, `"endpoint":"tcp://127.0.0.1:`)
	if code, body := httpBody("http://" + hostPort(httpMeta) + "/metadata?key=nope"); code != 404 {
		t.Errorf("--enable_http_metadata_server on --http_metadata_server_port: %d %q", code, body)
	}
	stderr := m.stderr.String()
	for _, f := range config.MooncakeFlags(nameMaster) {
		if f.Ours() != "" {
			continue
		}
		if n := strings.Count(stderr, "--"+f.Name+"="); n != 1 {
			t.Errorf("--%s: %d lines in the log, want one \"accepted, no effect here\" line", f.Name, n)
		}
	}
	if n := strings.Count(stderr, "accepted, no effect here"); n != countNoEffect(nameMaster) {
		t.Errorf("%d \"accepted, no effect here\" lines, want %d:\n%s", n, countNoEffect(nameMaster), grepLinesOf(stderr, "no effect here"))
	}
	if err := m.term(30 * time.Second); err != nil {
		t.Fatal(err)
	}
}

// countNoEffect is the number of bin's flags without an equivalent here.
func countNoEffect(bin string) int {
	n := 0
	for _, f := range config.MooncakeFlags(bin) {
		if f.Ours() == "" {
			n++
		}
	}
	return n
}

// grepLinesOf returns the lines of s that contain sub.
func grepLinesOf(s, sub string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

// mooncakeClientFlagValues is every flag of Mooncake's mooncake_client (mooncake-store/src/
// real_client_main.cpp and glog's) with Mooncake's default and one other value. $P is the
// data port and $W the HTTP port (free ports), $D a directory; global_segment_size is 64 MB
// instead of Mooncake's "4 GB" in the first run too, to keep the shared test machine's memory.
var mooncakeClientFlagValues = append([]flagValue{
	{"host", "0.0.0.0", "127.0.0.1"},
	{"metadata_server", "http://127.0.0.1:8080/metadata", "etcd://127.0.0.1:2379"},
	{"device_names", "", "mlx5_0"},
	{"master_server_address", "$M", "$M"},
	{"protocol", "tcp", "rdma"},
	{"port", "$P", "$P"},
	{"global_segment_size", "64 MB", "32MB"},
	{"local_buffer_size", "0", "16MB"},
	{"threads", "1", "4"},
	{"tenant_id", "default", "t1"},
	{"enable_offload", "false", "true"},
	{"start_offload_rpc_server", "true", "false"},
	{"graceful_unmount_seconds", "0", "5"},
	{"enable_http_server", "true", "false"},
	{"http_port", "$W", "$W"},
}, glogFlagValues...)

// flagValue is one flag of Mooncake's with its default and another value ($D: the test's
// directory; other placeholders as each test expands them).
type flagValue struct{ name, def, other string }

// checkFlagList fails t where the test's list for binary and the flag table name different flags.
func checkFlagList(t *testing.T, binary string, list []flagValue) {
	t.Helper()
	inList := map[string]bool{}
	for _, v := range list {
		inList[v.name] = true
	}
	for _, f := range config.MooncakeFlags(binary) {
		if !inList[f.Name] {
			t.Errorf("the flag table has --%s, the test's list does not", f.Name)
		}
		delete(inList, f.Name)
	}
	for n := range inList {
		t.Errorf("the test's list has --%s, the flag table does not", n)
	}
}

// flagArgs gives each flag of list with its default (other: its other value), placeholders
// replaced; one-letter flags take one dash, as glog's -v does.
func flagArgs(list []flagValue, other bool, repl *strings.Replacer) []string {
	args := make([]string, 0, len(list))
	for _, v := range list {
		val := v.def
		if other {
			val = v.other
		}
		dash := "--"
		if len(v.name) == 1 {
			dash = "-"
		}
		args = append(args, dash+v.name+"="+repl.Replace(val))
	}
	return args
}

// glogFlagValues are glog's flags, which both of Mooncake's binaries take.
var glogFlagValues = []flagValue{
	{"v", "0", "1"},
	{"logtostderr", "false", "true"},
	{"alsologtostderr", "false", "true"},
	{"colorlogtostderr", "false", "true"},
	{"log_dir", "", "$D/logs"},
	{"minloglevel", "0", "1"},
	{"stderrthreshold", "2", "0"},
	{"vmodule", "", "mooncake=2"},
}

// TestMooncakeClientEveryFlag starts the built binary as mooncake_client against a
// mooncake_master, with every flag of Mooncake's at its default, then at another value: it
// registers both times; the flags with an equivalent took effect (--enable_http_server=false
// leaves no HTTP port, --enable_offload takes the master's root_fs_dir), and each without one
// is listed once.
func TestMooncakeClientEveryFlag(t *testing.T) {
	bin := buildBinary(t)
	dir := t.TempDir()
	master, client := filepath.Join(dir, nameMaster), filepath.Join(dir, nameClient)
	for _, l := range []string{master, client} {
		if err := os.Symlink(bin, l); err != nil {
			t.Fatal(err)
		}
	}
	checkFlagList(t, nameClient, mooncakeClientFlagValues)
	mp := freePorts(t, 2)
	root := filepath.Join(dir, "root")
	m := startProcIn(t, dir, nil, nameMaster, master, "--rpc_address=127.0.0.1", "--port="+strconv.Itoa(mp[0]),
		"--metrics_port="+strconv.Itoa(mp[1]), "--root_fs_dir="+root)
	m.mustReady()

	run := func(name string, other bool) (*proc, int) {
		t.Helper()
		p := freePorts(t, 2)
		repl := strings.NewReplacer("$M", hostPort(mp[0]), "$P", strconv.Itoa(p[0]), "$W", strconv.Itoa(p[1]), "$D", dir)
		args := flagArgs(mooncakeClientFlagValues, other, repl)
		w := startProcIn(t, dir, nil, name, client, args...)
		w.mustReady()
		return w, p[1]
	}
	w, httpPort := run("client-defaults", false)
	mustHTTP(t, "http://"+hostPort(httpPort)+"/metrics", 200, "mooncake_transfer_read_bytes")
	if s := w.stderr.String(); strings.Contains(s, "no effect here") {
		t.Errorf("Mooncake's defaults are noted as having no effect:\n%s", grepLinesOf(s, "no effect here"))
	}
	if err := w.term(30 * time.Second); err != nil {
		t.Fatal(err)
	}

	w, httpPort = run("client-others", true)
	if code, _ := httpBody("http://" + hostPort(httpPort) + "/metrics"); code != 0 {
		t.Errorf("--enable_http_server=false still serves HTTP on --http_port (%d)", code)
	}
	if _, err := os.Stat(filepath.Join(root, "mooncake_cluster")); err != nil {
		t.Errorf("--enable_offload takes the master's root_fs_dir: %v", err)
	}
	stderr := w.stderr.String()
	for _, f := range config.MooncakeFlags(nameClient) {
		if f.Ours() != "" {
			continue
		}
		want := 1
		if f.Name == "device_names" {
			want = 0 // --protocol=rdma's warning names the devices instead
		}
		if n := strings.Count(stderr, "--"+f.Name+"="); n != want {
			t.Errorf("--%s: %d lines in the log, want %d", f.Name, n, want)
		}
	}
	if !strings.Contains(stderr, `devices mlx5_0 unused`) {
		t.Errorf("--protocol=rdma --device_names=mlx5_0: no warning naming the devices:\n%s", grepLinesOf(stderr, "TCP"))
	}
	if err := w.term(30 * time.Second); err != nil {
		t.Fatal(err)
	}
}
