package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/mooncake-go/mooncake/internal/testutil"
)

// httpBody GETs url and returns the status code and body (0 and the error text when the
// request itself fails).
func httpBody(url string) (int, string) {
	resp, err := http.Get(url)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// mustHTTP GETs url and fails unless the answer has code want and contains every sub.
func mustHTTP(t *testing.T, url string, want int, subs ...string) string {
	t.Helper()
	code, body := httpBody(url)
	if code != want {
		t.Fatalf("GET %s: %d %q, want %d", url, code, body, want)
	}
	for _, s := range subs {
		if !strings.Contains(body, s) {
			t.Fatalf("GET %s: %q lacks %q", url, body, s)
		}
	}
	return body
}

// TestMooncakeUsersDay runs a Mooncake user's day as their guides write it, against this
// binary under Mooncake's names: mooncake_master --port --root_fs_dir --cluster_id, a
// mooncake_client from a mooncake.json with an etcd metadata_server, protocol rdma and
// enable_ssd_offload, puts and gets through the CLI, the admin endpoints and metric names read
// over HTTP; then the same with three masters.
func TestMooncakeUsersDay(t *testing.T) {
	bin := buildBinary(t)
	dir := t.TempDir()
	links := filepath.Join(dir, "bin")
	os.Mkdir(links, 0o755)
	if r := runBin(t, bin, nil, nil, "install-links", links); r.code != 0 || strings.Count(r.stdout, "->") != 3 {
		t.Fatalf("install-links: %d %q %q", r.code, r.stdout, r.stderr)
	}
	master, worker := filepath.Join(links, nameMaster), filepath.Join(links, nameClient)
	value := filepath.Join(dir, "value.bin")
	os.WriteFile(value, []byte("kv cache block 0"), 0o644)
	getOK := func(env []string, key, want string) {
		t.Helper()
		r := runBin(t, bin, env, nil, "get", key)
		if r.code != 0 || r.stdout != want {
			t.Fatalf("get %s: exit %d %q %q", key, r.code, r.stdout, r.stderr)
		}
	}
	putOK := func(env []string, key string) {
		t.Helper()
		if r := runBin(t, bin, env, nil, "put", key, value); r.code != 0 {
			t.Fatalf("put %s: exit %d %q", key, r.code, r.stderr)
		}
	}

	// One master, as in the guides; its data goes under ./mooncake-data of its directory.
	root, ssd, cwd := filepath.Join(dir, "mooncake_data"), filepath.Join(dir, "ssd"), filepath.Join(dir, "cwd")
	os.Mkdir(cwd, 0o755)
	p := freePorts(t, 6)
	rpc, metrics := strconv.Itoa(p[0]), "http://"+hostPort(p[1])
	m := startProcIn(t, cwd, nil, nameMaster, master, "--port", rpc, "--root_fs_dir", root, "--cluster_id", "mooncake_cluster",
		"--metrics_port", strconv.Itoa(p[1]), "-v=0", "--default_kv_lease_ttl=5000", "--enable_ha=false",
		"--eviction_high_watermark_ratio", "0.8", "--eviction_ratio=0.1")
	m.mustReady()
	if _, err := os.Stat(filepath.Join(cwd, "mooncake-data", "raft.db")); err != nil {
		t.Fatalf("a lone mooncake_master keeps its data under ./mooncake-data: %v", err)
	}
	mustHTTP(t, metrics+"/role", 200, "leader")

	cfg := filepath.Join(dir, "mooncake.json")
	os.WriteFile(cfg, []byte(fmt.Sprintf(`{
		"local_hostname": "127.0.0.1",
		"metadata_server": "etcd://127.0.0.1:2379",
		"master_server_address": "127.0.0.1:%s",
		"global_segment_size": "64MiB",
		"local_buffer_size": "16MB",
		"protocol": "rdma",
		"device_name": "mlx5_0",
		"enable_ssd_offload": true,
		"ssd_offload_path": %q,
		"tenant_id": "default",
		"enable_client_http_server": true,
		"client_http_port": 9300,
		"ipc_socket_path": "@mooncake_client_50052.sock"
	}`, rpc, ssd)), 0o644)
	cfgEnv := []string{envConfigPath + "=" + cfg}
	w := startProcIn(t, dir, cfgEnv, nameClient, worker, "--port", strconv.Itoa(p[2]), "--metrics_port", strconv.Itoa(p[3]))
	w.mustReady()
	putOK(cfgEnv, "k1")
	getOK(cfgEnv, "k1", "kv cache block 0")
	masterEnv := []string{envMaster + "=127.0.0.1:" + rpc}
	putOK(masterEnv, "k2")
	getOK(masterEnv, "k2", "kv cache block 0")
	if r := runBin(t, bin, cfgEnv, nil, "ls"); r.code != 0 || r.stdout != "16\tk1\n16\tk2\n" {
		t.Fatalf("ls: %d %q %q", r.code, r.stdout, r.stderr)
	}
	if _, err := os.Stat(filepath.Join(ssd, "mooncake_cluster")); err != nil {
		t.Fatalf("enable_ssd_offload + ssd_offload_path is the NVMe tier: %v", err)
	}

	// A second client with no NVMe settings of its own gets the master's --root_fs_dir.
	w2 := startProcIn(t, dir, masterEnv, nameClient+"2", worker, "--host", "127.0.0.1", "--port", strconv.Itoa(p[4]),
		"--metrics_port", strconv.Itoa(p[5]), "--global_segment_size", "32 MB")
	w2.mustReady()
	if _, err := os.Stat(filepath.Join(root, "mooncake_cluster")); err != nil {
		t.Fatalf("the master's --root_fs_dir reaches a worker without one: %v", err)
	}

	// Admin endpoints and metric names, as Mooncake's tools read them.
	wAddr := hostPort(p[2])
	mustHTTP(t, metrics+"/get_all_keys", 200, "k1\n", "k2\n")
	mustHTTP(t, metrics+"/query_key?key=k1", 200, `"size_":16`, `"transport_endpoint_":"`+wAddr+`"`)
	body := mustHTTP(t, metrics+"/batch_query_keys?keys=k1,nope", 200, `"success":true`)
	var batch struct {
		Data map[string]struct {
			OK    bool   `json:"ok"`
			Error string `json:"error"`
		} `json:"data"`
	}
	if json.Unmarshal([]byte(body), &batch) != nil || !batch.Data["k1"].OK || batch.Data["nope"].Error != "OBJECT_NOT_FOUND" {
		t.Fatalf("/batch_query_keys: %s", body)
	}
	testutil.WaitFor(t, "both segments listed", 30*time.Second, func() error {
		if _, b := httpBody(metrics + "/get_all_segments"); !strings.Contains(b, wAddr+"\n") || !strings.Contains(b, hostPort(p[4])+"\n") {
			return fmt.Errorf("%q", b)
		}
		return nil
	})
	mustHTTP(t, metrics+"/query_segment?segment="+wAddr, 200, wAddr+"\nUsed(bytes): 32\nCapacity(bytes) : 67108864\n")
	mustHTTP(t, metrics+"/metrics/summary", 200, "role=leader, state=serving, service_ready=true, master={Mem Storage: ", "Keys: 2")
	mustHTTP(t, metrics+"/leader", 200, `"present":true`)
	mustHTTP(t, metrics+"/health/ready", 200, `"ready":true`)
	mustHTTP(t, metrics+"/metrics", 200, "master_active_clients 2", "master_key_count 2", "master_value_size_bytes_bucket",
		"master_put_start_requests_total", "master_get_replica_list_requests_total", "master_raft_term", "master_raft_commit_duration_seconds",
		"master_request_duration_seconds_bucket", "total_get_nums_", "master_total_file_capacity_bytes")
	mustHTTP(t, "http://"+hostPort(p[3])+"/metrics", 200, "mem_cache_hit_nums_ ", "file_cache_hit_nums_ ", "worker_request_duration_seconds_bucket")

	// The master's eviction flags govern the workers' DRAM watermarks.
	if !strings.Contains(w.stderr.String(), "DRAM watermarks from the master's eviction flags\" high=0.8 low=0.7") {
		t.Fatalf("worker did not take the master's watermarks:\n%s", w.stderr.String())
	}
	// Warnings appear once, however long the worker runs.
	if n := strings.Count(w.stderr.String(), `protocol \"rdma\" runs over TCP`); n != 1 {
		t.Fatalf("the rdma warning appears %d times:\n%s", n, w.stderr.String())
	}
	for _, pr := range []*proc{w2, w, m} {
		if err := pr.term(60 * time.Second); err != nil {
			t.Fatal(err)
		}
	}

	// Three masters (raft replaces etcd), one mooncake_client listing them all.
	mp := freePorts(t, 10)
	var addrs, peers []string
	for i := range 3 {
		addrs = append(addrs, hostPort(mp[i]))
		peers = append(peers, fmt.Sprintf("m%d=%s", i+1, hostPort(mp[3+i])))
	}
	for i := range 3 {
		pm := startProcIn(t, dir, nil, fmt.Sprintf("%s-m%d", nameMaster, i+1), master, "--id", fmt.Sprintf("m%d", i+1),
			"--port", strconv.Itoa(mp[i]), "--rpc_address", "127.0.0.1", "--raft_address", hostPort(mp[3+i]),
			"--peers", strings.Join(peers, ","), "--data_dir", filepath.Join(dir, fmt.Sprintf("ha%d", i)),
			"--metrics_port", strconv.Itoa(mp[6+i]), "--cluster_id", "mooncake_cluster", "--root_fs_dir", root)
		pm.mustReady()
	}
	all := []string{envMaster + "=" + strings.Join(addrs, ",")}
	hw := startProcIn(t, dir, all, nameClient+"-ha", worker, "--port", strconv.Itoa(mp[9]), "--global_segment_size", "32MiB")
	hw.mustReady()
	putOK(all, "ha1")
	getOK(all, "ha1", "kv cache block 0")
	for _, a := range addrs { // any master in the list works for a client
		getOK([]string{envMaster + "=" + a}, "ha1", "kv cache block 0")
	}
	leaders := 0
	for i := range 3 {
		url := "http://" + hostPort(mp[6+i])
		if _, role := httpBody(url + "/role"); role == "leader" {
			leaders++
		}
		testutil.WaitFor(t, "key replicated to every master", 30*time.Second, func() error {
			if _, b := httpBody(url + "/get_all_keys"); b != "ha1\n" {
				return fmt.Errorf("%s/get_all_keys: %q", url, b)
			}
			return nil
		})
		mustHTTP(t, url+"/leader", 200, `"present":true`)
	}
	if leaders != 1 {
		t.Fatalf("%d masters answer /role leader", leaders)
	}
}

// TestPutRightAfterStandaloneStarts: a put issued the moment `mooncake standalone` is started
// (no sleep, no wait for its ready line) succeeds: the client waits for the master to listen,
// for the single voter to elect itself and for the worker to register.
func TestPutRightAfterStandaloneStarts(t *testing.T) {
	bin := buildBinary(t)
	dir := t.TempDir()
	p := freePorts(t, 2)
	value := filepath.Join(dir, "v")
	os.WriteFile(value, []byte("first"), 0o644)
	sa := startProcIn(t, dir, nil, "standalone", bin, "standalone", "--rpc_port", strconv.Itoa(p[0]), "--metrics_port", strconv.Itoa(p[1]),
		"--global_segment_size", "64MiB")
	env := []string{envMaster + "=" + hostPort(p[0])}
	if r := runBin(t, bin, env, nil, "put", "first", value); r.code != 0 {
		t.Fatalf("put at once after standalone started: exit %d %q", r.code, r.stderr)
	}
	if r := runBin(t, bin, env, nil, "get", "first"); r.code != 0 || r.stdout != "first" {
		t.Fatalf("get: %d %q %q", r.code, r.stdout, r.stderr)
	}
	sa.mustReady()
	if err := sa.term(60 * time.Second); err != nil {
		t.Fatal(err)
	}
}
