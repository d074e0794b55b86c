package transfer

import (
	"fmt"
	"sync"

	"github.com/mooncake-go/mooncake/internal/base"
)

// SharedArena is a read-only mapping of a worker's shared DRAM arena, made by a client on the
// worker's host (MapSharedArena). The client copies objects out of it at the offsets ShmPin
// gives, while the worker holds the pin: the bytes at those offsets cannot change until the
// lease is released.
//
// Ownership: MapSharedArena returns the mapping with one reference, owned by the caller (the
// client's per-worker state). Every reader Acquires before touching Bytes and Releases after;
// Close drops the owner's reference, and the mapping is unmapped when the last one is gone,
// so a copy in flight never faults on an unmapped page.
type SharedArena struct {
	info ShmOpenResponse
	mem  []byte

	mu     sync.Mutex // protects refs and mem after the mapping is made
	refs   int
	closed bool
}

// ArenaID returns the worker's arena id (ShmOpenResponse.ArenaID) this mapping shows.
func (a *SharedArena) ArenaID() uint64 { return a.info.ArenaID }

// Acquire adds a reference for one reader; false when the mapping is closed.
func (a *SharedArena) Acquire() bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.closed {
		return false
	}
	a.refs++
	return true
}

// Release drops a reader's reference (unmapping after Close when it was the last).
func (a *SharedArena) Release() {
	a.mu.Lock()
	a.refs--
	last := a.refs == 0
	a.mu.Unlock()
	if last {
		a.unmap()
	}
}

// Close drops the owner's reference; the mapping goes when the last reader releases.
func (a *SharedArena) Close() {
	a.mu.Lock()
	if a.closed {
		a.mu.Unlock()
		return
	}
	a.closed = true
	a.refs--
	last := a.refs == 0
	a.mu.Unlock()
	if last {
		a.unmap()
	}
}

// Bytes returns the n bytes at off. The caller holds a reference (Acquire) and a lease on
// that range; the slice is valid until its Release. Out-of-bounds ranges are an error
// wrapping base.ErrInvalidParams (a confused or hostile worker must not make the client
// fault).
func (a *SharedArena) Bytes(off, n int64) ([]byte, error) {
	if off < 0 || n < 0 || off > int64(len(a.mem)) || n > int64(len(a.mem))-off {
		return nil, fmt.Errorf("%w: shared arena range [%d, +%d) outside its %d bytes", base.ErrInvalidParams, off, n, len(a.mem))
	}
	return a.mem[off : off+n : off+n], nil
}
