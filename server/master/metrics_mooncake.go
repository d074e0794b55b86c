package master

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/mooncake-go/mooncake/server/lifecycle"
	"github.com/mooncake-go/mooncake/transfer"
)

// The rest of Mooncake's master metric names (master_metric_manager.cpp), beside those that
// metrics.go, metrics_compat.go and worker_stats.go already export under the same name: a
// Grafana board built for Mooncake finds every name it queries, with Mooncake's type and
// labels. Each is declared once here, with its value where the quantity exists here and a
// help text saying why it stays 0 where it does not (docs/metrics.md has the same reasons).

// mooncakeSnapshot is what the rows below read, taken once per scrape.
type mooncakeSnapshot struct {
	// states counts the workers of the leader's soft state by lifecycle state.
	states map[lifecycle.State]int
	// totals are the workers' counters summed from their heartbeats (worker_stats.go).
	totals transfer.WorkerStats
	// allocFailures: PutStart calls refused for want of room; putDiscards: puts that did not
	// reach PutEnd within put_timeout and were dropped.
	allocFailures, putDiscards uint64
}

// mooncakeRow is one Mooncake metric without labels: its type and how to read it (nil: 0,
// the help says why).
type mooncakeRow struct {
	name, help string
	kind       prometheus.ValueType
	value      func(s *mooncakeSnapshot) float64
}

const (
	whyNoF      = " Always 0: NVMe-oF segments are not supported."
	whyNoCall   = " Always 0: this build has no such call."
	whyNoTasks  = " Always 0: the leader has the workers copy worker to worker on its repair queue (master_repair_*), without Mooncake's copy/move protocol, and no client fetches or updates tasks; copy and move tasks count under master_create_copy_task_*, master_create_move_task_*, master_query_task_* and master_tasks*."
	whyNoQueue  = " Always 0: a worker promotes an NVMe object to DRAM while it serves the read; there is no promotion queue to admit, expire or reject."
	whyOneStep  = " Always 0: a worker leaving is one raft commit on the leader, never retried."
	whyDRAMOnly = " Every eviction here is from DRAM, so it equals the unsuffixed metric."
)

func counter(name, help string, v func(s *mooncakeSnapshot) float64) mooncakeRow {
	return mooncakeRow{name: name, help: help, kind: prometheus.CounterValue, value: v}
}

func gauge(name, help string, v func(s *mooncakeSnapshot) float64) mooncakeRow {
	return mooncakeRow{name: name, help: help, kind: prometheus.GaugeValue, value: v}
}

// inState returns a reader of the number of workers in any of states.
func inState(states ...lifecycle.State) func(s *mooncakeSnapshot) float64 {
	return func(s *mooncakeSnapshot) float64 {
		n := 0
		for _, st := range states {
			n += s.states[st]
		}
		return float64(n)
	}
}

// requestsAndFailures returns the _requests_total and _failures_total rows of a call that
// does not exist here.
func requestsAndFailures(stem, why string) []mooncakeRow {
	return []mooncakeRow{
		counter("master_"+stem+"_requests_total", "Mooncake's "+stem+" requests."+why, nil),
		counter("master_"+stem+"_failures_total", "Mooncake's failed "+stem+" requests."+why, nil),
	}
}

// batchRows returns the five rows of a batch call that does not exist here.
func batchRows(stem, why string) []mooncakeRow {
	rows := requestsAndFailures(stem, why)
	for _, s := range []string{"partial_successes_total", "items_total", "failed_items_total"} {
		rows = append(rows, counter("master_"+stem+"_"+s, "Mooncake's "+stem+" "+s+"."+why, nil))
	}
	return rows
}

// mooncakeRows are the unlabelled rows, in Mooncake's order.
var mooncakeRows = func() []mooncakeRow {
	evictions := func(f func(t *transfer.WorkerStats) int64) func(s *mooncakeSnapshot) float64 {
		return func(s *mooncakeSnapshot) float64 { return float64(f(&s.totals)) }
	}
	rows := []mooncakeRow{
		gauge("master_nof_allocated_bytes", "NVMe-oF bytes allocated."+whyNoF, nil),
		gauge("master_total_nof_capacity_bytes", "NVMe-oF capacity."+whyNoF, nil),
		gauge("master_client_liveness_active_clients", "Workers alive (registering, alive, draining or returning) in the leader's lifecycle (leader only).",
			inState(lifecycle.Registering, lifecycle.Alive, lifecycle.Returning, lifecycle.Draining)),
		gauge("master_client_liveness_suspected_clients", "Workers silent past two thirds of client_ttl (leader only).", inState(lifecycle.Suspect)),
		gauge("master_client_liveness_offline_clients", "Workers dead (their replicas kept as lost replicas for re-adoption) (leader only).", inState(lifecycle.Dead)),
		counter("master_client_liveness_suspected_transitions_total", "Mooncake's Active to Suspected transitions. Always 0 here: the leader's lifecycle shows the current states (the gauges above) and logs each transition; it does not count them.", nil),
		counter("master_client_liveness_recoveries_total", "Mooncake's Suspected to Active recoveries. Always 0 here: see master_client_liveness_suspected_transitions_total.", nil),
		counter("master_client_liveness_offline_transitions_total", "Mooncake's Suspected to Offline transitions. Always 0 here: see master_client_liveness_suspected_transitions_total.", nil),
		gauge("master_client_offboarding_queue_depth", "Workers that announced leaving (SIGTERM) and are within their restart grace (leader only).", inState(lifecycle.Leaving)),
		counter("master_client_offboarding_failures_total", "Failed offboarding attempts."+whyOneStep, nil),
		counter("master_client_offboarding_retries_total", "Retried offboarding attempts."+whyOneStep, nil),
		counter("master_put_start_alloc_failures_total", "PutStart calls refused because no worker had room (NO_AVAILABLE_HANDLE); also counted in master_put_start_failures_total.",
			func(s *mooncakeSnapshot) float64 { return float64(s.allocFailures) }),
	}
	rows = append(rows, requestsAndFailures("get_replica_list_by_regex", whyNoCall)...)
	rows = append(rows, requestsAndFailures("unmount_segment", " Always 0: a worker leaves by a heartbeat flag (master_ping_*) or by dying (master_client_liveness_offline_clients).")...)
	rows = append(rows, requestsAndFailures("remount_segment", " Always 0: a returning worker registers again (master_mount_segment_*).")...)
	for _, stem := range []string{"mount_nof_segment", "unmount_nof_segment", "remount_nof_segment"} {
		rows = append(rows, requestsAndFailures(stem, whyNoF)...)
	}
	rows = append(rows,
		counter("master_nof_heartbeat_success_total", "NVMe-oF heartbeat probes."+whyNoF, nil),
		counter("master_nof_heartbeat_failure_total", "NVMe-oF heartbeat probes."+whyNoF, nil),
		counter("master_nof_heartbeat_timeout_total", "NVMe-oF heartbeat probes."+whyNoF, nil),
		counter("master_nof_segments_unmounted_by_heartbeat_total", "NVMe-oF segments unmounted."+whyNoF, nil),
	)
	rows = append(rows, batchRows("batch_query_ip", whyNoCall)...)
	rows = append(rows, batchRows("batch_replica_clear", whyNoCall)...)
	rows = append(rows, batchRows("batch_put_revoke", " Always 0: a batch put revokes its items one by one (master_put_revoke_*).")...)
	rows = append(rows,
		counter("master_successful_evictions_mem", "Eviction passes on the workers that evicted something (leader only)."+whyDRAMOnly,
			evictions(func(t *transfer.WorkerStats) int64 { return t.EvictPasses })),
		counter("master_attempted_evictions_mem", "Eviction passes plus puts refused because nothing could be evicted (leader only)."+whyDRAMOnly,
			evictions(func(t *transfer.WorkerStats) int64 { return t.EvictPasses + t.NoSpace })),
		counter("master_evicted_key_count_mem", "Objects evicted from the workers' DRAM (leader only)."+whyDRAMOnly,
			evictions(func(t *transfer.WorkerStats) int64 { return t.Evictions })),
		counter("master_evicted_size_bytes_mem", "Bytes evicted from the workers' DRAM (leader only)."+whyDRAMOnly,
			evictions(func(t *transfer.WorkerStats) int64 { return t.EvictedBytes })),
		counter("master_successful_evictions_nof", "NVMe-oF evictions."+whyNoF, nil),
		counter("master_attempted_evictions_nof", "NVMe-oF evictions."+whyNoF, nil),
		counter("master_evicted_key_count_nof", "NVMe-oF evictions."+whyNoF, nil),
		counter("master_evicted_size_bytes_nof", "NVMe-oF evictions."+whyNoF, nil),
		counter("master_put_start_discard_cnt", "Puts that did not reach PutEnd within put_timeout and were dropped (leader only).",
			func(s *mooncakeSnapshot) float64 { return float64(s.putDiscards) }),
		counter("master_put_start_release_cnt", "Space of discarded puts released: the workers drop a discarded put's bytes at once, so it equals master_put_start_discard_cnt.",
			func(s *mooncakeSnapshot) float64 { return float64(s.putDiscards) }),
		counter("mem_cache_hit_bytes_total", "Bytes of gets served from DRAM. 0 on the master: heartbeats carry the workers' hit counts (mem_cache_hit_nums_), not bytes; each worker's /metrics has this name with its bytes.", nil),
		counter("file_cache_hit_bytes_total", "Bytes of gets served from NVMe. 0 on the master: see mem_cache_hit_bytes_total.", nil),
		gauge("master_put_start_discarded_staging_size", "Bytes of discarded puts not yet released. Always 0: the workers free a discarded put's bytes at once.", nil),
		gauge("master_promotion_in_flight", "Promotions in flight."+whyNoQueue, nil),
		counter("master_promotion_admitted_total", "NVMe objects the workers promoted to DRAM (leader only; from their heartbeats).",
			evictions(func(t *transfer.WorkerStats) int64 { return t.Promotions })),
		counter("master_promotion_completed_total", "NVMe objects the workers promoted to DRAM (leader only; from their heartbeats): every admitted promotion completes.",
			evictions(func(t *transfer.WorkerStats) int64 { return t.Promotions })),
		counter("master_promotion_completed_bytes_total", "Bytes promoted. Always 0 here: heartbeats carry the number of promotions, not their bytes (worker_promotions_total on each worker).", nil),
		counter("master_promotion_expired_total", "Expired promotions."+whyNoQueue, nil),
		counter("master_promotion_failed_total", "Failed promotions."+whyNoQueue, nil),
		counter("master_promotion_cancelled_total", "Cancelled promotions."+whyNoQueue, nil),
		counter("master_promotion_rejected_frequency_total", "Rejected promotions."+whyNoQueue, nil),
		counter("master_promotion_rejected_watermark_total", "Rejected promotions."+whyNoQueue, nil),
		counter("master_promotion_rejected_cap_total", "Rejected promotions."+whyNoQueue, nil),
		counter("master_snapshot_success", "Mooncake's metadata snapshots (fork and dump). Always 0: the metadata is a raft log with raft snapshots, taken by hashicorp/raft and logged.", nil),
		counter("master_snapshot_fail", "Mooncake's failed metadata snapshots. Always 0: see master_snapshot_success.", nil),
	)
	for _, stem := range []string{"copy_start", "copy_end", "copy_revoke", "move_start", "move_end", "move_revoke", "evict_disk_replica",
		"fetch_tasks", "update_task"} {
		rows = append(rows, requestsAndFailures(stem, whyNoTasks)...)
	}
	return rows
}()

// mooncakeHistograms are Mooncake's histograms of quantities with no counterpart here:
// exported empty, with Mooncake's buckets, so a board's queries resolve.
var mooncakeHistograms = []struct {
	desc    *prometheus.Desc
	buckets []float64
}{
	{prometheus.NewDesc("master_client_offboarding_duration_ms", "Offboarding durations. Always empty: a worker leaving is one raft commit (see master_raft_commit_duration_seconds).", nil, nil),
		[]float64{1, 5, 10, 25, 50, 100, 250, 500, 1000, 5000, 30000}},
	{prometheus.NewDesc("master_nof_heartbeat_probe_latency_ms", "NVMe-oF heartbeat probes. Always empty: NVMe-oF segments are not supported.", nil, nil),
		[]float64{1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000}},
	{prometheus.NewDesc("master_snapshot_duration_ms", "Mooncake's metadata snapshot durations. Always empty: see master_snapshot_success.", nil, nil),
		[]float64{0, 500, 1000, 5000, 10000, 30000, 60000, 120000, 180000, 240000, 300000}},
}

// Mooncake's labelled metrics beyond segment_*{segment}: nof_segment_* have a series per
// NVMe-oF segment (none here); mooncake_tenant_* one per tenant (metrics_tenants.go), except
// the evicted bytes, which the workers count for all tenants together (under "default").
var (
	descNoFSegAllocated = prometheus.NewDesc("nof_segment_allocated_bytes", "NVMe-oF bytes of one segment. No series: NVMe-oF segments are not supported.", []string{"segment"}, nil)
	descNoFSegCapacity  = prometheus.NewDesc("nof_segment_total_capacity_bytes", "NVMe-oF capacity of one segment. No series: NVMe-oF segments are not supported.", []string{"segment"}, nil)
	descTenantRejects   = prometheus.NewDesc("mooncake_tenant_quota_reject_total", "Puts refused for their tenant's quota (reason quota_exceeded), by the master that refused them (metrics_tenants.go).", []string{"tenant_id", "reason"}, nil)
	descTenantEvicted   = prometheus.NewDesc("mooncake_tenant_evict_bytes_total", "Bytes evicted from the workers' DRAM, all in the one tenant \"default\" (leader only).", []string{"tenant_id"}, nil)
	// descWorkersByState is ours, not Mooncake's: the leader's workers by lifecycle state.
	descWorkersByState = prometheus.NewDesc("master_workers", "Workers in each lifecycle state of the leader's soft state, one series per state (0 when none; all 0 on followers).", []string{"state"}, nil)
	mooncakeRowDescs   = func() []*prometheus.Desc {
		out := make([]*prometheus.Desc, len(mooncakeRows))
		for i, r := range mooncakeRows {
			out[i] = prometheus.NewDesc(r.name, r.help, nil, nil)
		}
		return out
	}()
)

// defaultTenant is Mooncake's tenant id of clients that name none.
const defaultTenant = "default"

// mooncakeRowsCollector exports mooncakeRows, mooncakeHistograms, the labelled metrics and
// master_workers{state}.
type mooncakeRowsCollector struct{ m *Master }

func (c mooncakeRowsCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range mooncakeRowDescs {
		ch <- d
	}
	for _, h := range mooncakeHistograms {
		ch <- h.desc
	}
	ch <- descNoFSegAllocated
	ch <- descNoFSegCapacity
	ch <- descTenantRejects
	ch <- descTenantEvicted
	ch <- descWorkersByState
	describeTenants(ch)
}

func (c mooncakeRowsCollector) Collect(ch chan<- prometheus.Metric) {
	s := c.m.mooncakeSnapshot()
	for i, r := range mooncakeRows {
		v := 0.0
		if r.value != nil {
			v = r.value(&s)
		}
		ch <- prometheus.MustNewConstMetric(mooncakeRowDescs[i], r.kind, v)
	}
	for _, h := range mooncakeHistograms {
		b := make(map[float64]uint64, len(h.buckets))
		for _, le := range h.buckets {
			b[le] = 0
		}
		ch <- prometheus.MustNewConstHistogram(h.desc, 0, 0, b)
	}
	ch <- prometheus.MustNewConstMetric(descTenantEvicted, prometheus.CounterValue, float64(s.totals.EvictedBytes), defaultTenant)
	for _, st := range lifecycle.ListedStates() {
		ch <- prometheus.MustNewConstMetric(descWorkersByState, prometheus.GaugeValue, float64(s.states[st]), st.String())
	}
	c.m.collectTenants(ch)
}

// mooncakeSnapshot reads what mooncakeRows need: the lifecycle states under m.mu, the
// workers' totals and the master's own counters.
func (m *Master) mooncakeSnapshot() mooncakeSnapshot {
	s := mooncakeSnapshot{states: map[lifecycle.State]int{}, totals: m.met.mc.workers.totals(),
		allocFailures: m.met.mc.allocFailures.Load(), putDiscards: m.met.mc.putDiscards.Load()}
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, w := range m.mu.lc.Workers() {
		s.states[w.State]++
	}
	return s
}
