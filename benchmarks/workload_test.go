package benchmarks

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mooncake-go/mooncake/internal/base"
	"github.com/mooncake-go/mooncake/internal/testutil"
)

func TestMain(m *testing.M) { testutil.VerifyNoLeaks(m) }

func TestRunPutGet(t *testing.T) {
	ctx := context.Background()
	s := NewMemStore()
	w := Workload{Op: OpPut, Size: 1000, Count: 50, Concurrency: 4}
	keys := w.Keys()
	r, err := Run(ctx, s, w, keys)
	if err != nil {
		t.Fatal(err)
	}
	if r.Ops != 50 || r.Bytes != 50_000 || len(r.Latencies) != 50 || r.Percentile(0.99) < r.Percentile(0.5) {
		t.Fatalf("put result %+v", r)
	}
	// A second put of the same keys fails, and the error names the key.
	if _, err := Run(ctx, s, w, keys); !errors.Is(err, base.ErrObjectAlreadyExists) {
		t.Fatalf("second put: %v", err)
	}
	w.Op = OpGet
	r, err = Run(ctx, s, w, keys)
	if err != nil || r.Ops != 50 {
		t.Fatalf("get: %v %+v", err, r)
	}
	// A get workload prepares its own objects.
	w2 := Workload{Op: OpGet, Size: 10, Count: 5, Concurrency: 2}
	keys2 := w2.Keys()
	if err := Prepare(ctx, s, w2, keys2); err != nil {
		t.Fatal(err)
	}
	if _, err := Run(ctx, s, w2, keys2); err != nil {
		t.Fatal(err)
	}
	if _, err := Run(ctx, NewMemStore(), w2, keys2); !errors.Is(err, base.ErrObjectNotFound) {
		t.Fatalf("get of missing keys: %v", err)
	}
}

// countingStore counts the Exists calls of a MemStore's users.
type countingStore struct {
	*MemStore
	exists atomic.Int64
}

func (s *countingStore) Exists(ctx context.Context, key string) (bool, error) {
	s.exists.Add(1)
	return s.MemStore.Exists(ctx, key)
}

// TestRunExistsFirst: a get workload with ExistsFirst asks Exists of every key before its get,
// and a key that does not exist fails the run.
func TestRunExistsFirst(t *testing.T) {
	ctx := context.Background()
	s := &countingStore{MemStore: NewMemStore()}
	w := Workload{Op: OpGet, Size: 10, Count: 12, Objects: 4, Concurrency: 3, ExistsFirst: true}
	keys := w.Keys()
	if err := Prepare(ctx, s, w, keys); err != nil {
		t.Fatal(err)
	}
	if r, err := Run(ctx, s, w, keys); err != nil || r.Ops != 12 {
		t.Fatalf("get with exists first: %v %+v", err, r)
	}
	if n := s.exists.Load(); n != 12 {
		t.Fatalf("%d exists calls, want 12", n)
	}
	if _, err := Run(ctx, &countingStore{MemStore: NewMemStore()}, w, keys); err == nil {
		t.Fatal("a get of a key that does not exist succeeded")
	}
}

// TestRunBatchPut: a put workload with Batch stores Count batches of Batch objects, each
// operation one BatchPut, and counts the bytes of every object.
func TestRunBatchPut(t *testing.T) {
	s := NewMemStore()
	w := Workload{Op: OpPut, Size: 100, Count: 6, Concurrency: 2, Batch: 4}
	keys := w.Keys()
	if len(keys) != 24 {
		t.Fatalf("%d keys, want 24", len(keys))
	}
	r, err := Run(context.Background(), s, w, keys)
	if err != nil {
		t.Fatal(err)
	}
	if r.Ops != 6 || r.Bytes != 2400 || len(r.Latencies) != 6 {
		t.Fatalf("batch put result %+v", r)
	}
	for _, k := range keys {
		if n, err := s.GetInto(context.Background(), k, make([]byte, 100)); err != nil || n != 100 {
			t.Fatalf("%s: %d, %v", k, n, err)
		}
	}
}

func TestWorkloadValidate(t *testing.T) {
	bad := func(w Workload) {
		t.Helper()
		if err := w.Validate(); !errors.Is(err, base.ErrInvalidParams) {
			t.Fatalf("%+v: %v", w, err)
		}
	}
	bad(Workload{Op: "scan", Size: 1, Count: 1, Concurrency: 1})
	bad(Workload{Op: OpPut, Size: 0, Count: 1, Concurrency: 1})
	bad(Workload{Op: OpPut, Size: 1, Count: 0, Concurrency: 1})
	bad(Workload{Op: OpPut, Size: 1, Count: 1, Concurrency: 0})
	bad(Workload{Op: OpPut, Size: 1 << 30, Count: 1, Concurrency: 100})
	bad(Workload{Op: OpGet, Size: 1, Count: 1, Concurrency: 1, Batch: 2})
	bad(Workload{Op: OpPut, Size: 1, Count: 1, Concurrency: 1, ExistsFirst: true})
	bad(Workload{Op: OpPut, Size: 1, Count: 1, Concurrency: 1, Batch: -1})
	bad(Workload{Op: OpPut, Size: 1, Count: 1 << 20, Concurrency: 1, Batch: 4096})
	if _, err := ParseOp("get"); err != nil {
		t.Fatal(err)
	}
	if _, err := ParseOp("GET!"); !errors.Is(err, base.ErrInvalidParams) {
		t.Fatal(err)
	}
}

func TestLoopbackTCP(t *testing.T) {
	for _, op := range []Op{OpPut, OpGet} {
		r, err := LoopbackTCP(context.Background(), Workload{Op: op, Size: 256 << 10, Count: 40, Concurrency: 3})
		if err != nil {
			t.Fatal(err)
		}
		if r.Ops != 40 || r.Bytes != 40*256<<10 || r.GBps() <= 0 || r.OpsPerSec() <= 0 {
			t.Fatalf("%s: %+v", op, r)
		}
		t.Log(r)
	}
}

func TestResultPercentile(t *testing.T) {
	var r Result
	if r.Percentile(0.5) != 0 || r.GBps() != 0 || r.OpsPerSec() != 0 {
		t.Fatal("empty result")
	}
	r.Latencies = []time.Duration{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}
	if r.Percentile(0.5) != 5 || r.Percentile(0.99) != 9 || r.Percentile(1) != 10 {
		t.Fatalf("percentiles %v %v", r.Percentile(0.5), r.Percentile(0.99))
	}
}

// A get workload stores a bounded set of distinct objects and reads them round-robin, so
// --count can exceed what the store's DRAM holds.
func TestGetWorkloadCyclesObjects(t *testing.T) {
	ctx := context.Background()
	f := func(w Workload, wantDistinct int) {
		t.Helper()
		s := NewMemStore()
		keys := w.Keys()
		if len(keys) != w.Count {
			t.Fatalf("%+v: %d keys", w, len(keys))
		}
		if err := Prepare(ctx, s, w, keys); err != nil {
			t.Fatal(err)
		}
		if got := len(s.m); got != wantDistinct {
			t.Fatalf("%+v: stored %d objects, want %d", w, got, wantDistinct)
		}
		r, err := Run(ctx, s, w, keys)
		if err != nil || r.Ops != w.Count || r.Bytes != int64(w.Count)*w.Size {
			t.Fatalf("%+v: %v %+v", w, err, r)
		}
	}
	f(Workload{Op: OpGet, Size: 1 << 20, Count: 300, Concurrency: 4}, 256) // 256 MiB cap
	f(Workload{Op: OpGet, Size: 64 << 20, Count: 20, Concurrency: 8}, 8)   // at least Concurrency
	f(Workload{Op: OpGet, Size: 1000, Count: 30, Concurrency: 2}, 30)      // all fit
	f(Workload{Op: OpGet, Size: 1 << 20, Count: 30, Concurrency: 2, Objects: 3}, 3)
	if err := (&Workload{Op: OpGet, Size: 1, Count: 1, Concurrency: 1, Objects: -1}).Validate(); !errors.Is(err, base.ErrInvalidParams) {
		t.Fatalf("negative objects: %v", err)
	}
}
