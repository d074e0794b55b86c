package raftmeta

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"github.com/mooncake-go/mooncake/internal/base"
)

// benchObjects is the object count of the memory and snapshot benchmarks.
const benchObjects = 1_000_000

// benchKey returns a 64-byte key.
func benchKey(i int) string { return fmt.Sprintf("model-llama3-70b/layer-%02d/block-%032d", i%80, i) }

// fillFSM applies n PutEnds of 64-byte keys with 2 replicas each, in batches of 1000, through
// the codec as a node would.
func fillFSM(tb testing.TB, n int) *fsm {
	f := newFSM()
	applyEncoded(tb, f, 1, RegisterWorker{ID: "worker-a", Address: "10.0.0.1:7000"})
	applyEncoded(tb, f, 2, RegisterWorker{ID: "worker-b", Address: "10.0.0.2:7000"})
	idx := uint64(3)
	for i := 0; i < n; i += 1000 {
		c := PutEnd{Now: time.Now().UnixNano()}
		for j := i; j < min(i+1000, n); j++ {
			c.Items = append(c.Items, base.Object{ObjectMeta: base.ObjectMeta{Key: benchKey(j), Size: 1 << 20,
				Version: base.Version(j + 1), Checksum: uint64(j) * 0x9e3779b97f4a7c15},
				Replicas: []base.WorkerID{"worker-a", "worker-b"}})
		}
		if res := applyEncoded(tb, f, idx, c); res.Failed() != 0 {
			tb.Fatal(res.Items)
		}
		idx++
	}
	return f
}

func heapAlloc() uint64 {
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}

// naiveObject is the baseline: the obvious record, the API's Object behind a pointer.
var naiveSink map[string]*Object

// BenchmarkMemoryPerObject reports heap bytes per object held by the FSM with 1,000,000
// objects (64-byte keys, 2 replicas), from runtime.MemStats after GC, beside the obvious
// map[string]*Object holding the same data. Run with -benchtime 1x.
func BenchmarkMemoryPerObject(b *testing.B) {
	for range b.N {
		before := heapAlloc()
		f := fillFSM(b, benchObjects)
		after := heapAlloc()
		per := float64(after-before) / benchObjects
		runtime.KeepAlive(f)
		f = nil

		before = heapAlloc()
		naiveSink = make(map[string]*Object)
		for i := range benchObjects {
			k := benchKey(i)
			naiveSink[k] = &Object{Object: base.Object{ObjectMeta: base.ObjectMeta{Key: k, Size: 1 << 20,
				Version: base.Version(i + 1), Checksum: uint64(i)},
				Replicas: []base.WorkerID{"worker-a", "worker-b"}}, Created: 1}
		}
		naive := float64(heapAlloc()-before) / benchObjects
		naiveSink = nil

		b.ReportMetric(per, "bytes/object")
		b.ReportMetric(per-64, "bytes/object-beyond-key")
		b.ReportMetric(naive, "naive-bytes/object")
		b.ReportMetric(per/naive, "ratio-vs-naive")
	}
}

// BenchmarkSnapshot1M writes a snapshot of 1,000,000 objects to a file (fsynced, as raft's
// file sink does) and restores it, beside copying the same bytes file to file (the disk and
// page-cache baseline). Run with -benchtime 1x or 3x.
func BenchmarkSnapshot1M(b *testing.B) {
	f := fillFSM(b, benchObjects)
	dir := b.TempDir()
	path := filepath.Join(dir, "snap")
	var size int64
	b.Run("write", func(b *testing.B) {
		for range b.N {
			start := time.Now()
			snap, err := f.Snapshot()
			if err != nil {
				b.Fatal(err)
			}
			cloned := time.Since(start)
			out, err := os.Create(path)
			if err != nil {
				b.Fatal(err)
			}
			if err := writeSnapshot(out, snap.(*fsmSnapshot).st, f.applied); err != nil {
				b.Fatal(err)
			}
			if err := out.Sync(); err != nil {
				b.Fatal(err)
			}
			out.Close()
			snap.Release()
			fi, _ := os.Stat(path)
			size = fi.Size()
			b.SetBytes(size)
			b.ReportMetric(float64(cloned.Milliseconds()), "clone-ms")
			b.ReportMetric(float64(size)/benchObjects, "snapshot-bytes/object")
		}
	})
	b.Run("restore", func(b *testing.B) {
		b.SetBytes(size)
		for range b.N {
			in, err := os.Open(path)
			if err != nil {
				b.Fatal(err)
			}
			g := newFSM()
			if err := g.Restore(in); err != nil {
				b.Fatal(err)
			}
			if len(g.st.objects) != benchObjects {
				b.Fatal(len(g.st.objects))
			}
		}
	})
	b.Run("baseline-copy", func(b *testing.B) {
		data, err := os.ReadFile(path)
		if err != nil {
			b.Fatal(err)
		}
		b.SetBytes(int64(len(data)))
		for range b.N {
			out, _ := os.Create(path + ".copy")
			w := bufio.NewWriterSize(out, 256<<10)
			if _, err := bytes.NewReader(data).WriteTo(w); err != nil {
				b.Fatal(err)
			}
			w.Flush()
			out.Sync()
			out.Close()
		}
	})
}

// BenchmarkApplyBatchEntry measures what the FSM does with one committed PutEnd entry of 64
// new objects (64-byte keys, 2 replicas): decode, then apply, on an FSM that keeps growing, as
// the leader and every follower do for each BatchPutEnd (docs/benchmarks.md, "The cost of a
// commit"). The entries are encoded before the timer starts. b.N counts entries.
//
//	go test -run '^$' -bench ApplyBatchEntry -benchtime 20000x ./raftmeta/
func BenchmarkApplyBatchEntry(b *testing.B) {
	f := newFSM()
	applyEncoded(b, f, 1, RegisterWorker{ID: "worker-a", Address: "10.0.0.1:7000"})
	applyEncoded(b, f, 2, RegisterWorker{ID: "worker-b", Address: "10.0.0.2:7000"})
	entries := make([][]byte, b.N)
	for i := range entries {
		c := PutEnd{Now: int64(i)}
		for j := range 64 {
			k := i*64 + j
			c.Items = append(c.Items, base.Object{ObjectMeta: base.ObjectMeta{Key: benchKey(k), Size: 64 << 10,
				Version: base.Version(k + 1), Checksum: uint64(k)}, Replicas: []base.WorkerID{"worker-a", "worker-b"}})
		}
		entries[i] = EncodeCommand(c)
	}
	b.ReportAllocs()
	b.ResetTimer()
	f.mu.Lock()
	defer f.mu.Unlock()
	for i, e := range entries {
		if res := f.applyLocked(uint64(i+3), e); res.Failed() != 0 {
			b.Fatal(res.Items)
		}
	}
}
