package dram

import (
	"runtime"
	"time"

	"github.com/mooncake-go/mooncake/dram/internal/hugepage"
)

// Background population (Options.Populate): a fresh mapping has no pages behind it, so the
// first write into every page of the arena takes a page fault and the kernel zeroes the page
// under it; on 4 KiB pages that made the first fill of a fresh worker take 4 MiB puts at 0.5
// of raw loopback TCP against 0.95 once the pages exist (docs/benchmarks.md, issue 23).
// Options.Prefault pays it all before NewArena returns (seconds per GiB); the populator pays
// it after, beside the first puts:
//
//  1. One goroutine on its own OS thread at nice 19 (LowerThreadPriority), so it takes CPU
//     only when nothing else wants it.
//  2. It walks the mapping from offset 0 up, where the allocator hands out its first ranges
//     (one free block, split from its start), in steps of populateStepBytes, each one
//     madvise(MADV_POPULATE_WRITE) call (hugepage.Populate; a touch of each page on kernels
//     before 5.14). A page a put has written already is left as it is.
//  3. Out of memory (ENOMEM from the madvise: a cgroup limit, an overcommitted host) it
//     stops and logs once at Warn; the arena works as without it, puts fault their own pages.
//  4. Close stops it after its current step and waits for it before unmapping.
//
// hugetlb pages come first where the host has them because the arena is mapped hugetlb first
// (mapArena); their memory is reserved at mmap, and population only faults and zeroes them.
// The memory it commits is the arena, the segment the operator asked for.

// populateStepBytes is the bytes one populate call faults in: 32 MiB (16 huge pages), tens of
// milliseconds of kernel time for 4 KiB pages, so Close waits at most about that long and
// the progress metric moves smoothly.
const populateStepBytes = 32 << 20

// populator is a running background population. stop is closed by Close to ask it to end
// after its current step; done is closed by the populator when it has ended.
type populator struct {
	stop, done chan struct{}
}

// startPopulate starts the populator over the whole mapping. step and fn are
// Options.populateStep and Options.populateFn (test hooks), or their defaults.
func (a *Arena) startPopulate(step int64, fn func([]byte) error) {
	if step <= 0 {
		step = populateStepBytes
	}
	if fn == nil {
		fn = hugepage.Populate
	}
	p := &populator{stop: make(chan struct{}), done: make(chan struct{})}
	a.populator = p
	go func() {
		// Never unlocked: the niced thread ends with this goroutine instead of running
		// other goroutines at the lowest priority.
		runtime.LockOSThread()
		defer close(p.done)
		if err := hugepage.LowerThreadPriority(); err != nil {
			a.logger.Debug("dram arena: populating at normal priority", "err", err)
		}
		start, mem := time.Now(), a.region.Mem
		for off := int64(0); off < int64(len(mem)); off += step {
			select {
			case <-p.stop:
				return
			default:
			}
			end := min(off+step, int64(len(mem)))
			if err := fn(mem[off:end]); err != nil {
				a.logger.Warn("dram arena: background population stopped; puts fault in the rest of the arena as they write it",
					"populated_bytes", off, "capacity_bytes", a.capacity, "err", err)
				return
			}
			a.populated.Store(min(end, a.capacity))
		}
		a.logger.Info("dram arena populated", "bytes", len(mem), "seconds", time.Since(start).Seconds())
	}()
}

// stopPopulate stops the populator, if one runs, and waits for it to end. Called once, by
// the Close that closes the arena, before the unmap.
func (a *Arena) stopPopulate() {
	if a.populator == nil {
		return
	}
	close(a.populator.stop)
	<-a.populator.done
}

// Populated returns how many bytes of the arena, from offset 0, have their pages faulted in
// ahead of the allocator: Capacity with Options.Prefault, the background populator's
// progress with Options.Populate (Capacity when it has finished), 0 with neither.
func (a *Arena) Populated() int64 { return a.populated.Load() }
