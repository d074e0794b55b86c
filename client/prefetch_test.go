package client_test

import (
	"bytes"
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/mooncake-go/mooncake/client"
	"github.com/mooncake-go/mooncake/internal/testutil"
	"github.com/mooncake-go/mooncake/server/worker"
)

// startSpilling starts one worker with a DRAM arena of arena bytes and an NVMe tier, puts
// n objects of size bytes and waits until the first spilled have been spilled (NVMe only:
// spills run in eviction order and nothing is read), and returns the client and the values.
func startSpilling(t *testing.T, arena, size int64, n, spilled int, budget int64) (*inproc, *client.Client, [][]byte) {
	t.Helper()
	root := t.TempDir()
	ip := startInprocWith(t, 1, arena, func(cfg *worker.Config) {
		cfg.MetricsAddress, cfg.RootFSDir, cfg.PrefetchBudget = "127.0.0.1:0", root, budget
	})
	// Over TCP, so every read goes through the worker's read path and its hit counters.
	c := connectWith(t, ip, client.Config{DisableSharedMemory: true})
	ctx := context.Background()
	vals := make([][]byte, n)
	for i := range vals {
		vals[i] = val(int(size), byte(i))
		if err := c.Put(ctx, fmt.Sprint("obj-", i), vals[i], client.ReplicateConfig{}); err != nil {
			t.Fatal(err)
		}
	}
	waitMetric(t, ip, "worker_spills_total", float64(spilled))
	return ip, c, vals
}

// waitMetric waits until the worker's metric name reaches at least want (20 s at most).
func waitMetric(t *testing.T, ip *inproc, name string, want float64) {
	t.Helper()
	testutil.WaitFor(t, name, 20*time.Second, func() error {
		if got := workerMetric(t, ip.workers[0].MetricsAddr(), name); got < want {
			return fmt.Errorf("%s is %v, want >= %v", name, got, want)
		}
		return nil
	})
}

// An NVMe-only object read after ExistsWith(PrefetchToMemory) is served from DRAM; without
// prefetch the same read is an NVMe hit.
func TestExistsPrefetchServesFromDRAM(t *testing.T) {
	const size = 256 << 10
	ip, c, vals := startSpilling(t, 4<<20, size, 32, 2, 0)
	ctx := context.Background()
	addr := ip.workers[0].MetricsAddr()
	metric := func(name string) float64 { return workerMetric(t, addr, name) }

	// Control: obj-1 read without prefetch is an NVMe hit.
	file0, mem0 := metric("file_cache_hit_nums_"), metric("mem_cache_hit_nums_")
	got, err := c.Get(ctx, "obj-1")
	if err != nil || !bytes.Equal(got, vals[1]) {
		t.Fatalf("get obj-1: %v", err)
	}
	if metric("file_cache_hit_nums_") != file0+1 || metric("mem_cache_hit_nums_") != mem0 {
		t.Fatal("the control read of a spilled object was not an NVMe hit")
	}

	// obj-0 is NVMe only: prefetch it, wait for the promotion, read it.
	ok, err := c.ExistsWith(ctx, "obj-0", client.ExistOptions{PrefetchToMemory: true})
	if err != nil || !ok {
		t.Fatalf("exists with prefetch: %v %v", ok, err)
	}
	waitMetric(t, ip, "worker_prefetch_promoted_total", 1)
	if metric("worker_prefetch_requested_total") != 1 || metric("prefetch_complete_total") != 1 {
		t.Fatal("prefetch counters")
	}
	file1, mem1 := metric("file_cache_hit_nums_"), metric("mem_cache_hit_nums_")
	got, err = c.Get(ctx, "obj-0")
	if err != nil || !bytes.Equal(got, vals[0]) {
		t.Fatalf("get obj-0 after prefetch: %v", err)
	}
	if metric("mem_cache_hit_nums_") != mem1+1 || metric("file_cache_hit_nums_") != file1 {
		t.Fatal("the read after prefetch was not served from DRAM")
	}

	// Absent keys answer false and send nothing; present ones in DRAM cost no promotion.
	ex, err := c.BatchExistsWith(ctx, []string{"absent", "obj-31", "obj-0"}, client.ExistOptions{PrefetchToMemory: true})
	if err != nil || ex[0] || !ex[1] || !ex[2] {
		t.Fatalf("batch exists with prefetch: %v %v", ex, err)
	}
	if metric("worker_prefetch_requested_total") != 3 || metric("worker_prefetch_promoted_total") != 1 {
		t.Fatal("prefetch of objects in DRAM promoted something")
	}
	// Without the option, nothing is sent.
	if ok, err := c.ExistsWith(ctx, "obj-2", client.ExistOptions{}); err != nil || !ok {
		t.Fatalf("exists: %v %v", ok, err)
	}
	if metric("worker_prefetch_requested_total") != 3 {
		t.Fatal("exists without prefetch sent a prefetch")
	}
}

// The worker's prefetch budget bounds the bytes in flight: a batch larger than the budget is
// partly dropped (counted), never queued, and the rest is promoted.
func TestExistsPrefetchBudget(t *testing.T) {
	const size = 256 << 10
	ip, c, _ := startSpilling(t, 4<<20, size, 40, 6, 2*size) // two objects in flight at most
	ctx := context.Background()
	keys := []string{"obj-0", "obj-1", "obj-2", "obj-3", "obj-4", "obj-5"}
	ex, err := c.BatchExistsWith(ctx, keys, client.ExistOptions{PrefetchToMemory: true})
	if err != nil {
		t.Fatal(err)
	}
	for i, e := range ex {
		if !e {
			t.Fatalf("%s: not found", keys[i])
		}
	}
	addr := ip.workers[0].MetricsAddr()
	dropped := workerMetric(t, addr, "worker_prefetch_dropped_total")
	if dropped < float64(len(keys)-2) {
		t.Fatalf("dropped %v of %d prefetches with a budget of two objects", dropped, len(keys))
	}
	waitMetric(t, ip, "worker_prefetch_promoted_total", float64(len(keys))-dropped)
	if n := workerMetric(t, addr, "worker_prefetch_inflight_bytes"); n > 2*size {
		t.Fatalf("%v bytes in flight over a budget of %d", n, 2*size)
	}
}

// A worker with prefetch off (--prefetch_budget 0: PrefetchBudget < 0) refuses Prefetch; the
// exists answer is unchanged and the read is served from NVMe.
func TestExistsPrefetchOff(t *testing.T) {
	const size = 256 << 10
	ip, c, vals := startSpilling(t, 4<<20, size, 32, 1, -1)
	ctx := context.Background()
	addr := ip.workers[0].MetricsAddr()
	if ok, err := c.ExistsWith(ctx, "obj-0", client.ExistOptions{PrefetchToMemory: true}); err != nil || !ok {
		t.Fatalf("exists with prefetch on a worker with prefetch off: %v %v", ok, err)
	}
	file0 := workerMetric(t, addr, "file_cache_hit_nums_")
	if got, err := c.Get(ctx, "obj-0"); err != nil || !bytes.Equal(got, vals[0]) {
		t.Fatalf("get: %v", err)
	}
	if workerMetric(t, addr, "file_cache_hit_nums_") != file0+1 || workerMetric(t, addr, "worker_prefetch_requested_total") != 0 {
		t.Fatal("a worker with prefetch off promoted")
	}
}
