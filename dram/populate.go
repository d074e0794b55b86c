package dram

import (
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
//  1. One goroutine at normal priority that rests after each step for as long as the step
//     took, so it takes at most half of one core. Not niced: each step faults pages in under
//     the process's memory-map lock, and a nice-19 thread that the scheduler leaves waiting
//     for seconds on a busy host held that lock the whole while, stalling every other thread
//     of the worker that mapped memory or faulted a page (puts from 15 ms to 600 ms on two
//     loaded cores, and a worker missing its first handshake in the netns test).
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

// populateStepBytes is the bytes one populate call faults in: 4 MiB (two huge pages), a few
// milliseconds of kernel time for 4 KiB pages, so the memory-map lock is held briefly, Close
// waits at most about that long and the progress metric moves smoothly.
const populateStepBytes = 4 << 20

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
		defer close(p.done)
		start, mem := time.Now(), a.region.Mem
		rest := time.Duration(0)
		for off := int64(0); off < int64(len(mem)); off += step {
			select {
			case <-p.stop:
				return
			case <-time.After(rest):
			}
			end := min(off+step, int64(len(mem)))
			t := time.Now()
			err := fn(mem[off:end])
			rest = time.Since(t)
			if err != nil {
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
