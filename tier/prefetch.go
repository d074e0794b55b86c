package tier

import (
	"fmt"

	"github.com/mooncake-go/mooncake/internal/base"
	"github.com/mooncake-go/mooncake/tier/policy"
)

// PrefetchResult says what Prefetch did.
type PrefetchResult uint8

const (
	// PrefetchPromoted: the object was read from the lower tier and is now in DRAM.
	PrefetchPromoted PrefetchResult = iota
	// PrefetchInDRAM: the object already had a DRAM copy; nothing was read.
	PrefetchInDRAM
	// PrefetchSkipped: read, but not kept (the object was removed, replaced or brought into
	// DRAM by another path meanwhile, or the engine closed).
	PrefetchSkipped
)

// Prefetch promotes version v (0: any) of key from the lower tier to DRAM now, without
// waiting for the PromoteOnHit'th hit (prefetch on exist: a client announced a read). It
// takes the DRAM range as a Put does (evicting inline, waiting for spills), then promotes
// through the read path, so exclusive tiers move the object as any promotion does
// ("Exclusive tiers" in docs/tier.md). It is not a read: no hit is counted. It blocks on
// I/O; the worker calls it from a bounded background pool.
//
// Errors: base.ErrObjectNotFound, base.ErrInvalidVersion, base.ErrNoSpace (no room in DRAM),
// lower-tier read errors, ErrClosed.
func (e *Engine) Prefetch(key string, v base.Version) (PrefetchResult, error) {
	e.mu.Lock()
	o, err := e.lookupLocked(key, v)
	if err != nil {
		e.mu.Unlock()
		return PrefetchSkipped, err
	}
	if o.copy != nil || e.mu.pol.Location(o.id) != policy.LocLower {
		e.mu.Unlock()
		return PrefetchInDRAM, nil
	}
	meta := o.meta
	e.mu.Unlock()
	if meta.Size > e.arena.Capacity() {
		// Said here rather than by allocate, which counts it as a put refused (NoSpace*).
		return PrefetchSkipped, fmt.Errorf("%w: %w: prefetch of %q (%d bytes): larger than the DRAM arena (%d bytes)",
			base.ErrNoSpace, base.ErrTooLarge, key, meta.Size, e.arena.Capacity())
	}
	h, err := e.allocate(meta.Size)
	if err != nil {
		return PrefetchSkipped, err
	}
	e.mu.Lock()
	// allocate counts a Writer; this range is a read's (readLower unreserves it).
	e.mu.writers--
	e.mu.writerBytes -= meta.Size
	e.mu.Unlock()
	r, err := e.readLower(o, meta, h, true, false)
	if err != nil {
		return PrefetchSkipped, err
	}
	res := PrefetchSkipped
	if r.c != nil {
		res = PrefetchPromoted
	}
	r.Release()
	e.mu.Lock()
	if res == PrefetchPromoted {
		e.mu.m.prefetched++
	}
	e.mu.Unlock()
	return res, nil
}

// Info describes version v (0: any) of key. Errors: base.ErrObjectNotFound,
// base.ErrInvalidVersion, ErrClosed.
func (e *Engine) Info(key string, v base.Version) (ObjectInfo, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	o, err := e.lookupLocked(key, v)
	if err != nil {
		return ObjectInfo{}, err
	}
	return e.infoLocked(o), nil
}
