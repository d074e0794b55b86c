package master

import (
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/mooncake-go/mooncake/internal/base"
	"github.com/mooncake-go/mooncake/raftmeta"
	"github.com/mooncake-go/mooncake/transfer"
)

// The workers' counters and per-model tallies, carried by their heartbeats (the trailing
// stats field, docs/protocol.md) and kept by the leader as soft state: Mooncake's eviction
// section of the "Master Metrics:" line and its cluster-wide cache hit counters (issue 12),
// and each model's allocated bytes in DRAM and on NVMe (issue 13).

// clusterWorkerStats is the leader's view of the workers' stats sections.
type clusterWorkerStats struct {
	mu sync.Mutex // protects the fields below; a leaf (taken under no other lock, takes none)
	// last: each worker's latest stats section and when it came.
	last map[base.WorkerID]workerStatsEntry
	// total: the counters summed over workers as deltas of each worker's own, so the sums
	// only grow: a worker that restarts (its counters fall) adds its new counts. (Models is
	// unused.) They restart from 0 on each new leader, as Prometheus counters may.
	total transfer.WorkerStats
	// noSpaceAtSummary: total.NoSpace at the last logged summary line (AllocFail's window).
	noSpaceAtSummary int64
}

type workerStatsEntry struct {
	s  transfer.WorkerStats
	at time.Time
}

// note records a worker's stats section (after its heartbeat was accepted).
func (c *clusterWorkerStats) note(id base.WorkerID, s transfer.WorkerStats, now time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.last == nil {
		c.last = map[base.WorkerID]workerStatsEntry{}
	}
	prev := c.last[id].s
	cur, old, tot := s.Counters(), prev.Counters(), c.total.Counters()
	for i := range cur {
		d := *cur[i] - *old[i]
		if d < 0 {
			d = *cur[i] // the worker restarted: its counters began again at 0
		}
		*tot[i] += d
	}
	c.last[id] = workerStatsEntry{s: s, at: now}
}

// totals returns the summed counters.
func (c *clusterWorkerStats) totals() transfer.WorkerStats {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.total
}

// models sums the per-model tallies of the workers in active (heard from since since), by
// model name.
func (c *clusterWorkerStats) models(active map[base.WorkerID]bool, since time.Time) map[string]transfer.ModelStats {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := map[string]transfer.ModelStats{}
	for id, e := range c.last {
		if !active[id] || e.at.Before(since) {
			continue
		}
		for _, ms := range e.s.Models {
			t := out[ms.Model]
			t.Model = ms.Model
			t.DRAMObjects += ms.DRAMObjects
			t.DRAMBytes += ms.DRAMBytes
			t.NVMeObjects += ms.NVMeObjects
			t.NVMeBytes += ms.NVMeBytes
			out[ms.Model] = t
		}
	}
	return out
}

// noteWorkerStats keeps a heartbeat's stats section (the heartbeat was accepted).
func (m *Master) noteWorkerStats(r *transfer.HeartbeatRequest) {
	if r.HasStats {
		m.met.mc.workers.note(r.WorkerID, r.Stats, m.now())
	}
}

// modelAllocated sums the active workers' per-model tallies from their heartbeats during
// this leadership (empty on a follower).
func (m *Master) modelAllocated() map[string]transfer.ModelStats {
	active := map[base.WorkerID]bool{}
	for _, s := range m.node.Segments() {
		active[s.ID] = s.State == raftmeta.SegmentActive
	}
	m.mu.Lock()
	leader, since := m.mu.lc.Leader()
	m.mu.Unlock()
	if !leader {
		return nil
	}
	return m.met.mc.workers.models(active, since)
}

// summaryEviction is the eviction part of the "Master Metrics:" line, in Mooncake's shape:
//
//	| Eviction: Success/Attempts=7/8, AllocFail=1, keys=14, size=1.2 MiB | Mem Eviction: Success/Attempts=7/8, keys=14, size=1.2 MiB
//
// Success counts the workers' eviction passes that evicted something, Attempts adds the puts
// a worker refused because nothing could be evicted; keys and size are the objects evicted
// (all from DRAM: "Mem Eviction" repeats them, as all of Mooncake's evictions would be
// memory ones without NVMe-oF). Cumulative, as Mooncake's; AllocFail is the refusals in the
// window (since the last logged line, which reset starts anew).
func (c *clusterWorkerStats) summaryEviction(reset bool) string {
	c.mu.Lock()
	t, prev := c.total, c.noSpaceAtSummary
	if reset {
		c.noSpaceAtSummary = t.NoSpace
	}
	c.mu.Unlock()
	attempts := t.EvictPasses + t.NoSpace
	return fmt.Sprintf(" | Eviction: Success/Attempts=%d/%d, AllocFail=%d, keys=%d, size=%s | Mem Eviction: Success/Attempts=%d/%d, keys=%d, size=%s",
		t.EvictPasses, attempts, max(0, t.NoSpace-prev), t.Evictions, base.Bytes(t.EvictedBytes),
		t.EvictPasses, attempts, t.Evictions, base.Bytes(t.EvictedBytes))
}

// Cluster-wide counters summed from the workers' heartbeats, under Mooncake's names, and each
// model's allocated bytes per tier (leader only; docs/metrics.md).
var (
	descMemCacheHits     = prometheus.NewDesc("mem_cache_hit_nums_", "Gets served from DRAM, summed over the workers (leader only), Mooncake's name.", nil, nil)
	descFileCacheHits    = prometheus.NewDesc("file_cache_hit_nums_", "Gets served from the NVMe tier, summed over the workers (leader only), Mooncake's name.", nil, nil)
	descEvictSuccess     = prometheus.NewDesc("master_successful_evictions_total", "Eviction passes on the workers that evicted something (leader only), Mooncake's name.", nil, nil)
	descEvictAttempts    = prometheus.NewDesc("master_attempted_evictions_total", "Eviction passes plus puts refused because nothing could be evicted (leader only), Mooncake's name.", nil, nil)
	descEvictedKeys      = prometheus.NewDesc("master_evicted_key_count", "Objects evicted from the workers' DRAM (leader only), Mooncake's name.", nil, nil)
	descEvictedSize      = prometheus.NewDesc("master_evicted_size_bytes", "Bytes of the objects evicted from the workers' DRAM (leader only), Mooncake's name.", nil, nil)
	descClusterSpills    = prometheus.NewDesc("master_worker_spills_total", "Objects the workers moved from DRAM to NVMe (leader only).", nil, nil)
	descModelDRAMAlloc   = prometheus.NewDesc("master_model_dram_allocated_bytes", "Arena bytes the workers allocated to a model's DRAM copies (leader only).", []string{"model"}, nil)
	descModelNVMeAlloc   = prometheus.NewDesc("master_model_nvme_allocated_bytes", "Bytes a model's records take on the workers' NVMe tiers, headers and padding included (leader only).", []string{"model"}, nil)
	clusterWorkerDescs   = []*prometheus.Desc{descMemCacheHits, descFileCacheHits, descEvictSuccess, descEvictAttempts, descEvictedKeys, descEvictedSize, descClusterSpills, descModelDRAMAlloc, descModelNVMeAlloc}
	unnamedModelMetricID = "" // objects naming no model are left out of the per-model series, as in master_model_*
)

type clusterWorkerCollector struct{ m *Master }

func (c clusterWorkerCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range clusterWorkerDescs {
		ch <- d
	}
}

func (c clusterWorkerCollector) Collect(ch chan<- prometheus.Metric) {
	t := c.m.met.mc.workers.totals()
	cnt := func(d *prometheus.Desc, v int64) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(v))
	}
	cnt(descMemCacheHits, t.HitsDRAM)
	cnt(descFileCacheHits, t.HitsNVMe)
	cnt(descEvictSuccess, t.EvictPasses)
	cnt(descEvictAttempts, t.EvictPasses+t.NoSpace)
	cnt(descEvictedKeys, t.Evictions)
	cnt(descEvictedSize, t.EvictedBytes)
	cnt(descClusterSpills, t.Spills)
	ms := c.m.modelAllocated()
	names := make([]string, 0, len(ms))
	for n := range ms {
		if n != unnamedModelMetricID {
			names = append(names, n)
		}
	}
	slices.SortFunc(names, strings.Compare)
	for _, n := range names {
		ch <- prometheus.MustNewConstMetric(descModelDRAMAlloc, prometheus.GaugeValue, float64(ms[n].DRAMBytes), n)
		ch <- prometheus.MustNewConstMetric(descModelNVMeAlloc, prometheus.GaugeValue, float64(ms[n].NVMeBytes), n)
	}
}
