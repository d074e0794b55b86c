package server

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"runtime/metrics"
	"sync"
	"testing"
	"time"

	"github.com/mooncake-go/mooncake/internal/base"
	"github.com/mooncake-go/mooncake/internal/testutil"
	"github.com/mooncake-go/mooncake/raftmeta"
	"github.com/mooncake-go/mooncake/server/rpcsrv"
	"github.com/mooncake-go/mooncake/server/worker"
	"github.com/mooncake-go/mooncake/transfer"
)

// BenchmarkRegisterPages registers a worker holding 1,000,000 objects with 64-byte keys
// (all known to the master: a restart from NVMe, every object kept) through pages of the
// worker's default size against an in-process master over loopback TCP ("paged-1M"). The
// baseline, measured in the same run, is the largest registration that fits one message: a
// second worker with singleMessageObjects objects, unpaged ("unpaged-700k"); a 1M-object
// unpaged registration is refused by the body limit (checked once, outside the timing).
//
// Reported per op: objects/s, and peak-extra-heap-MiB, the highest heap-objects bytes
// sampled every millisecond during the registration minus the heap before it. Master and
// client share the process, so the peak includes the client's encoded page (one page at a
// time, about 6 MiB) or whole message (about 64 MiB). ns/object-ratio is the paged run's time
// per object over the baseline's. NB: the machine is shared; figures are noisy.
//
//	go test -run '^$' -bench BenchmarkRegisterPages -benchtime 3x ./server
func BenchmarkRegisterPages(b *testing.B) {
	const (
		pagedObjects = 1_000_000
		keyLen       = 64
	)
	// The most 64-byte-key entries one body takes: 64 MiB less the fixed fields, 92 bytes each
	// (u32 length + key + version + size + checksum); 700,000 leaves room for the ids.
	const entryLen = 4 + keyLen + 24
	singleLimit := (64<<20 - 64) / entryLen // transfer.Limits default MaxBodyLen
	const singleMessageObjects = 700_000
	c := startMasters(b, 1, nil)
	m := c.masters[0]
	addr := m.Addr()
	cli, err := transfer.NewClient(transfer.ClientOptions{Logger: testLogger()})
	if err != nil {
		b.Fatal(err)
	}
	defer cli.Close()
	ctx := context.Background()
	register := func(id base.WorkerID, inv []base.ObjectMeta, session uint64, page uint32, more bool) error {
		cctx, cancel := context.WithTimeout(ctx, rpcsrv.RegisterTimeout)
		defer cancel()
		req := &transfer.RegisterWorkerRequest{WorkerID: id, Address: "127.0.0.1:1", DRAMCapacity: 1 << 30,
			NVMeCapacity: 1 << 40, Inventory: inv, Session: session, Page: page, More: more}
		return cli.Call(cctx, addr, req, &transfer.RegisterWorkerResponse{})
	}
	// Both workers register empty once (waiting out the election), then their objects are
	// committed straight through raft.
	for _, id := range []base.WorkerID{"w-paged", "w-single"} {
		testutil.WaitFor(b, "register "+string(id), testWait, func() error {
			err := register(id, nil, 0, 0, false)
			var nl *transfer.NotLeaderError
			if err != nil && !errors.As(err, &nl) {
				b.Fatal(err) // only NOT_LEADER (the election not over yet) is waited out
			}
			return err
		})
	}
	commit := func(id base.WorkerID, prefix string, n int) []base.ObjectMeta {
		inv := make([]base.ObjectMeta, n)
		for start := 0; start < n; start += raftmeta.MaxBatch {
			items := make([]base.Object, min(raftmeta.MaxBatch, n-start))
			for i := range items {
				v, err := m.TestHooks().Node().NewVersion()
				if err != nil {
					b.Fatal(err)
				}
				key := fmt.Sprintf("%s%0*d", prefix, keyLen-len(prefix), start+i)
				items[i] = base.Object{ObjectMeta: base.ObjectMeta{Key: key, Size: 1 << 20, Version: v,
					Checksum: uint64(start + i)}, Replicas: []base.WorkerID{id}}
				inv[start+i] = base.ObjectMeta{Key: key, Version: v, Size: 1 << 20, Checksum: uint64(start + i)}
			}
			res, err := m.TestHooks().Node().Apply(ctx, raftmeta.PutEnd{Items: items, Upsert: true})
			if err == nil {
				err = res.Err
			}
			if err != nil {
				b.Fatal(err)
			}
		}
		return inv
	}
	pagedInv := commit("w-paged", "paged/", pagedObjects)
	singleInv := commit("w-single", "single/", singleMessageObjects)
	if err := register("w-paged", pagedInv, 0, 0, false); !errors.Is(err, base.ErrInvalidParams) && !errors.Is(err, base.ErrTooLarge) {
		b.Fatalf("an unpaged registration of %d objects: got %v, want refused as too large", pagedObjects, err)
	}
	pages := (worker.TestHooks{}).InventoryPages(pagedInv)
	b.Logf("one message holds at most %d entries with %d-byte keys (64 MiB body limit); %d objects go in %d pages",
		singleLimit, keyLen, pagedObjects, len(pages))

	var nsPerObject [2]float64
	for j, bc := range []struct {
		name string
		id   base.WorkerID
		inv  []base.ObjectMeta
		run  func() error
	}{
		{"paged-1M", "w-paged", pagedInv, func() error {
			for i, p := range pages {
				if err := register("w-paged", p, 0xbe7c4, uint32(i), i < len(pages)-1); err != nil {
					return err
				}
			}
			return nil
		}},
		{"unpaged-700k", "w-single", singleInv, func() error { return register("w-single", singleInv, 0, 0, false) }},
	} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			var peak uint64
			for b.Loop() {
				runtime.GC()
				before := heapObjectBytes()
				stop := sampleHeapPeak()
				err := bc.run()
				top := stop()
				if err != nil {
					b.Fatal(err)
				}
				peak = max(peak, top-min(before, top))
			}
			nsPerObject[j] = float64(b.Elapsed().Nanoseconds()) / float64(b.N) / float64(len(bc.inv))
			b.ReportMetric(float64(len(bc.inv))*float64(b.N)/b.Elapsed().Seconds(), "objects/s")
			b.ReportMetric(float64(peak)/(1<<20), "peak-extra-heap-MiB")
			if j == 1 && nsPerObject[0] > 0 {
				b.ReportMetric(nsPerObject[0]/nsPerObject[1], "paged/unpaged-ns/object-ratio")
			}
		})
	}
}

// heapObjectBytes returns the bytes of live and not-yet-swept heap objects.
func heapObjectBytes() uint64 {
	s := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	metrics.Read(s)
	return s[0].Value.Uint64()
}

// sampleHeapPeak samples heapObjectBytes every millisecond until the returned function is
// called, which returns the highest value seen.
func sampleHeapPeak() func() uint64 {
	done := make(chan struct{})
	var wg sync.WaitGroup
	var peak uint64
	wg.Add(1)
	go func() {
		defer wg.Done()
		t := time.NewTicker(time.Millisecond)
		defer t.Stop()
		for {
			peak = max(peak, heapObjectBytes())
			select {
			case <-done:
				return
			case <-t.C:
			}
		}
	}()
	return func() uint64 {
		close(done)
		wg.Wait()
		return peak
	}
}
