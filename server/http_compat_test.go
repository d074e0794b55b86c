package server

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
)

func httpGet(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// TestMooncakeAdminEndpoints: Mooncake's admin endpoints answer with Mooncake's shapes on the
// master's metrics port; the probes tell live from ready; Mooncake's metric names are there.
func TestMooncakeAdminEndpoints(t *testing.T) {
	c := startMasters(t, 1, nil)
	m := c.masters[0]
	base := "http://" + m.MetricsAddr()
	eventually(t, "leader", m.IsLeader)
	if code, body := httpGet(t, base+"/health/ready"); code != 503 || !strings.Contains(body, "no worker has registered") {
		t.Fatalf("ready without a worker: %d %s", code, body)
	}
	if code, body := httpGet(t, base+"/health/live"); code != 200 || !strings.Contains(body, `"live":true`) {
		t.Fatalf("live: %d %s", code, body)
	}
	w := c.addWorker("", nil)
	if code, _ := httpGet(t, base+"/health/ready"); code != 200 {
		t.Fatalf("ready with a worker: %d", code)
	}
	if code, _ := httpGet(t, "http://"+w.MetricsAddr()+"/health/ready"); code != 200 {
		t.Fatalf("worker ready: %d", code)
	}
	d := newDriver(t, c.masterAddrs())
	for _, k := range []string{"a", "b"} {
		if err := d.put(k, []byte("value-"+k), 1, false); err != nil {
			t.Fatal(err)
		}
	}
	lr, err := d.lookup("a")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := d.readReplica(lr, lr.Replicas[0], "a"); err != nil {
		t.Fatal(err)
	}

	if code, body := httpGet(t, base+"/get_all_keys"); code != 200 || body != "a\nb\n" && body != "b\na\n" {
		t.Fatalf("/get_all_keys: %d %q", code, body)
	}
	code, body := httpGet(t, base+"/query_key?key=a")
	var qk struct {
		Success bool               `json:"success"`
		Data    []bufferDescriptor `json:"data"`
	}
	if code != 200 || json.Unmarshal([]byte(body), &qk) != nil || !qk.Success || len(qk.Data) != 1 || qk.Data[0].Size != 7 ||
		qk.Data[0].TransportEndpoint != w.Addr() || qk.Data[0].Protocol != "tcp" {
		t.Fatalf("/query_key: %d %q", code, body)
	}
	if code, body := httpGet(t, base+"/query_key?key=missing"); code != 404 || !strings.Contains(body, `"error_code":-704,"error_message":"OBJECT_NOT_FOUND"`) {
		t.Fatalf("/query_key missing: %d %q", code, body)
	}
	code, body = httpGet(t, base+"/batch_query_keys?keys=a,missing")
	var batch struct {
		Success bool `json:"success"`
		Data    map[string]struct {
			OK     bool               `json:"ok"`
			Error  string             `json:"error"`
			Values []bufferDescriptor `json:"values"`
		} `json:"data"`
	}
	if code != 200 || json.Unmarshal([]byte(body), &batch) != nil || !batch.Success || !batch.Data["a"].OK ||
		len(batch.Data["a"].Values) != 1 || batch.Data["missing"].OK || batch.Data["missing"].Error != "OBJECT_NOT_FOUND" {
		t.Fatalf("/batch_query_keys: %d %s", code, body)
	}
	if code, body := httpGet(t, base+"/batch_query_keys"); code != 400 || !strings.Contains(body, `"success":false`) {
		t.Fatalf("/batch_query_keys without keys: %d %s", code, body)
	}
	if code, body := httpGet(t, base+"/get_all_segments"); code != 200 || body != w.Addr()+"\n" {
		t.Fatalf("/get_all_segments: %d %q", code, body)
	}
	want := w.Addr() + "\nUsed(bytes): 14\nCapacity(bytes) : 33554432\n"
	if code, body := httpGet(t, base+"/query_segment?segment="+w.Addr()); code != 200 || body != want {
		t.Fatalf("/query_segment: %d %q", code, body)
	}
	if code, body := httpGet(t, base+"/health"); code != 200 || !strings.Contains(body, `"role":"leader"`) ||
		!strings.Contains(body, `"ha_state":"serving"`) || !strings.Contains(body, `"service_ready":true`) || !strings.Contains(body, `"ready":true`) {
		t.Fatalf("/health: %d %s", code, body)
	}
	if code, body := httpGet(t, base+"/role"); code != 200 || body != "leader" {
		t.Fatalf("/role: %d %q", code, body)
	}
	if code, body := httpGet(t, base+"/leader"); code != 200 || !strings.Contains(body, `"present":true`) || !strings.Contains(body, m.Addr()) {
		t.Fatalf("/leader: %d %s", code, body)
	}
	if code, body := httpGet(t, base+"/metrics/summary"); code != 200 || !strings.HasPrefix(body, "role=leader, state=serving, service_ready=true, master={Mem Storage: ") {
		t.Fatalf("/metrics/summary: %d %s", code, body)
	}
	_, metrics := httpGet(t, base+"/metrics")
	for _, name := range []string{"master_active_clients 1", "master_value_size_bytes_bucket", "master_request_duration_seconds_bucket{op=\"PutStart\"",
		"master_raft_term ", "master_raft_leader_changes_total ", "master_raft_commit_duration_seconds_bucket",
		"master_raft_log_store_duration_seconds_bucket", "total_get_nums_ 1",
		"valid_get_nums_ 1", "master_total_file_capacity_bytes", "mem_cache_nums_", "master_batch_put_end_items_total 0",
		"master_batch_exist_key_partial_successes_total 0", "master_batch_get_replica_list_failed_items_total 0"} {
		if !strings.Contains(metrics, name) {
			t.Errorf("master /metrics lacks %q", name)
		}
	}
	_, wm := httpGet(t, "http://"+w.MetricsAddr()+"/metrics")
	for _, name := range []string{"mem_cache_hit_nums_ 1", "file_cache_hit_nums_ 0", "worker_request_duration_seconds_bucket{op=\"read\"",
		"worker_request_duration_seconds_bucket{op=\"write\""} {
		if !strings.Contains(wm, name) {
			t.Errorf("worker /metrics lacks %q", name)
		}
	}
}

// bufferDescriptor is Mooncake's replica descriptor as /query_key and /batch_query_keys
// answer it (the fields this test reads).
type bufferDescriptor struct {
	Size              int64  `json:"size_"`
	Protocol          string `json:"protocol_"`
	TransportEndpoint string `json:"transport_endpoint_"`
}
