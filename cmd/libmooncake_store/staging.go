//go:build cgo

package main

/*
#include <stdlib.h>
#include "cuda.h"
*/
import "C"

import (
	"sync"
	"unsafe"
)

// Staging memory for GPU ranges (docs/clib.md "GPU memory"). A device range is copied through
// host memory; into ordinary (pageable) memory the driver bounces the DMA through a pinned
// buffer of its own and every fresh page faults, which held a device put to a few GB/s on a
// bus that moves 25. So stages of minPinnedStage bytes and more are pinned memory from the
// driver (cuMemHostAlloc, portable to every context), kept in a pool by power-of-two class
// and reused: pinning is slow (it maps and locks every page), reuse is free.
const (
	// minPinnedStage: smaller stages are ordinary memory (a small copy is latency-bound, and
	// a pool of small pinned buffers would pin more than it saves).
	minPinnedStage = 256 << 10
	// maxPinnedKept bounds the pinned bytes the pool keeps between calls; a stage returned
	// beyond it is freed. Pinned memory cannot be swapped, so it stays modest.
	maxPinnedKept = 1 << 30
)

// stages is the pool: free pinned buffers by class. Its lock guards free and kept only; a
// buffer taken from it belongs to one call until putStage.
var stages struct {
	sync.Mutex
	free map[int][]unsafe.Pointer
	kept int // bytes in free
}

// stageClass is the pool class of an n-byte stage: the next power of two.
func stageClass(n uint64) int {
	c := minPinnedStage
	for uint64(c) < n {
		c <<= 1
	}
	return c
}

// getStage returns n bytes to stage the device range at dev, and whether they are pinned
// (then the caller returns them with putStage).
func getStage(dev uintptr, n uint64) ([]byte, bool) {
	if n < minPinnedStage {
		return make([]byte, n), false
	}
	c := stageClass(n)
	stages.Lock()
	if l := stages.free[c]; len(l) > 0 {
		p := l[len(l)-1]
		stages.free[c] = l[:len(l)-1]
		stages.kept -= c
		stages.Unlock()
		return unsafe.Slice((*byte)(p), c)[:n], true
	}
	stages.Unlock()
	p := C.mc_cuda_host_alloc(C.uintptr_t(dev), C.size_t(c))
	if p == nil {
		return make([]byte, n), false // no pinned memory: the driver bounces the copy
	}
	return unsafe.Slice((*byte)(p), c)[:n], true
}

// putStage returns a pinned stage getStage gave.
func putStage(b []byte) {
	c, p := cap(b), unsafe.Pointer(unsafe.SliceData(b))
	stages.Lock()
	if stages.kept+c <= maxPinnedKept {
		if stages.free == nil {
			stages.free = map[int][]unsafe.Pointer{}
		}
		stages.free[c] = append(stages.free[c], p)
		stages.kept += c
		stages.Unlock()
		return
	}
	stages.Unlock()
	C.mc_cuda_host_free(p)
}
