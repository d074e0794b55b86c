package master

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/mooncake-go/mooncake/internal/base"
	"github.com/mooncake-go/mooncake/raftmeta"
	"github.com/mooncake-go/mooncake/server/internal/admin"
	"github.com/mooncake-go/mooncake/server/lifecycle"
	"github.com/mooncake-go/mooncake/transfer"
)

// Mooncake's metric names where the meaning exists here, request latency histograms, raft
// metrics, and the periodic "Master Metrics:" line in the shape of Mooncake's current
// master_metric_manager (rates per second over the last window). docs/metrics.md maps every
// Mooncake name to ours.

// valueSizeBuckets are Mooncake's master_value_size_bytes buckets (4 KiB to 64 MiB).
var valueSizeBuckets = []float64{4096, 65536, 262144, 1048576, 4194304, 16777216, 67108864}

// mooncakeMasterMetrics are the master's Mooncake-named metrics and the summary line's state.
type mooncakeMasterMetrics struct {
	m *Master
	// latency: master_request_duration_seconds{op}, one series per master call.
	latency *prometheus.HistogramVec
	// valueSize: master_value_size_bytes, the size of every committed put.
	valueSize prometheus.Histogram

	// batch counts batch calls as Mooncake does: whole, partial and failed, and their items;
	// indexed by the batch masterOps (opBatchPutStart, ...).
	batch [numMasterOps]batchCounter
	// allocFailures counts PutStart calls refused for want of room; putDiscards puts dropped
	// because they did not reach PutEnd within put_timeout (metrics_mooncake.go).
	allocFailures, putDiscards atomic.Uint64

	// workers: the workers' counters and per-model tallies from their heartbeats
	// (worker_stats.go).
	workers clusterWorkerStats

	// sum is the counters at the last "Master Metrics:" line, for its rates per second.
	sum struct {
		sync.Mutex // protects the fields below
		at         time.Time
		req, fail  [numMasterOps]uint64
		batch      [numMasterOps]batchSnapshot
	}
}

// batchCounter counts one batch call. A call whose every item failed (or that failed as a
// whole) is a failure, one with some failed items a partial success.
type batchCounter struct {
	requests, partial, failures, items, failedItems atomic.Uint64
}

// batchSnapshot is a batchCounter's values at one moment.
type batchSnapshot struct{ requests, partial, failures, items, failedItems uint64 }

func (c *batchCounter) load() batchSnapshot {
	return batchSnapshot{c.requests.Load(), c.partial.Load(), c.failures.Load(), c.items.Load(), c.failedItems.Load()}
}

// batchOps are the batch calls, with Mooncake's metric stem and the summary line's name.
var batchOps = []struct {
	op         masterOp
	stem, name string
}{
	{opBatchPutStart, "batch_put_start", "PutStart"}, {opBatchPutEnd, "batch_put_end", "PutEnd"},
	{opBatchLookup, "batch_get_replica_list", "Get"}, {opBatchExists, "batch_exist_key", "ExistKey"},
	{opBatchRemove, "batch_remove", "Del"},
}

// newMooncakeMasterMetrics registers the Mooncake-named metrics of m on m.met.reg.
func newMooncakeMasterMetrics(m *Master) *mooncakeMasterMetrics {
	mc := &mooncakeMasterMetrics{m: m}
	mc.latency = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "master_request_duration_seconds",
		Help:    "Time the master took to answer a call, by call (PutStart, PutEnd, Lookup, ...).",
		Buckets: admin.RequestLatencyBuckets,
	}, []string{"op"})
	mc.valueSize = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    "master_value_size_bytes",
		Help:    "Distribution of object value sizes (Mooncake's buckets).",
		Buckets: valueSizeBuckets,
	})
	ops := &m.met.ops
	for _, b := range batchOps {
		c := &mc.batch[b.op]
		for _, f := range []struct {
			suffix, help string
			v            *atomic.Uint64
		}{
			{"partial_successes_total", "batch calls with some failed items", &c.partial},
			{"items_total", "items in batch calls", &c.items},
			{"failed_items_total", "failed items in batch calls", &c.failedItems},
		} {
			v := f.v
			m.met.reg.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{
				Name: "master_" + b.stem + "_" + f.suffix,
				Help: "Number of " + f.help + " (" + b.name + "), Mooncake's name.",
			}, func() float64 { return float64(v.Load()) }))
		}
	}
	m.met.reg.MustRegister(mc.latency, mc.valueSize, &mooncakeMasterCollector{m: m}, clusterWorkerCollector{m}, mooncakeRowsCollector{m},
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "total_get_nums_",
			Help: "Total number of GetReplicaList (Lookup) calls, Mooncake's name.",
		}, func() float64 { return float64(ops[opLookup].Requests.Load()) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "valid_get_nums_",
			Help: "Lookup calls that returned at least one replica, Mooncake's name.",
		}, func() float64 {
			return float64(ops[opLookup].Requests.Load() - min(ops[opLookup].Failures.Load(), ops[opLookup].Requests.Load()))
		}),
	)
	return mc
}

// observeCall records one master call: its latency, the value sizes of committed puts, and
// the items of batch calls.
func (mc *mooncakeMasterMetrics) observeCall(req, resp transfer.Message, d time.Duration, err error) {
	mc.latency.WithLabelValues(req.Op().String()).Observe(d.Seconds())
	// failedAt reports whether item i of the response failed (every item when err != nil).
	failedAt := func(i int) bool { return err != nil }
	op, n := masterOp(-1), 0
	switch r := req.(type) {
	case *transfer.PutStartRequest:
		if errors.Is(err, base.ErrNoSpace) {
			mc.allocFailures.Add(1)
		}
	case *transfer.PutEndRequest:
		if err == nil {
			mc.valueSize.Observe(float64(r.Size))
		}
	case *transfer.BatchPutEndRequest:
		op, n = opBatchPutEnd, len(r.Items)
		br, _ := resp.(*transfer.BatchResponse)
		if err == nil && br != nil && len(br.Items) == n {
			failedAt = func(i int) bool { return br.Items[i].Code != base.CodeOK }
		}
		for i := range r.Items {
			if !failedAt(i) {
				mc.valueSize.Observe(float64(r.Items[i].Size))
			}
		}
	case *transfer.BatchPutStartRequest:
		op, n = opBatchPutStart, len(r.Items)
		if br, _ := resp.(*transfer.BatchPutStartResponse); err == nil && br != nil && len(br.Items) == n {
			failedAt = func(i int) bool { return br.Items[i].Err.Code != base.CodeOK }
		}
	case *transfer.BatchLookupRequest:
		op, n = opBatchLookup, len(r.Keys)
		if br, _ := resp.(*transfer.BatchLookupResponse); err == nil && br != nil && len(br.Items) == n {
			failedAt = func(i int) bool { return br.Items[i].Err.Code != base.CodeOK }
		}
	case *transfer.BatchExistsRequest:
		op, n = opBatchExists, len(r.Keys)
	case *transfer.BatchRemoveRequest:
		op, n = opBatchRemove, len(r.Keys)
		if br, _ := resp.(*transfer.BatchResponse); err == nil && br != nil && len(br.Items) == n {
			failedAt = func(i int) bool { return br.Items[i].Code != base.CodeOK }
		}
	}
	if op < 0 {
		return
	}
	failed := 0
	for i := range n {
		if failedAt(i) {
			failed++
		}
	}
	c := &mc.batch[op]
	c.requests.Add(1)
	c.items.Add(uint64(n))
	c.failedItems.Add(uint64(failed))
	switch {
	case err != nil || (n > 0 && failed == n):
		c.failures.Add(1)
	case failed > 0:
		c.partial.Add(1)
	}
}

var (
	descActiveClients  = prometheus.NewDesc("master_active_clients", "Workers (Mooncake's store clients that mount a segment) alive.", nil, nil)
	descFileCapacity   = prometheus.NewDesc("master_total_file_capacity_bytes", "Capacity of the workers' NVMe tiers (leader only; 0 on followers).", nil, nil)
	descFileAllocated  = prometheus.NewDesc("master_allocated_file_size_bytes", "Bytes on the workers' NVMe tiers (leader only; 0 on followers).", nil, nil)
	descMemCacheNums   = prometheus.NewDesc("mem_cache_nums_", "Objects in the workers' DRAM (leader only; 0 on followers).", nil, nil)
	descFileCacheNums  = prometheus.NewDesc("file_cache_nums_", "Objects on the workers' NVMe tiers (leader only; 0 on followers).", nil, nil)
	descRaftTerm       = prometheus.NewDesc("master_raft_term", "Current raft term of this master.", nil, nil)
	descRaftLeader     = prometheus.NewDesc("master_raft_is_leader", "1 on the raft leader, 0 elsewhere.", nil, nil)
	descRaftChanges    = prometheus.NewDesc("master_raft_leader_changes_total", "Leader elections this master has seen.", nil, nil)
	descRaftCommit     = prometheus.NewDesc("master_raft_commit_duration_seconds", "Time from proposing a raft command to its result (leader only).", nil, nil)
	descRaftLogStore   = prometheus.NewDesc("master_raft_log_store_duration_seconds", "Time to write (and fsync) entries to this master's raft log.", nil, nil)
	mooncakeMasterDesc = []*prometheus.Desc{descActiveClients, descFileCapacity, descFileAllocated, descMemCacheNums, descFileCacheNums,
		descRaftTerm, descRaftLeader, descRaftChanges, descRaftCommit, descRaftLogStore}
)

// mooncakeMasterCollector reads the master's state at scrape time.
type mooncakeMasterCollector struct{ m *Master }

func (c *mooncakeMasterCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range mooncakeMasterDesc {
		ch <- d
	}
}

func (c *mooncakeMasterCollector) Collect(ch chan<- prometheus.Metric) {
	m := c.m
	g := func(d *prometheus.Desc, v float64) { ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v) }
	st := m.node.Stats()
	u := m.usageTotals()
	g(descActiveClients, float64(st.Active))
	g(descFileCapacity, float64(u.nvmeCap))
	g(descFileAllocated, float64(u.nvmeUsed))
	g(descMemCacheNums, float64(u.dramObjects))
	g(descFileCacheNums, float64(u.nvmeObjects))
	g(descRaftTerm, float64(st.Term))
	leader := 0.0
	if m.node.IsLeader() {
		leader = 1
	}
	g(descRaftLeader, leader)
	ch <- prometheus.MustNewConstMetric(descRaftChanges, prometheus.CounterValue, float64(m.node.LeaderChanges()))
	ch <- constHistogram(descRaftCommit, m.node.CommitLatency())
	ch <- constHistogram(descRaftLogStore, m.node.LogStoreLatency())
}

// constHistogram converts a raftmeta histogram snapshot for Prometheus.
func constHistogram(d *prometheus.Desc, h raftmeta.Histogram) prometheus.Metric {
	buckets := make(map[float64]uint64, len(h.Bounds))
	for i, b := range h.Bounds {
		buckets[b] = h.Counts[i]
	}
	return prometheus.MustNewConstHistogram(d, h.Count, h.Sum, buckets)
}

// usageTotals are sums over the leader's soft state of the workers' last heartbeats.
type usageTotals struct {
	nvmeUsed, nvmeCap, dramObjects, nvmeObjects int64
}

// usageTotals sums the usage of every worker heard from during this leadership (zero on a
// follower, whose soft state is empty).
func (m *Master) usageTotals() usageTotals {
	var t usageTotals
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, ws := range m.mu.lc.Workers() {
		if ws.State == lifecycle.Dead {
			continue // its usage is the last it reported before it died
		}
		t.nvmeUsed += ws.Usage.NVMeUsed
		t.nvmeCap += ws.Usage.NVMeCapacity
		t.dramObjects += ws.Usage.DRAMObjects
		t.nvmeObjects += ws.Usage.NVMeObjects
	}
	return t
}

// logSummary logs the "Master Metrics:" line on the leader (unless NoSummary) and starts
// the next rate window.
func (m *Master) logSummary() {
	if m.cfg.NoSummary || !m.node.IsLeader() {
		return
	}
	m.log.Info("Master Metrics: " + m.met.mc.summary(m.stats(), m.usageTotals(), time.Now(), true))
}

// summaryText is the body of /metrics/summary, in Mooncake's shape: role, state, readiness,
// then the master summary (rates over the window since the last logged line, which it does
// not reset) and the replication ("ha") state.
func (m *Master) summaryText() string {
	lid, laddr := m.node.Leader()
	st := m.node.Stats()
	ready := m.health() == nil
	s := fmt.Sprintf("role=%s, state=%s, service_ready=%t, master={%s}, ha={term=%d, leader_id=%s, leader_changes=%d, commit_index=%d, applied_index=%d, voters=%d}",
		m.role(), m.haState(), ready, m.met.mc.summary(m.stats(), m.usageTotals(), time.Now(), false),
		st.Term, lid, m.node.LeaderChanges(), st.CommitIndex, st.AppliedIndex, st.NumPeers)
	if lid != "" {
		s += fmt.Sprintf(", leader=%s, view_version=%d", laddr, st.Term)
	}
	return s
}

// summary renders the master part of the line:
//
//	Mem Storage: 1.2 GiB / 4.0 GiB (30.0%) | SSD Storage: 0 B / 0 B | Keys: 7 (soft-pinned: 2) |
//	Clients: 3 | Requests (Success/Total per sec): PutStart=0.80/1.00, ... | Batch Requests
//	(per sec, Req=Success/PartialSuccess/Total, Item=Success/Total): PutStart:(Req=0.00/0.00/0.00, Item=0.00/0.00), ...
//
// Rates are per second over the window since the last call with reset (0.00 on the first);
// a batch call with some failed items is a partial success, one whose every item failed a
// failure (as Mooncake counts them). reset starts a new
// window (the logged line does; /metrics/summary does not).
func (mc *mooncakeMasterMetrics) summary(s masterStats, u usageTotals, now time.Time, reset bool) string {
	ops := &mc.m.met.ops
	var req, fail [numMasterOps]uint64
	var batch [numMasterOps]batchSnapshot
	for op := range numMasterOps {
		req[op], fail[op] = ops[op].Requests.Load(), ops[op].Failures.Load()
		batch[op] = mc.batch[op].load()
	}
	mc.sum.Lock()
	prevReq, prevFail, prevBatch, at := mc.sum.req, mc.sum.fail, mc.sum.batch, mc.sum.at
	if reset {
		mc.sum.req, mc.sum.fail, mc.sum.batch, mc.sum.at = req, fail, batch, now
	}
	mc.sum.Unlock()
	secs := 0.0
	if !at.IsZero() {
		secs = now.Sub(at).Seconds()
	}
	rate := func(n uint64) string {
		if secs <= 0 {
			return "0.00"
		}
		return fmt.Sprintf("%.2f", float64(n)/secs)
	}
	delta := func(op masterOp) (total, failed uint64) {
		total = req[op] - min(prevReq[op], req[op])
		failed = min(fail[op]-min(prevFail[op], fail[op]), total)
		return total, failed
	}
	var b strings.Builder
	pct := 0.0
	if s.CapacityBytes > 0 {
		pct = 100 * float64(s.AllocatedBytes) / float64(s.CapacityBytes)
	}
	fmt.Fprintf(&b, "Mem Storage: %s / %s (%.1f%%) | SSD Storage: %s / %s | Keys: %d (soft-pinned: %d) | Clients: %d | Requests (Success/Total per sec): ",
		base.Bytes(s.AllocatedBytes), base.Bytes(s.CapacityBytes), pct, base.Bytes(u.nvmeUsed), base.Bytes(u.nvmeCap),
		s.Keys, s.SoftPinnedKeys, s.Workers)
	for i, it := range []struct {
		name string
		op   masterOp
	}{{"PutStart", opPutStart}, {"PutEnd", opPutEnd}, {"PutRevoke", opPutRevoke}, {"Get", opLookup},
		{"Exist", opExists}, {"Del", opRemove}, {"DelRegex", opRemoveByRegex}, {"DelAll", opRemoveAll},
		{"Mount", opRegisterWorker}, {"Ping", opHeartbeat}} {
		if i > 0 {
			b.WriteString(", ")
		}
		total, failed := delta(it.op)
		fmt.Fprintf(&b, "%s=%s/%s", it.name, rate(total-failed), rate(total))
	}
	b.WriteString(" | Batch Requests (per sec, Req=Success/PartialSuccess/Total, Item=Success/Total): ")
	for i, it := range batchOps {
		if i > 0 {
			b.WriteString(", ")
		}
		cur, prev := batch[it.op], prevBatch[it.op]
		d := func(a, b uint64) uint64 { return a - min(a, b) }
		total, partial, failed := d(cur.requests, prev.requests), d(cur.partial, prev.partial), d(cur.failures, prev.failures)
		items, failedItems := d(cur.items, prev.items), d(cur.failedItems, prev.failedItems)
		ok := total - min(total, partial+failed)
		fmt.Fprintf(&b, "%s:(Req=%s/%s/%s, Item=%s/%s)", it.name, rate(ok), rate(partial), rate(total),
			rate(items-min(items, failedItems)), rate(items))
	}
	b.WriteString(mc.workers.summaryEviction(reset))            // the workers' evictions (worker_stats.go)
	b.WriteString(summaryTokens(s.Models, mc.m.modelAllocated)) // models registered: tokens, expected, actual (memory_master.go)
	return b.String()
}
