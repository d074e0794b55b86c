package server

import (
	"encoding/json"
	"fmt"
	"runtime"

	"github.com/mooncake-go/mooncake/internal/base"
	"github.com/mooncake-go/mooncake/transfer"
)

// memory builds the worker's memory breakdown (WorkerMemory; docs/memory.md). It reads
// /proc/self/smaps for the arena's resident bytes and stops the world briefly for the Go
// heap: it is for reports and scrapes, not hot paths.
func (w *Worker) memory() WorkerMemory {
	m := w.eng.Metrics()
	as := w.arena.Stats()
	held := max(0, m.ReservedBytes-m.PendingWrites.Bytes)
	wm := WorkerMemory{
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
	wm.RSS = processRSS()
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
