package server

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// mooncakeMasterMetrics is every metric of Mooncake's master (mooncake-store/src/
// master_metric_manager.cpp, its MasterMetricManager constructor): name, Prometheus type and
// label names. Generated from the source with
//
//	grep -o '"[a-z_]*",' master_metric_manager.cpp (the first string of each member), typed
//	by the member's declaration (gauge_t, counter_t, histogram_t, dynamic_*_1t/2t).
//
// Keep it as Mooncake has it: add what Mooncake adds, never rename.
const mooncakeMasterMetricList = `
master_allocated_bytes gauge
master_total_capacity_bytes gauge
segment_allocated_bytes gauge segment
segment_total_capacity_bytes gauge segment
master_nof_allocated_bytes gauge
master_total_nof_capacity_bytes gauge
nof_segment_allocated_bytes gauge segment
nof_segment_total_capacity_bytes gauge segment
master_allocated_file_size_bytes gauge
master_total_file_capacity_bytes gauge
master_key_count gauge
master_soft_pin_key_count gauge
master_value_size_bytes histogram
master_active_clients gauge
master_client_liveness_active_clients gauge
master_client_liveness_suspected_clients gauge
master_client_liveness_offline_clients gauge
master_client_liveness_suspected_transitions_total counter
master_client_liveness_recoveries_total counter
master_client_liveness_offline_transitions_total counter
master_client_offboarding_queue_depth gauge
master_client_offboarding_duration_ms histogram
master_client_offboarding_failures_total counter
master_client_offboarding_retries_total counter
master_put_start_requests_total counter
master_put_start_failures_total counter
master_put_start_alloc_failures_total counter
master_put_end_requests_total counter
master_put_end_failures_total counter
master_put_revoke_requests_total counter
master_put_revoke_failures_total counter
master_get_replica_list_requests_total counter
master_get_replica_list_failures_total counter
master_get_replica_list_by_regex_requests_total counter
master_get_replica_list_by_regex_failures_total counter
master_exist_key_requests_total counter
master_exist_key_failures_total counter
master_remove_requests_total counter
master_remove_failures_total counter
master_remove_by_regex_requests_total counter
master_remove_by_regex_failures_total counter
master_remove_all_requests_total counter
master_remove_all_failures_total counter
master_mount_segment_requests_total counter
master_mount_segment_failures_total counter
master_unmount_segment_requests_total counter
master_unmount_segment_failures_total counter
master_remount_segment_requests_total counter
master_remount_segment_failures_total counter
master_mount_nof_segment_requests_total counter
master_mount_nof_segment_failures_total counter
master_unmount_nof_segment_requests_total counter
master_unmount_nof_segment_failures_total counter
master_remount_nof_segment_requests_total counter
master_remount_nof_segment_failures_total counter
master_ping_requests_total counter
master_ping_failures_total counter
master_nof_heartbeat_success_total counter
master_nof_heartbeat_failure_total counter
master_nof_heartbeat_timeout_total counter
master_nof_segments_unmounted_by_heartbeat_total counter
master_nof_heartbeat_probe_latency_ms histogram
master_batch_exist_key_requests_total counter
master_batch_exist_key_failures_total counter
master_batch_exist_key_partial_successes_total counter
master_batch_exist_key_items_total counter
master_batch_exist_key_failed_items_total counter
master_batch_query_ip_requests_total counter
master_batch_query_ip_failures_total counter
master_batch_query_ip_partial_successes_total counter
master_batch_query_ip_items_total counter
master_batch_query_ip_failed_items_total counter
master_batch_replica_clear_requests_total counter
master_batch_replica_clear_failures_total counter
master_batch_replica_clear_partial_successes_total counter
master_batch_replica_clear_items_total counter
master_batch_replica_clear_failed_items_total counter
master_batch_get_replica_list_requests_total counter
master_batch_get_replica_list_failures_total counter
master_batch_get_replica_list_partial_successes_total counter
master_batch_get_replica_list_items_total counter
master_batch_get_replica_list_failed_items_total counter
master_batch_put_start_requests_total counter
master_batch_put_start_failures_total counter
master_batch_put_start_partial_successes_total counter
master_batch_put_start_items_total counter
master_batch_put_start_failed_items_total counter
master_batch_put_end_requests_total counter
master_batch_put_end_failures_total counter
master_batch_put_end_partial_successes_total counter
master_batch_put_end_items_total counter
master_batch_put_end_failed_items_total counter
master_batch_put_revoke_requests_total counter
master_batch_put_revoke_failures_total counter
master_batch_put_revoke_partial_successes_total counter
master_batch_put_revoke_items_total counter
master_batch_put_revoke_failed_items_total counter
mem_cache_hit_nums_ counter
file_cache_hit_nums_ counter
mem_cache_hit_bytes_total counter
file_cache_hit_bytes_total counter
mem_cache_nums_ gauge
file_cache_nums_ gauge
valid_get_nums_ counter
total_get_nums_ counter
master_successful_evictions_total counter
master_attempted_evictions_total counter
master_evicted_key_count counter
master_evicted_size_bytes counter
master_successful_evictions_mem counter
master_attempted_evictions_mem counter
master_evicted_key_count_mem counter
master_evicted_size_bytes_mem counter
master_successful_evictions_nof counter
master_attempted_evictions_nof counter
master_evicted_key_count_nof counter
master_evicted_size_bytes_nof counter
master_put_start_discard_cnt counter
master_put_start_release_cnt counter
master_put_start_discarded_staging_size gauge
master_promotion_in_flight gauge
master_promotion_admitted_total counter
master_promotion_completed_total counter
master_promotion_completed_bytes_total counter
master_promotion_expired_total counter
master_promotion_failed_total counter
master_promotion_cancelled_total counter
master_promotion_rejected_frequency_total counter
master_promotion_rejected_watermark_total counter
master_promotion_rejected_cap_total counter
mooncake_tenant_quota_reject_total counter tenant_id,reason
mooncake_tenant_evict_bytes_total counter tenant_id
master_snapshot_duration_ms histogram
master_snapshot_success counter
master_snapshot_fail counter
master_copy_start_requests_total counter
master_copy_start_failures_total counter
master_copy_end_requests_total counter
master_copy_end_failures_total counter
master_copy_revoke_requests_total counter
master_copy_revoke_failures_total counter
master_move_start_requests_total counter
master_move_start_failures_total counter
master_move_end_requests_total counter
master_move_end_failures_total counter
master_move_revoke_requests_total counter
master_move_revoke_failures_total counter
master_evict_disk_replica_requests_total counter
master_evict_disk_replica_failures_total counter
master_create_copy_task_requests_total counter
master_create_copy_task_failures_total counter
master_create_move_task_requests_total counter
master_create_move_task_failures_total counter
master_query_task_requests_total counter
master_query_task_failures_total counter
master_fetch_tasks_requests_total counter
master_fetch_tasks_failures_total counter
master_update_task_requests_total counter
master_update_task_failures_total counter
`

// mooncakeClientMetricList is every metric of Mooncake's client (mooncake-store/include/
// client_metric.h: TransferMetric, MasterClientMetric, TransferOperationMetric, SsdMetric,
// DfsMetric; master_heartbeat_metric.h), which a worker exports: name, type, labels. Generated
// as the master's list is; ylt's hybrid_*_1t carry the one label named in the source.
const mooncakeClientMetricList = `
mooncake_transfer_read_bytes counter
mooncake_transfer_write_bytes counter
mooncake_transfer_batch_put_latency histogram
mooncake_transfer_batch_get_latency histogram
mooncake_transfer_get_latency histogram
mooncake_transfer_put_latency histogram
mooncake_client_rpc_count counter rpc_name
mooncake_client_rpc_latency histogram rpc_name
mooncake_transfer_read_operation_count counter op_name
mooncake_transfer_read_operation_bytes counter op_name
mooncake_transfer_read_operation_latency histogram op_name
mooncake_transfer_write_operation_count counter op_name
mooncake_transfer_write_operation_bytes counter op_name
mooncake_transfer_write_operation_latency histogram op_name
mooncake_ssd_read_bytes_total counter
mooncake_ssd_write_bytes_total counter
mooncake_ssd_read_ops_total counter
mooncake_ssd_write_ops_total counter
mooncake_ssd_read_latency_us histogram
mooncake_ssd_write_latency_us histogram
mooncake_ssd_total_bytes_total counter
mooncake_ssd_total_ops_total counter
mooncake_ssd_total_latency_us histogram
mooncake_ssd_read_latency_summary_us summary
mooncake_ssd_write_latency_summary_us summary
mooncake_ssd_total_latency_summary_us summary
mooncake_dfs_read_bytes_total counter
mooncake_dfs_write_bytes_total counter
mooncake_dfs_read_ops_total counter
mooncake_dfs_write_ops_total counter
mooncake_dfs_read_latency_us histogram
mooncake_dfs_write_latency_us histogram
mooncake_dfs_write_staging_latency_us histogram
mooncake_dfs_read_latency_summary_us summary
mooncake_dfs_write_latency_summary_us summary
mooncake_dfs_read_errors_total counter error
mooncake_dfs_write_errors_total counter error
mooncake_dfs_writes_skipped_total counter
mooncake_client_master_heartbeat_status_ok gauge
mooncake_client_master_heartbeat_observation_timestamp_seconds gauge
`

// mooncakeNoSeries are the labelled metrics of the list with no series here, because what
// their label names does not exist (docs/metrics.md says why): the test checks that the
// master declares them with Mooncake's type and labels instead of finding them in a scrape.
var mooncakeNoSeries = map[string]string{
	"nof_segment_allocated_bytes":        "NVMe-oF segments are not supported",
	"nof_segment_total_capacity_bytes":   "NVMe-oF segments are not supported",
	"mooncake_tenant_quota_reject_total": "no put was refused for its tenant's quota",
	"mooncake_dfs_read_errors_total":     "DFS is not a tier here",
	"mooncake_dfs_write_errors_total":    "DFS is not a tier here",
}

// promFamily is one family of a Prometheus text scrape.
type promFamily struct {
	typ    string
	labels map[string]bool
	series int
}

// parseProm reads the families of a text-format scrape: TYPE lines and the label names of
// every series (a histogram's or summary's _bucket, _sum and _count series count for it, le
// and quantile aside).
func parseProm(t *testing.T, body string) map[string]*promFamily {
	t.Helper()
	fams := map[string]*promFamily{}
	sc := bufio.NewScanner(strings.NewReader(body))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if rest, ok := strings.CutPrefix(line, "# TYPE "); ok {
			name, typ, _ := strings.Cut(rest, " ")
			fams[name] = &promFamily{typ: typ, labels: map[string]bool{}}
			continue
		}
		if line == "" || line[0] == '#' {
			continue
		}
		name, rest := line, ""
		if i := strings.IndexAny(line, "{ "); i >= 0 {
			name, rest = line[:i], line[i:]
		}
		f := fams[name]
		for _, suf := range []string{"_bucket", "_sum", "_count"} {
			if f == nil {
				f = fams[strings.TrimSuffix(name, suf)]
			}
		}
		if f == nil {
			t.Fatalf("series without a TYPE line: %q", line)
		}
		f.series++
		if lb, ok := strings.CutPrefix(rest, "{"); ok {
			lb, _, _ = strings.Cut(lb, "}")
			for _, kv := range strings.Split(lb, ",") {
				if k, _, ok := strings.Cut(kv, "="); ok && k != "le" && k != "quantile" {
					f.labels[k] = true
				}
			}
		}
	}
	return fams
}

// TestMooncakeMetricsAndEndpoints starts a standalone (a master and a worker), runs puts,
// gets and a drain through it, then checks every metric of Mooncake's master by name, type
// and labels on the master's /metrics, and every endpoint of Mooncake's master admin service
// by its JSON shape.
func TestMooncakeMetricsAndEndpoints(t *testing.T) {
	dir := t.TempDir()
	s, err := NewStandalone(StandaloneConfig{DataDir: filepath.Join(dir, "data"), RPCAddress: "127.0.0.1:0",
		MetricsAddress: "127.0.0.1:0", WorkerMetricsAddress: "127.0.0.1:0", GlobalSegmentSize: 32 << 20, Logger: testLogger()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = s.Shutdown(ctx)
	})
	m, w := s.Master(), s.Worker()
	url := "http://" + m.MetricsAddr()
	d := newDriver(t, []string{m.Addr()})
	if err := d.put("a", []byte("value-a"), 1, false); err != nil {
		t.Fatal(err)
	}
	d.mustGet("a", []byte("value-a"), 1)

	// Every metric of Mooncake's master, with its type and labels, and of its client on the
	// worker.
	_, body := httpGet(t, url+"/metrics")
	if n := checkMetricList(t, "master", body, mooncakeMasterMetricList); n != 159 {
		t.Errorf("the master list has %d names; keep it as Mooncake's source has it", n)
	}
	_, wbody := httpGet(t, "http://"+w.MetricsAddr()+"/metrics")
	if n := checkMetricList(t, "worker", wbody, mooncakeClientMetricList); n != 40 {
		t.Errorf("the client list has %d names; keep it as Mooncake's source has it", n)
	}
	for _, want := range []string{"mooncake_transfer_read_bytes 7", "mooncake_transfer_write_bytes 7", `mooncake_client_rpc_count{rpc_name="MountSegment"} 1`,
		`mooncake_transfer_read_operation_count{op_name="tcp"} 1`, "mooncake_client_master_heartbeat_status_ok 1", "mooncake_transfer_get_latency_count 1"} {
		if !strings.Contains(wbody, want) {
			t.Errorf("worker /metrics lacks %q:\n%s", want, grepLines(wbody, "mooncake_transfer_read_bytes", "write_bytes", "rpc_count", "heartbeat"))
		}
	}
	// The no-series ones are declared with Mooncake's labels.
	for _, dsc := range s.Master().TestHooks().NoSeriesDescs() {
		if !strings.Contains(dsc, "variableLabels: {segment}") && !strings.Contains(dsc, "variableLabels: {tenant_id,reason}") {
			t.Errorf("declared as %s", dsc)
		}
	}
	if !strings.Contains(body, "master_client_liveness_active_clients 1") || !strings.Contains(body, `segment_allocated_bytes{segment="standalone-worker"} 7`) {
		t.Errorf("liveness and segment gauges do not show the worker:\n%s", grepLines(body, "liveness", "segment_allocated"))
	}

	// Every endpoint of Mooncake's master admin service, by its JSON shape.
	getJSON := func(path string, wantCode int, keys ...string) map[string]any {
		t.Helper()
		code, body := httpGet(t, url+path)
		var v map[string]any
		if code != wantCode || json.Unmarshal([]byte(body), &v) != nil {
			t.Fatalf("%s: %d %s", path, code, body)
		}
		for _, k := range keys {
			if _, ok := v[k]; !ok {
				t.Errorf("%s: no %q in %s", path, k, body)
			}
		}
		return v
	}
	textOK := func(path, want string) {
		t.Helper()
		if code, body := httpGet(t, url+path); code != 200 || !strings.Contains(body, want) {
			t.Errorf("%s: %d %q, want %q in it", path, code, body, want)
		}
	}
	textOK("/metrics/summary", "role=leader, state=serving, service_ready=true, master={")
	getJSON("/health", 200, "status", "role", "ha_state", "service_ready", "leader_address", "view_version")
	textOK("/role", "leader")
	textOK("/ha_status", "serving")
	getJSON("/kv_events/status", 200, "enabled", "published_batches", "published_events", "dropped_events", "skipped_unparsed_keys")
	getJSON("/leader", 200, "present", "leader_address", "view_version")
	qk := getJSON("/query_key?key=a", 200, "success", "data")
	if ds, _ := qk["data"].([]any); len(ds) != 1 {
		t.Errorf("/query_key data: %v", qk)
	}
	getJSON("/query_key?key=nope", 404, "success", "error_code", "error_message")
	textOK("/get_all_keys", "a\n")
	textOK("/get_all_segments", w.Addr()+"\n")
	sd := getJSON("/get_segments_detail", 200, "total_segments", "segments")
	if segs, _ := sd["segments"].([]any); len(segs) != 1 {
		t.Fatalf("/get_segments_detail: %v", sd)
	} else {
		item := segs[0].(map[string]any)
		for _, k := range []string{"segment_name", "segment_id", "client_id", "base_address", "size_bytes", "size_human", "te_endpoint",
			"protocol", "status", "allocator_used_bytes", "allocator_capacity_bytes", "allocator_usage_percent"} {
			if _, ok := item[k]; !ok {
				t.Errorf("/get_segments_detail item lacks %q: %v", k, item)
			}
		}
	}
	textOK("/query_segment?segment="+w.Addr(), "Used(bytes): 7\nCapacity(bytes) : ")
	getJSON("/batch_query_keys?keys=a,nope", 200, "success", "data")
	st := getJSON("/api/v1/segments/status?segment="+w.Addr(), 200, "success", "segment", "status", "status_name")
	if st["status_name"] != "OK" {
		t.Errorf("segment status: %v", st)
	}
	getJSON("/api/v1/segments/status?segment=nope", 404, "success", "error_code", "error_message")

	post := func(path, body string, wantCode int) map[string]any {
		t.Helper()
		resp, err := http.Post(url+path, "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var v map[string]any
		if resp.StatusCode != wantCode || json.NewDecoder(resp.Body).Decode(&v) != nil {
			t.Fatalf("POST %s: %d %v", path, resp.StatusCode, v)
		}
		return v
	}
	post("/api/v1/drain_jobs", `{"segments":["nope"]}`, 404)
	post("/api/v1/drain_jobs", `not json`, 400)
	job := post("/api/v1/drain_jobs", `{"segments":["`+w.Addr()+`"]}`, 200)
	id, _ := job["job_id"].(string)
	if job["status"] != "CREATED" || len(id) != 36 {
		t.Fatalf("drain job: %v", job)
	}
	q := getJSON("/api/v1/drain_jobs/query?job_id="+id, 200, "success", "job_id", "type", "type_name", "status", "status_name",
		"created_at_ms_epoch", "last_updated_at_ms_epoch", "segments", "succeeded_units", "failed_units", "blocked_units",
		"active_units", "migrated_bytes", "message")
	if q["status_name"] != "RUNNING" || q["active_units"] != 1.0 { // one worker: the replica has nowhere to go
		t.Errorf("drain job query: %v", q)
	}
	if st := getJSON("/api/v1/segments/status?segment="+w.Addr(), 200, "status_name"); st["status_name"] != "DRAINING" {
		t.Errorf("segment status while draining: %v", st)
	}
	getJSON("/api/v1/drain_jobs/query?job_id=nope", 404, "error_code")
	if c := post("/api/v1/drain_jobs/cancel?job_id="+id, "", 200); c["status"] != "CANCELED" {
		t.Errorf("cancel: %v", c)
	}
	if q := getJSON("/api/v1/drain_jobs/query?job_id="+id, 200, "status_name"); q["status_name"] != "CANCELED" {
		t.Errorf("after cancel: %v", q)
	}
}

// checkMetricList checks every name of list (lines "name type [label,label]") against a
// scrape: the family is there with that type and, when it has series, those labels; a name
// of mooncakeNoSeries has no series. It returns the number of names.
func checkMetricList(t *testing.T, who, body, list string) int {
	t.Helper()
	fams := parseProm(t, body)
	n := 0
	for _, line := range strings.Split(strings.TrimSpace(list), "\n") {
		fields := strings.Fields(line)
		name, typ, labels := fields[0], fields[1], []string(nil)
		if len(fields) > 2 {
			labels = strings.Split(fields[2], ",")
		}
		n++
		if why, ok := mooncakeNoSeries[name]; ok {
			if strings.Contains(body, name+"{") {
				t.Errorf("%s: %s has series although %s", who, name, why)
			}
			continue
		}
		f := fams[name]
		if f == nil {
			t.Errorf("%s /metrics lacks Mooncake's %s (%s)", who, name, typ)
			continue
		}
		if f.typ != typ {
			t.Errorf("%s: %s is a %s, Mooncake's is a %s", who, name, f.typ, typ)
		}
		got := make([]string, 0, len(f.labels))
		for k := range f.labels {
			got = append(got, k)
		}
		slices.Sort(got)
		slices.Sort(labels)
		if f.series > 0 && !slices.Equal(got, labels) {
			t.Errorf("%s: %s has labels %v, Mooncake's has %v", who, name, got, labels)
		}
	}
	return n
}

// grepLines returns the lines of s holding any of subs.
func grepLines(s string, subs ...string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		for _, sub := range subs {
			if strings.Contains(l, sub) {
				out = append(out, l)
				break
			}
		}
	}
	return strings.Join(out, "\n")
}
