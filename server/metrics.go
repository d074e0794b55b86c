package server

import (
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/mooncake-go/mooncake/internal/base"
	"github.com/mooncake-go/mooncake/raftmeta"
	"github.com/mooncake-go/mooncake/tier"
)

// masterOp names one master call for its request/failure counters. The metric names are
// Mooncake's: master_<name>_requests_total and master_<name>_failures_total.
type masterOp int

const (
	opPutStart masterOp = iota
	opPutEnd
	opPutRevoke
	opLookup
	opExists
	opRemove
	opRemoveByRegex
	opRemoveAll
	opBatchPutStart
	opBatchPutEnd
	opBatchLookup
	opBatchExists
	opBatchRemove
	opList
	opRegisterWorker
	opHeartbeat
	opStatus
	numMasterOps
)

// masterOpNames[op] = {Prometheus name, summary-line name}. Prometheus names follow Mooncake's
// master_metric_manager (get_replica_list for Lookup, exist_key for Exists, mount_segment for
// worker registration, ping for heartbeats).
var masterOpNames = [numMasterOps][2]string{
	opPutStart:       {"put_start", "PutStart"},
	opPutEnd:         {"put_end", "PutEnd"},
	opPutRevoke:      {"put_revoke", "PutRevoke"},
	opLookup:         {"get_replica_list", "Lookup"},
	opExists:         {"exist_key", "Exists"},
	opRemove:         {"remove", "Remove"},
	opRemoveByRegex:  {"remove_by_regex", "RemoveByRegex"},
	opRemoveAll:      {"remove_all", "RemoveAll"},
	opBatchPutStart:  {"batch_put_start", "BatchPutStart"},
	opBatchPutEnd:    {"batch_put_end", "BatchPutEnd"},
	opBatchLookup:    {"batch_get_replica_list", "BatchLookup"},
	opBatchExists:    {"batch_exist_key", "BatchExists"},
	opBatchRemove:    {"batch_remove", "BatchRemove"},
	opList:           {"list", "List"},
	opRegisterWorker: {"mount_segment", "Register"},
	opHeartbeat:      {"ping", "Heartbeat"},
	opStatus:         {"status", "Status"},
}

// opCounter is one call's totals. Typed atomics, read by both Prometheus (CounterFunc) and
// the summary line, so there is one source of truth.
type opCounter struct {
	requests atomic.Uint64
	failures atomic.Uint64
}

// observe counts one call that ended with err.
func (c *opCounter) observe(err error) {
	c.requests.Add(1)
	if err != nil {
		c.failures.Add(1)
	}
}

// newRegistry returns a fresh registry (never the global one) holding the Go runtime and
// process collectors every server exports.
func newRegistry() *prometheus.Registry {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return reg
}

// masterStats is what the master's gauges read at scrape time. The master fills it from
// raftmeta (keys, bytes) and its soft state (workers, usage) under its own locks.
type masterStats struct {
	Keys           int64
	SoftPinnedKeys int64
	AllocatedBytes int64 // sum of object sizes times replicas, as placed
	CapacityBytes  int64 // sum of alive workers' DRAM segments
	Workers        int   // alive workers
	MetadataBytes  int64 // estimate of the FSM's bytes (0 if unknown)
	Segments       []segmentStat
	Models         []raftmeta.ModelUsage // the model registry and token counts (memory.go)
}

type segmentStat struct {
	ID        base.WorkerID
	Allocated int64
	Capacity  int64
}

// masterMetrics owns the master's Prometheus registry (never the global one).
type masterMetrics struct {
	reg *prometheus.Registry
	ops [numMasterOps]opCounter
	// mc holds the Mooncake-named metrics and the summary line's window (metrics_compat.go).
	mc *mooncakeMasterMetrics
}

// newMasterMetrics registers every master metric on a fresh registry. stats is called at
// scrape time, on the HTTP goroutine; it must be cheap and goroutine-safe.
func newMasterMetrics(stats func() masterStats) *masterMetrics {
	m := &masterMetrics{reg: newRegistry()}
	for op := range numMasterOps {
		name := masterOpNames[op][0]
		c := &m.ops[op]
		m.reg.MustRegister(
			prometheus.NewCounterFunc(prometheus.CounterOpts{
				Name: "master_" + name + "_requests_total",
				Help: "Number of " + masterOpNames[op][1] + " requests the master received.",
			}, func() float64 { return float64(c.requests.Load()) }),
			prometheus.NewCounterFunc(prometheus.CounterOpts{
				Name: "master_" + name + "_failures_total",
				Help: "Number of " + masterOpNames[op][1] + " requests that failed.",
			}, func() float64 { return float64(c.failures.Load()) }),
		)
	}
	m.reg.MustRegister(&masterStatsCollector{stats: stats})
	return m
}

// observe counts one call of op that ended with err.
func (m *masterMetrics) observe(op masterOp, err error) { m.ops[op].observe(err) }

var (
	descKeyCount     = prometheus.NewDesc("master_key_count", "Number of objects the metadata holds.", nil, nil)
	descSoftPinned   = prometheus.NewDesc("master_soft_pin_key_count", "Number of objects with a live soft pin.", nil, nil)
	descAllocated    = prometheus.NewDesc("master_allocated_bytes", "Bytes of object replicas placed on workers.", nil, nil)
	descCapacity     = prometheus.NewDesc("master_total_capacity_bytes", "Sum of the DRAM segments of alive workers.", nil, nil)
	descWorkers      = prometheus.NewDesc("master_worker_count", "Number of alive workers (segments).", nil, nil)
	descMetaBytes    = prometheus.NewDesc("master_metadata_bytes", "Estimated bytes of replicated metadata (keys and records) held by this master.", nil, nil)
	descMetaPerKey   = prometheus.NewDesc("master_metadata_bytes_per_key", "master_metadata_bytes / master_key_count (0 when there are no keys).", nil, nil)
	descSegAllocated = prometheus.NewDesc("segment_allocated_bytes", "Bytes of replicas placed on one worker segment.", []string{"segment"}, nil)
	descSegCapacity  = prometheus.NewDesc("segment_total_capacity_bytes", "DRAM capacity of one worker segment.", []string{"segment"}, nil)
	masterStatsDescs = []*prometheus.Desc{descKeyCount, descSoftPinned, descAllocated, descCapacity, descWorkers, descMetaBytes, descMetaPerKey, descSegAllocated, descSegCapacity}
)

// masterStatsCollector turns one masterStats snapshot into gauges at scrape time, so the
// per-segment series follow workers as they come and go.
type masterStatsCollector struct{ stats func() masterStats }

func (c *masterStatsCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range masterStatsDescs {
		ch <- d
	}
}

func (c *masterStatsCollector) Collect(ch chan<- prometheus.Metric) {
	s := c.stats()
	g := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
	}
	g(descKeyCount, float64(s.Keys))
	g(descSoftPinned, float64(s.SoftPinnedKeys))
	g(descAllocated, float64(s.AllocatedBytes))
	g(descCapacity, float64(s.CapacityBytes))
	g(descWorkers, float64(s.Workers))
	g(descMetaBytes, float64(s.MetadataBytes))
	perKey := 0.0
	if s.Keys > 0 {
		perKey = float64(s.MetadataBytes) / float64(s.Keys)
	}
	g(descMetaPerKey, perKey)
	for _, seg := range s.Segments {
		g(descSegAllocated, float64(seg.Allocated), string(seg.ID))
		g(descSegCapacity, float64(seg.Capacity), string(seg.ID))
	}
}

// workerStats is what the worker's gauges read at scrape time: a snapshot the worker builds
// from its arena, tier engine and nvme store.
type workerStats struct {
	ArenaUsed, ArenaCapacity int64
	ArenaPopulated           int64   // bytes faulted in ahead of the allocator (dram.Arena.Populated)
	Fragmentation            float64 // 1 - largest free block / free bytes
	HugePageMode             string  // "plain", "thp" or "hugetlb"
	DRAMBytes, DRAMObjects   int64
	NVMeBytes, NVMeObjects   int64
	NVMeCapacity             int64
	Evictions                map[string]int64 // by reason
	Spills, Promotions       int64
	SpillBytes               int64 // bytes of Spills
	NVMeCorruptions          int64
	PendingWrites            int64
	ShmLeases                int64
	ShmPutStages             int64
	// Superseded: replaced versions kept until the master's drop (tier/supersede.go);
	// Restored: those made current again because the version replacing them never committed.
	Superseded         tier.Usage
	SupersededRestored int64
	// SupersededWaits: puts that found DRAM full and waited for superseded versions' drops.
	// DropFetches: heartbeats sent early to fetch the drops owed; DropsFetchedEarly: the
	// drops they brought (worker_drop.go).
	SupersededWaits, DropFetches, DropsFetchedEarly int64
}

var (
	descArenaUsed                           = prometheus.NewDesc("worker_arena_used_bytes", "Bytes of the DRAM arena handed out.", nil, nil)
	descArenaCap                            = prometheus.NewDesc("worker_arena_capacity_bytes", "Size of the DRAM arena (global_segment_size).", nil, nil)
	descArenaPopulated                      = prometheus.NewDesc("worker_arena_populated_bytes", "Bytes of the DRAM arena whose pages are faulted in ahead of the allocator (--populate_arena in the background, --prefault_arena at start): puts into them take no page faults.", nil, nil)
	descArenaFrag                           = prometheus.NewDesc("worker_arena_fragmentation_ratio", "1 - largest free block / free bytes of the DRAM arena.", nil, nil)
	descHugePages                           = prometheus.NewDesc("worker_arena_hugepage_mode", "1 for the page mode the arena got (plain, thp or hugetlb).", []string{"mode"}, nil)
	descTierBytes                           = prometheus.NewDesc("worker_tier_bytes", "Bytes of committed objects per tier.", []string{"tier"}, nil)
	descTierObjects                         = prometheus.NewDesc("worker_tier_objects", "Committed objects per tier.", []string{"tier"}, nil)
	descNVMeCap                             = prometheus.NewDesc("worker_nvme_capacity_bytes", "Capacity of the NVMe tier (0 when the worker has none).", nil, nil)
	descEvictions                           = prometheus.NewDesc("worker_evictions_total", "Objects evicted from DRAM, by reason.", []string{"reason"}, nil)
	descSpills                              = prometheus.NewDesc("worker_spills_total", "Objects moved from DRAM to NVMe.", nil, nil)
	descPromotions                          = prometheus.NewDesc("worker_promotions_total", "Objects promoted from NVMe to DRAM.", nil, nil)
	descCorruptions                         = prometheus.NewDesc("worker_nvme_corruptions_total", "NVMe records whose checksum did not match (quarantined, never served).", nil, nil)
	descPending                             = prometheus.NewDesc("worker_pending_writes", "Writes received but not committed yet.", nil, nil)
	descSuperseded                          = prometheus.NewDesc("worker_superseded_objects", "Versions replaced by an upsert, kept (in DRAM, counted in worker_held_bytes) until the master drops them.", nil, nil)
	descSupBytes                            = prometheus.NewDesc("worker_superseded_bytes", "Bytes of the versions in worker_superseded_objects.", nil, nil)
	descSupRestored                         = prometheus.NewDesc("worker_superseded_restored_total", "Replaced versions made current again because the version replacing them never committed on the master.", nil, nil)
	descSupWaits                            = prometheus.NewDesc("worker_superseded_waits_total", "Puts that found DRAM full and waited for the master's drops of superseded versions before allocating (or failing with no space).", nil, nil)
	descDropFetches                         = prometheus.NewDesc("worker_drop_fetches_total", "Heartbeats sent early to fetch the drops the master owes, because superseded versions held many bytes or a put waited for them.", nil, nil)
	descDropsEarly                          = prometheus.NewDesc("worker_drops_fetched_early_total", "Drops received through worker_drop_fetches_total rather than a periodic heartbeat.", nil, nil)
	descShmLeases                           = prometheus.NewDesc("worker_shm_leases", "Objects pinned by clients on this host copying them out of the shared arena (ShmPin leases not yet released).", nil, nil)
	descShmPutStages                        = prometheus.NewDesc("worker_shm_put_stages", "Staging areas open for same-host puts (one per client on this host that put here; each up to 32 MiB of shared memory).", nil, nil)
	workerStatsDescs                        = []*prometheus.Desc{descArenaUsed, descArenaCap, descArenaPopulated, descArenaFrag, descHugePages, descTierBytes, descTierObjects, descNVMeCap, descEvictions, descSpills, descPromotions, descCorruptions, descPending, descShmLeases, descShmPutStages, descSuperseded, descSupBytes, descSupRestored, descSupWaits, descDropFetches, descDropsEarly}
	descWorkerReqs                          = prometheus.NewDesc("worker_requests_total", "Worker calls received, by call.", []string{"op"}, nil)
	descWorkerFails                         = prometheus.NewDesc("worker_failures_total", "Worker calls that failed, by call.", []string{"op"}, nil)
	_                  prometheus.Collector = (*workerStatsCollector)(nil)
)

type workerOp int

const (
	wopWrite workerOp = iota
	wopCommit
	wopRead
	wopDrop
	wopShmPin
	wopShmRelease
	wopReplicate
	wopShmTouch
	numWorkerOps
)

// workerOpNames[op] is op's label on worker_requests_total and worker_failures_total.
var workerOpNames = [numWorkerOps]string{
	wopWrite: "write", wopCommit: "commit", wopRead: "read", wopDrop: "drop",
	wopShmPin: "shm_pin", wopShmRelease: "shm_release", wopReplicate: "replicate", wopShmTouch: "shm_touch",
}

// workerMetrics owns the worker's Prometheus registry.
type workerMetrics struct {
	reg *prometheus.Registry
	ops [numWorkerOps]opCounter
	// mc holds the Mooncake-named hit counters and the latency histograms (metrics_compat.go).
	mc *mooncakeWorkerMetrics
}

func newWorkerMetrics(stats func() workerStats) *workerMetrics {
	m := &workerMetrics{reg: newRegistry()}
	m.reg.MustRegister(&workerStatsCollector{stats: stats, ops: &m.ops})
	m.mc = newMooncakeWorkerMetrics(m.reg, func() (int64, int64) { s := stats(); return s.Spills, s.SpillBytes })
	return m
}

// observe counts one call of op that ended with err.
func (m *workerMetrics) observe(op workerOp, err error) { m.ops[op].observe(err) }

type workerStatsCollector struct {
	stats func() workerStats
	ops   *[numWorkerOps]opCounter
}

func (c *workerStatsCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range workerStatsDescs {
		ch <- d
	}
	ch <- descWorkerReqs
	ch <- descWorkerFails
}

func (c *workerStatsCollector) Collect(ch chan<- prometheus.Metric) {
	s := c.stats()
	g := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
	}
	cnt := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, v, labels...)
	}
	g(descArenaUsed, float64(s.ArenaUsed))
	g(descArenaCap, float64(s.ArenaCapacity))
	g(descArenaPopulated, float64(s.ArenaPopulated))
	g(descArenaFrag, s.Fragmentation)
	for _, mode := range []string{"plain", "thp", "hugetlb"} {
		v := 0.0
		if mode == s.HugePageMode {
			v = 1
		}
		g(descHugePages, v, mode)
	}
	g(descTierBytes, float64(s.DRAMBytes), "dram")
	g(descTierBytes, float64(s.NVMeBytes), "nvme")
	g(descTierObjects, float64(s.DRAMObjects), "dram")
	g(descTierObjects, float64(s.NVMeObjects), "nvme")
	g(descNVMeCap, float64(s.NVMeCapacity))
	for reason, n := range s.Evictions {
		cnt(descEvictions, float64(n), reason)
	}
	cnt(descSpills, float64(s.Spills))
	cnt(descPromotions, float64(s.Promotions))
	cnt(descCorruptions, float64(s.NVMeCorruptions))
	g(descPending, float64(s.PendingWrites))
	g(descShmLeases, float64(s.ShmLeases))
	g(descShmPutStages, float64(s.ShmPutStages))
	g(descSuperseded, float64(s.Superseded.Objects))
	g(descSupBytes, float64(s.Superseded.Bytes))
	cnt(descSupRestored, float64(s.SupersededRestored))
	cnt(descSupWaits, float64(s.SupersededWaits))
	cnt(descDropFetches, float64(s.DropFetches))
	cnt(descDropsEarly, float64(s.DropsFetchedEarly))
	for op := range numWorkerOps {
		cnt(descWorkerReqs, float64(c.ops[op].requests.Load()), workerOpNames[op])
		cnt(descWorkerFails, float64(c.ops[op].failures.Load()), workerOpNames[op])
	}
}
