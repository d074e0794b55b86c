package server

import (
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	mctest "github.com/mooncake-go/mooncake/internal/testutil"
)

func TestFormatSummary(t *testing.T) {
	var ops [numMasterOps]opCounter
	for range 10 {
		ops[opPutStart].requests.Add(1)
	}
	ops[opPutStart].failures.Add(2)
	ops[opPutEnd].requests.Add(8)
	ops[opLookup].requests.Add(5)
	ops[opLookup].failures.Add(1)
	s := masterStats{Keys: 7, SoftPinnedKeys: 2, AllocatedBytes: 1288490189, CapacityBytes: 4 << 30, Workers: 3}
	got := formatSummary(s, &ops)
	want := "Master Metrics: Storage: 1.2 GiB / 4.0 GiB (30.0%) | Keys: 7 (soft-pinned: 2) | Workers: 3 | " +
		"Requests (Success/Total): PutStart=8/10, PutEnd=8/8, PutRevoke=0/0, Lookup=4/5, Exists=0/0, Remove=0/0, " +
		"RemoveByRegex=0/0, RemoveAll=0/0, BatchPutStart=0/0, BatchPutEnd=0/0, BatchLookup=0/0, BatchExists=0/0, " +
		"BatchRemove=0/0, Register=0/0, Heartbeat=0/0"
	if got != want {
		t.Fatalf("got\n%s\nwant\n%s", got, want)
	}
	// No capacity: no division by zero.
	if got := formatSummary(masterStats{}, &ops); !strings.HasPrefix(got, "Master Metrics: Storage: 0 B / 0 B (0.0%) | Keys: 0 (soft-pinned: 0) | Workers: 0 |") {
		t.Fatal(got)
	}
}

func TestMasterMetricsNames(t *testing.T) {
	m := newMasterMetrics(func() masterStats {
		return masterStats{Keys: 4, MetadataBytes: 400, AllocatedBytes: 10, CapacityBytes: 100, Workers: 1,
			Segments: []segmentStat{{ID: "w1", Allocated: 10, Capacity: 100}}}
	})
	m.observe(opPutStart, nil)
	m.observe(opPutStart, errors.New("x"))
	const want = `
# HELP master_put_start_failures_total Number of PutStart requests that failed.
# TYPE master_put_start_failures_total counter
master_put_start_failures_total 1
# HELP master_put_start_requests_total Number of PutStart requests the master received.
# TYPE master_put_start_requests_total counter
master_put_start_requests_total 2
# HELP master_key_count Number of objects the metadata holds.
# TYPE master_key_count gauge
master_key_count 4
# HELP master_metadata_bytes_per_key master_metadata_bytes / master_key_count (0 when there are no keys).
# TYPE master_metadata_bytes_per_key gauge
master_metadata_bytes_per_key 100
# HELP segment_allocated_bytes Bytes of replicas placed on one worker segment.
# TYPE segment_allocated_bytes gauge
segment_allocated_bytes{segment="w1"} 10
`
	err := testutil.GatherAndCompare(m.reg, strings.NewReader(want),
		"master_put_start_requests_total", "master_put_start_failures_total", "master_key_count",
		"master_metadata_bytes_per_key", "segment_allocated_bytes")
	if err != nil {
		t.Fatal(err)
	}
	// Every Mooncake name the issue lists is there, plus process memory.
	mfs, err := m.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]bool{}
	for _, mf := range mfs {
		names[mf.GetName()] = true
	}
	for _, n := range []string{"master_key_count", "master_allocated_bytes", "master_total_capacity_bytes",
		"segment_allocated_bytes", "segment_total_capacity_bytes", "master_put_end_requests_total",
		"master_put_revoke_failures_total", "master_get_replica_list_requests_total", "master_exist_key_requests_total",
		"master_remove_requests_total", "master_remove_all_requests_total", "master_remove_by_regex_requests_total",
		"master_batch_put_start_requests_total", "master_worker_count", "go_memstats_heap_inuse_bytes",
		"process_resident_memory_bytes"} {
		if !names[n] {
			t.Errorf("metric %s missing", n)
		}
	}
}

func TestWorkerMetrics(t *testing.T) {
	m := newWorkerMetrics(func() workerStats {
		return workerStats{ArenaUsed: 5, ArenaCapacity: 10, HugePageMode: "thp", DRAMObjects: 2, NVMeObjects: 3,
			Evictions: map[string]int64{"watermark": 4}, ShmLeases: 6}
	})
	m.observe(wopRead, errors.New("x"))
	m.observe(wopShmPin, errors.New("x"))
	m.observe(wopShmRelease, nil)
	const want = `
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
worker_failures_total{op="write"} 0
# HELP worker_shm_leases Objects pinned by clients on this host copying them out of the shared arena (ShmPin leases not yet released).
# TYPE worker_shm_leases gauge
worker_shm_leases 6
`
	if err := testutil.GatherAndCompare(m.reg, strings.NewReader(want), "worker_arena_hugepage_mode",
		"worker_tier_objects", "worker_evictions_total", "worker_failures_total", "worker_shm_leases"); err != nil {
		t.Fatal(err)
	}
}

// TestSummaryLogged: the leader logs the "Master Metrics:" line every SummaryInterval, and the
// effective config once at start.
func TestSummaryLogged(t *testing.T) {
	var buf mctest.SyncBuffer
	c := startMasters(t, 1, func(cfg *MasterConfig) {
		cfg.SummaryInterval = 20 * time.Millisecond
		cfg.Logger = slog.New(slog.NewTextHandler(&buf, nil))
	})
	c.addWorker("", nil)
	eventually(t, "summary line", func() bool {
		return strings.Contains(buf.String(), "Master Metrics: Storage: 0 B / 32.0 MiB (0.0%) | Keys: 0 (soft-pinned: 0) | Workers: 1 |")
	})
	if !strings.Contains(buf.String(), "msg=\"master starting\"") || !strings.Contains(buf.String(), "client_ttl=10s") {
		t.Fatalf("effective config not logged:\n%s", buf.String())
	}
}
