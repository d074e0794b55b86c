package worker

import (
	"time"

	"github.com/mooncake-go/mooncake/internal/base"
	"github.com/mooncake-go/mooncake/server/internal/admin"
	"github.com/mooncake-go/mooncake/tier"
	"github.com/prometheus/client_golang/prometheus"
)

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
	// TenantNVMeBytes: each tenant's bytes on the NVMe tier. NVMeQuotaEvictions: NVMe objects
	// evicted to hold their tenant's NVMe share; NVMeQuotaDrops: objects evicted from DRAM
	// unspilled because their tenant's share had no room (tier/policy tenants.go).
	TenantNVMeBytes                    map[string]int64
	NVMeQuotaEvictions, NVMeQuotaDrops int64
}

var (
	descArenaUsed                           = prometheus.NewDesc("worker_arena_used_bytes", "Bytes of the DRAM arena handed out.", nil, nil)
	descArenaCap                            = prometheus.NewDesc("worker_arena_capacity_bytes", "Size of the DRAM arena (global_segment_size).", nil, nil)
	descArenaPopulated                      = prometheus.NewDesc("worker_arena_populated_bytes", "Bytes of the DRAM arena whose pages are faulted in ahead of the allocator (--populate_arena in the background, --prefault_arena at start): puts into them take no page faults.", nil, nil)
	descArenaFrag                           = prometheus.NewDesc("worker_arena_fragmentation_ratio", "1 - largest free block / free bytes of the DRAM arena.", nil, nil)
	descHugePages                           = prometheus.NewDesc("worker_arena_hugepage_mode", "1 for the page mode the arena got (plain, thp or hugetlb).", []string{"mode"}, nil)
	descTierBytes                           = prometheus.NewDesc("worker_tier_bytes", "Bytes of committed objects per tier.", []string{"tier"}, nil)
	descTierObjects                         = prometheus.NewDesc("worker_tier_objects", "Committed objects per tier.", []string{"tier"}, nil)
	descTenantNVMe                          = prometheus.NewDesc("mooncake_tenant_nvme_bytes", "Bytes of a tenant's objects on this worker's NVMe tier (held under its share of the tenant's NVMe quota).", []string{"tenant_id"}, nil)
	descNVMeQuotaEvict                      = prometheus.NewDesc("worker_nvme_quota_evictions_total", "Objects evicted from NVMe (least recently used of their tenant) to keep their tenant under its NVMe quota share.", nil, nil)
	descNVMeQuotaDrops                      = prometheus.NewDesc("worker_nvme_quota_drops_total", "Objects evicted from DRAM without a spill because their tenant's NVMe quota share had no room for them.", nil, nil)
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
	workerStatsDescs                        = []*prometheus.Desc{descArenaUsed, descArenaCap, descArenaPopulated, descArenaFrag, descHugePages, descTierBytes, descTierObjects, descNVMeCap, descTenantNVMe, descNVMeQuotaEvict, descNVMeQuotaDrops, descEvictions, descSpills, descPromotions, descCorruptions, descPending, descShmLeases, descShmPutStages, descSuperseded, descSupBytes, descSupRestored, descSupWaits, descDropFetches, descDropsEarly}
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
	ops [numWorkerOps]admin.OpCounter
	// mc holds the Mooncake-named hit counters and the latency histograms (mooncakeWorkerMetrics, below).
	mc *mooncakeWorkerMetrics
}

func newWorkerMetrics(stats func() workerStats) *workerMetrics {
	m := &workerMetrics{reg: admin.NewRegistry()}
	m.reg.MustRegister(&workerStatsCollector{stats: stats, ops: &m.ops})
	m.mc = newMooncakeWorkerMetrics(m.reg, func() (int64, int64) { s := stats(); return s.Spills, s.SpillBytes })
	return m
}

// observe counts one call of op that ended with err.
func (m *workerMetrics) observe(op workerOp, err error) { m.ops[op].Observe(err) }

type workerStatsCollector struct {
	stats func() workerStats
	ops   *[numWorkerOps]admin.OpCounter
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
	for t, n := range s.TenantNVMeBytes {
		g(descTenantNVMe, float64(n), t)
	}
	cnt(descNVMeQuotaEvict, float64(s.NVMeQuotaEvictions))
	cnt(descNVMeQuotaDrops, float64(s.NVMeQuotaDrops))
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
		cnt(descWorkerReqs, float64(c.ops[op].Requests.Load()), workerOpNames[op])
		cnt(descWorkerFails, float64(c.ops[op].Failures.Load()), workerOpNames[op])
	}
}

// mooncakeWorkerMetrics are a worker's latency histograms and Mooncake's cache hit counters.
// Mooncake counts hits on the master (which there knows which replica a client reads); here
// the worker serving the read knows whether DRAM or NVMe served it, so the counters live on
// the workers' /metrics under Mooncake's names (sum them across workers).
type mooncakeWorkerMetrics struct {
	// latency: worker_request_duration_seconds{op}: "read" from the request to the last byte
	// sent, "write" from an object's first chunk to its commit.
	latency                   *prometheus.HistogramVec
	readLatency, writeLatency prometheus.Observer // latency's two children, resolved once: off the per-read label lookup
	memHits, fileHits         prometheus.Counter
	memHitBytes, fileHitBytes prometheus.Counter
	// client: Mooncake's client metrics (metrics_mooncake_client.go).
	client *mooncakeClientMetrics
}

// newMooncakeWorkerMetrics registers the metrics on reg; spills reads the worker's spills
// (objects, bytes) at scrape time.
func newMooncakeWorkerMetrics(reg *prometheus.Registry, spills func() (n, bytes int64)) *mooncakeWorkerMetrics {
	mc := &mooncakeWorkerMetrics{
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "worker_request_duration_seconds",
			Help:    "Time a worker took to serve a get (read: request to last byte sent) or a put (write: first chunk to commit).",
			Buckets: admin.RequestLatencyBuckets,
		}, []string{"op"}),
		memHits:      prometheus.NewCounter(prometheus.CounterOpts{Name: "mem_cache_hit_nums_", Help: "Reads served from DRAM (Mooncake's name)."}),
		fileHits:     prometheus.NewCounter(prometheus.CounterOpts{Name: "file_cache_hit_nums_", Help: "Reads served from the NVMe tier (Mooncake's name)."}),
		memHitBytes:  prometheus.NewCounter(prometheus.CounterOpts{Name: "mem_cache_hit_bytes_total", Help: "Bytes of reads served from DRAM (Mooncake's name)."}),
		fileHitBytes: prometheus.NewCounter(prometheus.CounterOpts{Name: "file_cache_hit_bytes_total", Help: "Bytes of reads served from the NVMe tier (Mooncake's name)."}),
	}
	mc.readLatency, mc.writeLatency = mc.latency.WithLabelValues("read"), mc.latency.WithLabelValues("write")
	reg.MustRegister(mc.latency, mc.memHits, mc.fileHits, mc.memHitBytes, mc.fileHitBytes)
	mc.client = newMooncakeClientMetrics(reg, spills)
	return mc
}

// observeRead records one read served from tier t (n bytes, over d).
func (mc *mooncakeWorkerMetrics) observeRead(t base.Tier, n int64, d time.Duration) {
	mc.readLatency.Observe(d.Seconds())
	mc.client.observeRead(t, n, d)
	if t == base.TierDRAM {
		mc.memHits.Inc()
		mc.memHitBytes.Add(float64(n))
		return
	}
	mc.fileHits.Inc()
	mc.fileHitBytes.Add(float64(n))
}

// observeWrite records one committed write of n bytes that took d from its first chunk.
func (mc *mooncakeWorkerMetrics) observeWrite(n int64, d time.Duration) {
	mc.writeLatency.Observe(d.Seconds())
	mc.client.observeWrite(n, d)
}
