package worker

import (
	"encoding/json"
	"fmt"
	"net/http"
	"runtime"

	"github.com/mooncake-go/mooncake/internal/base"
	"github.com/mooncake-go/mooncake/server/internal/admin"
	"github.com/mooncake-go/mooncake/server/memory"
	"github.com/mooncake-go/mooncake/tier"
	"github.com/mooncake-go/mooncake/transfer"
	"github.com/prometheus/client_golang/prometheus"
)

// memory builds the worker's memory breakdown (memory.WorkerMemory; docs/memory.md). It reads
// /proc/self/smaps for the arena's resident bytes and stops the world briefly for the Go
// heap: it is for reports and scrapes, not hot paths.
func (w *Worker) memory() memory.WorkerMemory {
	m := w.eng.Metrics()
	as := w.arena.Stats()
	held := max(0, m.ReservedBytes-m.PendingWrites.Bytes)
	wm := memory.WorkerMemory{
		ID: string(w.id), Address: w.Addr(), ArenaMode: w.arena.Mode().String(),
		ArenaCapacity: as.Capacity, ArenaAllocated: as.Used, ArenaPopulated: as.Populated,
		CommittedObjects: m.DRAM.Objects, CommittedLogical: m.DRAM.Bytes,
		AlignmentWaste: as.Used - as.Requested,
		PendingObjects: m.PendingWrites.Objects, PendingBytes: m.PendingWrites.Bytes,
		HeldBytes: held, ShmLeases: int64(w.shm.count()),
		FreeBytes: as.Free, LargestFree: as.LargestFree, Fragmentation: as.Fragmentation,
		NVMeObjects: m.NVMe.Objects, NVMeLogical: m.NVMe.Bytes,
		HitsDRAM: m.HitsDRAM, HitsNVMe: m.HitsNVMe, Misses: m.Misses, Commits: m.Commits, Removes: m.Removes,
		Evictions: m.EvictionsWatermark + m.EvictionsPressure, Spills: m.Spills, Promotions: m.Promotions,
		Models: workerModels(w.eng.ModelUsage()),
	}
	// The engine's watermarks: the master's eviction flags, else the tier's defaults.
	wm.HighWatermark, wm.LowWatermark = w.eng.Watermarks()
	if wm.Evictions > 0 {
		// Eviction frees objects until the arena is at or under the low watermark, so a
		// saturated arena sits within one object of it: with objects large against the
		// arena, a plain "used >= low" would miss it.
		perObject := m.EvictedBytes / wm.Evictions
		wm.Saturated = float64(as.Used+perObject) >= wm.LowWatermark*float64(as.Capacity)
	}
	if w.store != nil {
		nm := w.store.Metrics()
		wm.NVMeCapacity, wm.NVMeUsed = nm.Capacity, nm.BytesUsed
		wm.NVMeHeaders = nm.LiveBytes - m.NVMe.Bytes
		wm.NVMeReclaimable = nm.BytesUsed - nm.LiveBytes
	}
	if r, err := w.arena.Residency(); err == nil {
		wm.ArenaTouched = r.Resident
	}
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	wm.GoHeap = int64(ms.HeapInuse)
	wm.RSS = admin.ProcessRSS()
	wm.Rest = wm.RSS - wm.ArenaTouched - wm.GoHeap
	return wm
}

func (w *Worker) memoryResponse() (*transfer.JSONResponse, error) {
	b, err := json.Marshal(w.memory())
	if err != nil {
		return nil, fmt.Errorf("%w: worker memory: %v", base.ErrInternal, err)
	}
	return &transfer.JSONResponse{Call: transfer.OpWorkerMemory, JSON: b}, nil
}

type workerMemoryCollector struct{ w *Worker }

func (c workerMemoryCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descWorkerRSS, descWorkerGoHeap, descWorkerTouched, descWorkerWaste, descWorkerHeld, descWorkerPendingB,
		descWorkerNVMeReclm, descWorkerHits, descWorkerMisses} {
		ch <- d
	}
}

func (c workerMemoryCollector) Collect(ch chan<- prometheus.Metric) {
	wm := c.w.memory()
	g := func(d *prometheus.Desc, v int64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, float64(v), labels...)
	}
	cnt := func(d *prometheus.Desc, v int64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(v), labels...)
	}
	g(descWorkerRSS, wm.RSS)
	g(descWorkerGoHeap, wm.GoHeap)
	g(descWorkerTouched, wm.ArenaTouched)
	g(descWorkerWaste, wm.AlignmentWaste)
	g(descWorkerHeld, wm.HeldBytes)
	g(descWorkerPendingB, wm.PendingBytes)
	g(descWorkerNVMeReclm, wm.NVMeReclaimable)
	cnt(descWorkerHits, wm.HitsDRAM, "dram")
	cnt(descWorkerHits, wm.HitsNVMe, "nvme")
	cnt(descWorkerMisses, wm.Misses)
}

// memoryRoutes serves the worker's own breakdown: GET /api/v1/memory.
func (w *Worker) memoryRoutes(mux *http.ServeMux) {
	mux.HandleFunc("GET /api/v1/memory", func(rw http.ResponseWriter, _ *http.Request) { admin.WriteJSON(rw, http.StatusOK, w.memory()) })
}

// Collectors returns the worker's own series (its gauges, call counters and memory) for a
// master's registry, in a process that runs both (the composer's ExportWorkerMetrics): the
// worker then needs no metrics port of its own.
func (w *Worker) Collectors() []prometheus.Collector {
	return []prometheus.Collector{&workerStatsCollector{stats: w.stats, ops: &w.met.ops}, workerMemoryCollector{w}}
}

var (
	descWorkerRSS       = prometheus.NewDesc("worker_process_rss_bytes", "Resident set of the worker's process.", nil, nil)
	descWorkerGoHeap    = prometheus.NewDesc("worker_go_heap_bytes", "In-use Go heap of the worker's process.", nil, nil)
	descWorkerTouched   = prometheus.NewDesc("worker_arena_touched_bytes", "Resident bytes of the DRAM arena.", nil, nil)
	descWorkerWaste     = prometheus.NewDesc("worker_arena_alignment_waste_bytes", "Arena bytes lost to rounding allocations up.", nil, nil)
	descWorkerHeld      = prometheus.NewDesc("worker_held_bytes", "Arena bytes of removed or evicted objects still held by readers or leases.", nil, nil)
	descWorkerPendingB  = prometheus.NewDesc("worker_pending_bytes", "Arena bytes of puts in flight.", nil, nil)
	descWorkerNVMeReclm = prometheus.NewDesc("worker_nvme_reclaimable_bytes", "Dead NVMe bytes awaiting GC.", nil, nil)
	descWorkerHits      = prometheus.NewDesc("worker_hits_total", "Gets served, by tier.", []string{"tier"}, nil)
	descWorkerMisses    = prometheus.NewDesc("worker_misses_total", "Gets of objects this worker does not hold.", nil, nil)
)

func workerModels(us []tier.ModelUsage) []memory.WorkerModelMemory {
	out := make([]memory.WorkerModelMemory, 0, len(us))
	for _, u := range us {
		out = append(out, memory.WorkerModelMemory{Model: u.Model, DRAMObjects: u.DRAMObjects, DRAMAllocated: u.DRAMBytes, DRAMLogical: u.DRAMLogical,
			NVMeObjects: u.NVMeObjects, NVMeAllocated: u.NVMeBytes, NVMeLogical: u.NVMeLogical})
	}
	return out
}

// heartbeatStats is the stats section of the worker's heartbeat.
func (w *Worker) heartbeatStats(m tier.Metrics) transfer.WorkerStats {
	s := transfer.WorkerStats{
		HitsDRAM: m.HitsDRAM, HitsNVMe: m.HitsNVMe, Misses: m.Misses,
		Evictions: m.EvictionsWatermark + m.EvictionsPressure, EvictedBytes: m.EvictedBytes, EvictPasses: m.EvictPasses,
		NoSpace: m.NoSpaceAllPinned + m.NoSpaceAllInUse + m.NoSpaceTooLarge + m.NoSpaceFragmented,
		Spills:  m.Spills, SpillBytes: m.SpillBytes, Promotions: m.Promotions,
	}
	for _, u := range w.eng.ModelUsage() {
		if len(s.Models) == transfer.MaxHeartbeatModels {
			break // the engine interns at most as many; a bound, not a case
		}
		s.Models = append(s.Models, transfer.ModelStats{Model: u.Model, DRAMObjects: u.DRAMObjects, DRAMBytes: u.DRAMBytes,
			NVMeObjects: u.NVMeObjects, NVMeBytes: u.NVMeBytes})
	}
	return s
}
