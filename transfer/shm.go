package transfer

import (
	"fmt"
	"sync"
	"sync/atomic"
	"unsafe"

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
	mapping
}

// ArenaID returns the worker's arena id (ShmOpenResponse.ArenaID) this mapping shows.
func (a *SharedArena) ArenaID() uint64 { return a.info.ArenaID }

// mapping is a shared-memory mapping with reference counts: the owner's one, and one per
// reader or writer between Acquire and Release. It is unmapped (and fd, when it holds one,
// closed) when the last reference is gone.
type mapping struct {
	mem []byte
	fd  int // -1: none (a client's mapping; the mapping alone keeps the file alive)
	// gen is a SharedArena's copy-generation table (ShmOpenResponse), mapped read-only and
	// unmapped with mem; nil otherwise, or when the worker has none (an older build) or it
	// could not be mapped.
	gen []byte

	mu     sync.Mutex // protects refs, closed, and mem after the mapping is made
	refs   int
	closed bool
}

// Acquire adds a reference for one reader; false when the mapping is closed.
func (a *mapping) Acquire() bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.closed {
		return false
	}
	a.refs++
	return true
}

// Release drops a reader's reference (unmapping after Close when it was the last).
func (a *mapping) Release() {
	a.mu.Lock()
	a.refs--
	last := a.refs == 0
	a.mu.Unlock()
	if last {
		a.unmap()
	}
}

// Close drops the owner's reference; the mapping goes when the last reader releases.
func (a *mapping) Close() {
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
// wrapping base.ErrInvalidParams (a confused or hostile peer must not make us fault).
func (a *mapping) Bytes(off, n int64) ([]byte, error) {
	if off < 0 || n < 0 || off > int64(len(a.mem)) || n > int64(len(a.mem))-off {
		return nil, fmt.Errorf("%w: shared memory range [%d, +%d) outside its %d bytes", base.ErrInvalidParams, off, n, len(a.mem))
	}
	return a.mem[off : off+n : off+n], nil
}

// Gen returns the copy generation of key's slot (ShmOpenResponse), read atomically; false
// when the worker publishes none. The caller holds a reference (Acquire).
func (a *SharedArena) Gen(key string) (uint64, bool) {
	if len(a.gen) != ShmGenSlots*8 {
		return 0, false
	}
	return (*atomic.Uint64)(unsafe.Pointer(&a.gen[ShmGenSlot(key)*8])).Load(), true
}

// ShmGenTable is a worker's copy-generation table: ShmGenSlots u64 counters (native byte
// order: only processes of this host read them) in a memfd that clients on this host map
// read-only (ShmOpenResponse's Gen fields). The worker Bumps a key's slot when a DRAM copy of
// the key stops being the object's, before its range can be freed. Close it after the last
// Bump (after the tier engine closed); clients' mappings keep the file alive for them.
type ShmGenTable struct {
	mapping  // read-write, ShmGenSlots*8 bytes; holds the memfd
	ino, dev uint64
}

// Bump increments key's slot. Safe for concurrent use, and cheap (one atomic add): the tier
// engine calls it under its lock.
func (t *ShmGenTable) Bump(key string) {
	(*atomic.Uint64)(unsafe.Pointer(&t.mem[ShmGenSlot(key)*8])).Add(1)
}

// Describe fills the Gen fields of a ShmOpen answer.
func (t *ShmGenTable) Describe(info *ShmOpenResponse) {
	info.GenFD, info.GenInode, info.GenDev, info.GenSize = int64(t.fd), t.ino, t.dev, int64(len(t.mem))
}
