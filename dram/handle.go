package dram

import (
	"errors"
	"fmt"
	"sync/atomic"

	"github.com/mooncake-go/mooncake/internal/invariants"
)

// Handle is a refcounted reference to one allocated range of an Arena. Alloc returns it with
// one reference. Retain adds one; Release drops one; the range goes back to the allocator,
// and may be handed out again, when the last reference is released, never earlier.
//
// Who releases: whoever holds a reference. The code that calls Alloc or Retain owns the
// reference it got and must either Release it or hand it to exactly one other owner (and
// document that hand-off). A reader that must keep the bytes across a concurrent removal
// Retains before the remover can Release, and Releases when done.
//
// Handles are goroutine-safe; the bytes are not synchronized: coordinate writers and readers
// of the same range outside this package.
type Handle struct {
	arena *Arena
	al    allocation
	n     int64 // requested length
	// refs is the number of holders. Invariant: once it reaches 0 it stays 0 (Retain never
	// revives a handle), so a zero means "freed" forever and a Handle is never reused.
	refs atomic.Int32
}

// Bytes returns the range: len == the size passed to Alloc, cap == len. The slice points
// outside the Go heap and is valid only while the caller holds a reference; after the last
// Release it may be handed out to another owner, and after Close it is unmapped. Bytes of a
// released handle returns nil.
func (h *Handle) Bytes() []byte {
	if h == nil || h.arena == nil || h.refs.Load() <= 0 {
		return nil
	}
	off := h.al.off
	return h.arena.mem[off : off+h.n : off+h.n]
}

// Offset returns the range's first byte as an offset in the arena.
func (h *Handle) Offset() int64 { return h.al.off }

// Len returns the size passed to Alloc.
func (h *Handle) Len() int64 { return h.n }

// Allocated returns the bytes the range takes from the arena: Len rounded up to the
// allocator's alignment and size quantum (what Stats().Used counts for it).
func (h *Handle) Allocated() int64 { return h.al.size }

// Refs returns the current number of references (for metrics and tests; racy by nature).
func (h *Handle) Refs() int32 { return h.refs.Load() }

// Retain adds a reference, which the caller then owns and must Release. Retaining a handle
// whose last reference is gone is a bug: it returns an error wrapping ErrReleased (an
// assertion in invariants builds) and does not revive the handle.
func (h *Handle) Retain() error {
	if h == nil || h.arena == nil {
		return foreign(h)
	}
	for {
		r := h.refs.Load()
		if r <= 0 {
			return errors.Join(fmt.Errorf("%w: Retain at offset %d", ErrReleased, h.al.off),
				invariants.AssertionFailedf("dram: Retain of a released handle (offset %d)", h.al.off))
		}
		if r == 1<<31-1 {
			return invariants.AssertionFailedf("dram: refcount overflow (offset %d)", h.al.off)
		}
		if h.refs.CompareAndSwap(r, r+1) {
			return nil
		}
	}
}

// Release drops the caller's reference; the last one frees the range. Releasing more often
// than Alloc+Retain returned references is a bug: it returns an error wrapping ErrReleased
// (an assertion in invariants builds) and changes nothing. Releasing a nil or zero Handle
// returns ErrForeignHandle (also an assertion).
func (h *Handle) Release() error {
	if h == nil || h.arena == nil {
		return foreign(h)
	}
	for {
		r := h.refs.Load()
		if r <= 0 {
			return errors.Join(fmt.Errorf("%w: Release at offset %d", ErrReleased, h.al.off),
				invariants.AssertionFailedf("dram: double Release (offset %d)", h.al.off))
		}
		if h.refs.CompareAndSwap(r, r-1) {
			if r == 1 {
				return h.arena.free(h)
			}
			return nil
		}
	}
}

func foreign(h *Handle) error {
	return errors.Join(fmt.Errorf("%w: %p", ErrForeignHandle, h),
		invariants.AssertionFailedf("dram: use of a handle no arena handed out (%p)", h))
}
