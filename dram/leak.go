package dram

import "runtime"

// Leak detection, in invariants builds only (a cleanup per allocation costs more than the
// allocation): after pebble's finalizer-based leak checks (its docs/memory.md, "Leak
// Detection"). When a Handle becomes unreachable while its range is still allocated, nobody
// can ever Release it: the range is leaked. The cleanup logs it at Error and counts it in
// Stats().LeakedAllocs. It does not free the range: a []byte from Bytes() may still point
// into it, and Bytes() slices do not keep the Handle alive.

// leakInfo is what the cleanup needs; it must not point to the Handle (or the cleanup would
// keep it alive forever).
type leakInfo struct {
	a  *Arena
	al allocation
	n  int64
}

// watchLeak registers h for leak detection.
func (a *Arena) watchLeak(h *Handle) {
	runtime.AddCleanup(h, func(li leakInfo) { li.a.leaked(li) }, leakInfo{a: a, al: h.al, n: h.n})
}

// leaked runs on the runtime's cleanup goroutine after a Handle was collected.
func (a *Arena) leaked(li leakInfo) {
	a.mu.Lock()
	live := !a.mu.closed && a.mu.alloc.check(li.al) == nil
	a.mu.Unlock()
	if !live {
		return // released before it was collected: the normal case
	}
	a.leaks.Add(1)
	a.logger.Error("dram: handle garbage-collected before its last Release: range leaked",
		"offset", li.al.off, "bytes", li.n)
}
