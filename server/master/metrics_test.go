package master

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/mooncake-go/mooncake/internal/base"
	"github.com/mooncake-go/mooncake/transfer"
)

// TestSummaryLine: the master part of the "Master Metrics:" line in Mooncake's current shape,
// with rates per second over the window since the last logged line.
func TestSummaryLine(t *testing.T) {
	m := &Master{met: &masterMetrics{}}
	mc := &mooncakeMasterMetrics{m: m}
	ops := &m.met.ops
	t0 := time.Unix(1000, 0)
	s := masterStats{Keys: 7, SoftPinnedKeys: 2, AllocatedBytes: 1288490189, CapacityBytes: 4 << 30, Workers: 3}
	u := usageTotals{nvmeUsed: 1 << 20, nvmeCap: 1 << 30}
	// Workers' heartbeats carry their eviction counters; one refusal before the first line.
	mc.workers.note("w1", transfer.WorkerStats{EvictPasses: 3, Evictions: 5, EvictedBytes: 5 << 20, NoSpace: 1, HitsDRAM: 4}, t0)
	first := mc.summary(s, u, t0, true)
	if !strings.Contains(first, "PutStart=0.00/0.00") {
		t.Fatalf("first window: %s", first)
	}
	for range 10 {
		ops[opPutStart].Requests.Add(1)
	}
	ops[opPutStart].Failures.Add(2)
	ops[opPutEnd].Requests.Add(8)
	ops[opLookup].Requests.Add(5)
	ops[opLookup].Failures.Add(1)
	// A batch PutEnd of 3 items with 1 failed (partial), one of 2 that failed whole, two fine.
	items := func(codes ...base.Code) *transfer.BatchResponse {
		errs := make([]transfer.ItemError, len(codes))
		for i, c := range codes {
			errs[i].Code = c
		}
		return transfer.NewBatchResponse(transfer.OpBatchPutEnd, errs)
	}
	put := func(n int) *transfer.BatchPutEndRequest {
		return &transfer.BatchPutEndRequest{Items: make([]transfer.PutEndRequest, n)}
	}
	mc.latency = prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "l"}, []string{"op"})
	mc.valueSize = prometheus.NewHistogram(prometheus.HistogramOpts{Name: "v"})
	mc.observeCall(put(3), items(base.CodeOK, base.CodeNoAvailableHandle, base.CodeOK), time.Millisecond, nil)
	mc.observeCall(put(2), nil, time.Millisecond, errors.New("not leader"))
	mc.observeCall(put(1), items(base.CodeOK), time.Millisecond, nil)
	mc.observeCall(put(2), items(base.CodeOK, base.CodeOK), time.Millisecond, nil)
	if b := mc.batch[opBatchPutEnd].load(); b != (batchSnapshot{requests: 4, partial: 1, failures: 1, items: 8, failedItems: 3}) {
		t.Fatalf("batch counts %+v", b)
	}
	// In the window: w1 evicts more; w2 evicts, then restarts (its counters begin again, and
	// what it counts after the restart adds to the sums).
	mc.workers.note("w1", transfer.WorkerStats{EvictPasses: 4, Evictions: 7, EvictedBytes: 7 << 20, NoSpace: 2, HitsDRAM: 6, HitsNVMe: 1}, t0)
	mc.workers.note("w2", transfer.WorkerStats{EvictPasses: 2, Evictions: 2, EvictedBytes: 2 << 20, HitsDRAM: 5}, t0)
	mc.workers.note("w2", transfer.WorkerStats{EvictPasses: 1, Evictions: 1, EvictedBytes: 1 << 20, NoSpace: 1, HitsDRAM: 1}, t0)
	if tot := mc.workers.totals(); tot.HitsDRAM != 12 || tot.HitsNVMe != 1 {
		t.Fatalf("hit sums %+v", tot)
	}
	got := mc.summary(s, u, t0.Add(2*time.Second), true)
	want := "Mem Storage: 1.2 GiB / 4.0 GiB (30.0%) | SSD Storage: 1.0 MiB / 1.0 GiB | Keys: 7 (soft-pinned: 2) | Clients: 3 | " +
		"Requests (Success/Total per sec): PutStart=4.00/5.00, PutEnd=4.00/4.00, PutRevoke=0.00/0.00, Get=2.00/2.50, " +
		"Exist=0.00/0.00, Del=0.00/0.00, DelRegex=0.00/0.00, DelAll=0.00/0.00, Mount=0.00/0.00, Ping=0.00/0.00 | " +
		"Batch Requests (per sec, Req=Success/PartialSuccess/Total, Item=Success/Total): PutStart:(Req=0.00/0.00/0.00, Item=0.00/0.00), " +
		"PutEnd:(Req=1.00/0.50/2.00, Item=2.50/4.00), Get:(Req=0.00/0.00/0.00, Item=0.00/0.00), ExistKey:(Req=0.00/0.00/0.00, Item=0.00/0.00), " +
		"Del:(Req=0.00/0.00/0.00, Item=0.00/0.00) | Eviction: Success/Attempts=7/10, AllocFail=2, keys=10, size=10.0 MiB | " +
		"Mem Eviction: Success/Attempts=7/10, keys=10, size=10.0 MiB"
	if got != want {
		t.Fatalf("got\n%s\nwant\n%s", got, want)
	}
	// The next window starts at the last logged line: nothing happened since.
	if got := mc.summary(masterStats{}, usageTotals{}, t0.Add(3*time.Second), false); !strings.HasPrefix(got,
		"Mem Storage: 0 B / 0 B (0.0%) | SSD Storage: 0 B / 0 B | Keys: 0 (soft-pinned: 0) | Clients: 0 | Requests (Success/Total per sec): PutStart=0.00/0.00") {
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
