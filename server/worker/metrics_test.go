package worker

import (
	"errors"
	"strings"
	"testing"

	"github.com/mooncake-go/mooncake/tier"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

func TestWorkerMetrics(t *testing.T) {
	m := newWorkerMetrics(func() workerStats {
		return workerStats{ArenaUsed: 5, ArenaCapacity: 10, ArenaPopulated: 8, HugePageMode: "thp", DRAMObjects: 2, NVMeObjects: 3,
			Evictions: map[string]int64{"watermark": 4}, ShmLeases: 6,
			Superseded: tier.Usage{Objects: 2, Bytes: 300}, SupersededRestored: 1}
	})
	m.observe(wopRead, errors.New("x"))
	m.observe(wopShmPin, errors.New("x"))
	m.observe(wopShmRelease, nil)
	const want = `
# HELP worker_arena_populated_bytes Bytes of the DRAM arena whose pages are faulted in ahead of the allocator (--populate_arena in the background, --prefault_arena at start): puts into them take no page faults.
# TYPE worker_arena_populated_bytes gauge
worker_arena_populated_bytes 8
# HELP worker_arena_hugepage_mode 1 for the page mode the arena got (plain, thp or hugetlb).
# TYPE worker_arena_hugepage_mode gauge
worker_arena_hugepage_mode{mode="hugetlb"} 0
worker_arena_hugepage_mode{mode="plain"} 0
worker_arena_hugepage_mode{mode="thp"} 1
# HELP worker_tier_objects Committed objects per tier.
# TYPE worker_tier_objects gauge
worker_tier_objects{tier="dram"} 2
worker_tier_objects{tier="nvme"} 3
# HELP worker_evictions_total Objects evicted from DRAM, by reason.
# TYPE worker_evictions_total counter
worker_evictions_total{reason="watermark"} 4
# HELP worker_failures_total Worker calls that failed, by call.
# TYPE worker_failures_total counter
worker_failures_total{op="commit"} 0
worker_failures_total{op="drop"} 0
worker_failures_total{op="read"} 1
worker_failures_total{op="replicate"} 0
worker_failures_total{op="shm_pin"} 1
worker_failures_total{op="shm_release"} 0
worker_failures_total{op="shm_touch"} 0
worker_failures_total{op="write"} 0
# HELP worker_shm_leases Objects pinned by clients on this host copying them out of the shared arena (ShmPin leases not yet released).
# TYPE worker_shm_leases gauge
worker_shm_leases 6
# HELP worker_superseded_bytes Bytes of the versions in worker_superseded_objects.
# TYPE worker_superseded_bytes gauge
worker_superseded_bytes 300
# HELP worker_superseded_restored_total Replaced versions made current again because the version replacing them never committed on the master.
# TYPE worker_superseded_restored_total counter
worker_superseded_restored_total 1
`
	if err := testutil.GatherAndCompare(m.reg, strings.NewReader(want), "worker_arena_populated_bytes", "worker_arena_hugepage_mode",
		"worker_tier_objects", "worker_evictions_total", "worker_failures_total", "worker_shm_leases",
		"worker_superseded_bytes", "worker_superseded_restored_total"); err != nil {
		t.Fatal(err)
	}
}
