package tier

import (
	"errors"
	"fmt"

	"github.com/mooncake-go/mooncake/dram"
	"github.com/mooncake-go/mooncake/internal/base"
	"github.com/mooncake-go/mooncake/internal/invariants"
	"github.com/mooncake-go/mooncake/tier/policy"
)

// Reader is a pinned view of one object version: its bytes cannot be freed or reused until
// Release, whatever eviction, spill, replacement or removal happens meanwhile. It must be
// released exactly once; it may be read from several goroutines.
type Reader struct {
	e    *Engine
	meta base.ObjectMeta
	tier base.Tier
	// Exactly one of c (a DRAM copy, indexed or not), tmp (a temporary DRAM range this Reader
	// owns) and heap (a Go buffer, when the arena had no room for a lower-tier read) is set.
	c    *dramCopy
	tmp  *dram.Handle
	heap []byte
	done bool
}

// Meta returns the object's key, version, size and checksum.
func (r *Reader) Meta() base.ObjectMeta { return r.meta }

// Tier returns where the read was served from: TierDRAM, or TierNVMe for a lower-tier hit
// (whose bytes were read into DRAM or a temporary buffer first).
func (r *Reader) Tier() base.Tier { return r.tier }

// Bytes returns the object's bytes, valid until Release. Do not modify them.
func (r *Reader) Bytes() []byte {
	switch {
	case r.c != nil:
		return r.c.h.Bytes()
	case r.tmp != nil:
		return r.tmp.Bytes()
	}
	return r.heap
}

// ArenaOffset returns where Bytes lie in the engine's DRAM arena, and true, when they are a
// range of it: a DRAM hit (the object's DRAM copy) or a lower-tier hit read into a DRAM range.
// It returns false when the bytes are in a Go buffer (a lower-tier hit while the arena was
// full). The offset is valid exactly as long as Bytes: until Release. With a shared arena
// (dram.Options.Shared) a process that maps the arena (dram.Arena.Share) finds the object's
// Meta().Size bytes at this offset.
func (r *Reader) ArenaOffset() (off int64, ok bool) {
	switch {
	case r.c != nil:
		return r.c.h.Offset(), true
	case r.tmp != nil:
		return r.tmp.Offset(), true
	}
	return 0, false
}

// Release ends the read; the bytes must not be used afterwards. A second Release is a bug (an
// assertion in invariants builds) and otherwise does nothing.
func (r *Reader) Release() {
	if r.done {
		_ = invariants.AssertionFailedf("tier: Reader of %q released twice", r.meta.Key)
		return
	}
	r.done = true
	e := r.e
	e.mu.Lock()
	defer e.mu.Unlock()
	var err error
	switch {
	case r.c != nil:
		err = e.releaseHolderLocked(r.c, true)
	case r.tmp != nil:
		e.mu.pol.Unreserve(r.tmp.Len())
		err = r.tmp.Release()
		e.signalSpaceLocked()
	}
	if err != nil {
		e.log.Error("tier: releasing a reader", "key", r.meta.Key, "err", err)
	}
	e.verifyLocked()
}

// Get returns a Reader of key at version v (0: any). A DRAM hit pins the DRAM copy; a
// lower-tier hit reads the object into a DRAM range (a Go buffer if the arena is full) and,
// on its PromoteOnHit'th hit, keeps that range as the object's DRAM copy (promotion).
// The caller must Release the Reader.
//
// Errors: base.ErrObjectNotFound, base.ErrInvalidVersion, base.ErrCorruption (the lower tier
// found the bytes corrupt; the object is dropped from the index), other lower-tier errors,
// ErrClosed.
func (e *Engine) Get(key string, v base.Version) (*Reader, error) {
	e.mu.Lock()
	o, r, err := e.lookupReadLocked(key, v)
	if o == nil {
		e.mu.Unlock()
		return r, err
	}
	hit := e.mu.pol.Hit(o.id)
	if c := o.copy; c != nil {
		r, err := e.holdLocked(o, c)
		e.mu.Unlock()
		return r, err
	}
	meta := o.meta
	// Try a DRAM range for the read, without evicting: a read must not push out objects.
	h, aerr := e.arena.Alloc(meta.Size)
	if aerr == nil {
		e.mu.pol.Reserve(meta.Size)
	}
	e.mu.Unlock()
	return e.readLower(o, meta, h, hit.Promote, true)
}

// Touch records a read of key at version v (0: any) that a client on this host served itself
// by copying the object's DRAM copy out of the shared arena without pinning it (the worker's
// ShmTouch): a DRAM hit for the eviction order and the hit counters. It reports false, and
// records nothing, when the object has no DRAM copy (spilled or evicted since: the bytes the
// client remembers are no longer the object's). Errors: base.ErrObjectNotFound,
// base.ErrInvalidVersion, ErrClosed.
func (e *Engine) Touch(key string, v base.Version) (inDRAM bool, err error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	o, err := e.lookupLocked(key, v)
	if err != nil || o.copy == nil {
		return false, err
	}
	e.mu.pol.Hit(o.id)
	e.mu.m.hitsDRAM++
	return true, nil
}

// GetDRAM is Get for an object that is in DRAM: it never reads a lower tier, so it does not
// block on I/O. ok is false, and nothing happened, when version v of key is committed but
// not in DRAM: the caller then uses Get. With ok true, r and err are what Get returns.
func (e *Engine) GetDRAM(key string, v base.Version) (r *Reader, ok bool, err error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	o, r, err := e.lookupReadLocked(key, v)
	if o == nil {
		return r, true, err // a superseded version (supersede.go) is always in DRAM
	}
	c := o.copy
	if c == nil {
		return nil, false, nil
	}
	e.mu.pol.Hit(o.id)
	r, err = e.holdLocked(o, c)
	return r, true, err
}

// lookupReadLocked finds what a read of key at v serves: the current object (o != nil), or
// else a kept superseded version already held for the read (r, supersede.go), or the miss
// (err, counted unless the engine is closed). REQUIRES: e.mu.
func (e *Engine) lookupReadLocked(key string, v base.Version) (o *object, r *Reader, err error) {
	o, err = e.lookupLocked(key, v)
	if err == nil {
		return o, nil, nil
	}
	if !errors.Is(err, ErrClosed) {
		if r, ok, serr := e.holdSupLocked(key, v); ok {
			return nil, r, serr
		}
		e.mu.m.misses++
	}
	return nil, nil, err
}

// holdLocked makes a Reader of DRAM copy c of o. REQUIRES: e.mu.
func (e *Engine) holdLocked(o *object, c *dramCopy) (*Reader, error) {
	if err := e.addHolderLocked(c, true); err != nil {
		return nil, fmt.Errorf("tier: get %q: %w", o.meta.Key, err)
	}
	e.mu.m.hitsDRAM++
	return &Reader{e: e, meta: o.meta, tier: base.TierDRAM, c: c}, nil
}

// readLower serves a lower-tier hit into h (a reserved DRAM range, or nil: a Go buffer) and
// promotes it if asked and possible. countHit is false for warm-up reads, which are not hits.
func (e *Engine) readLower(o *object, meta base.ObjectMeta, h *dram.Handle, promote, countHit bool) (*Reader, error) {
	var buf []byte
	if h != nil {
		buf = h.Bytes()
	} else {
		buf = make([]byte, meta.Size)
	}
	if err := e.lower.ReadInto(meta.Key, meta.Version, buf); err != nil {
		if h != nil {
			e.mu.Lock()
			e.mu.pol.Unreserve(meta.Size)
			_ = h.Release()
			e.signalSpaceLocked()
			e.mu.Unlock()
		}
		return nil, e.readFailed(o, meta, err)
	}
	var after []func() // callbacks, run once mu is released
	defer func() {
		for _, f := range after {
			f()
		}
	}()
	e.mu.Lock()
	defer e.mu.Unlock()
	if countHit {
		e.mu.m.hitsNVMe++
	}
	r := &Reader{e: e, meta: meta, tier: base.TierNVMe}
	if h == nil {
		r.heap = buf
		if promote {
			e.mu.m.promotionsSkipped++
		}
		return r, nil
	}
	if promote && !e.mu.closed && e.mu.objects[meta.Key] == o && o.copy == nil &&
		e.mu.pol.Location(o.id) == policy.LocLower {
		// Hand-off: the read's reference to h becomes the index's; the Reader takes another.
		c := &dramCopy{h: h, id: o.id, size: meta.Size, attached: true}
		o.copy = c
		e.tallyLocked(o)
		e.mu.pol.Unreserve(meta.Size)
		release, err := e.mu.pol.Promoted(o.id)
		if err != nil {
			return nil, invariants.AssertionFailedf("tier: promote %q: %v", meta.Key, err)
		}
		e.mu.m.promotions++
		if release {
			// Exclusive tiers (tier/policy, "The lower tier"): the object moved to DRAM; its
			// lower-tier copy goes once mu is released.
			o.onLower, o.lowerBytes = false, 0
			e.tallyLocked(o)
			e.mu.m.promotionsMoved++
			after = append(after, func() { e.releaseLowerCopy(o, meta) })
		}
		if err := e.addHolderLocked(c, true); err != nil {
			return nil, fmt.Errorf("tier: get %q: %w", meta.Key, err)
		}
		r.c = c
		if e.ev.Promoted != nil {
			after = append(after, func() { e.ev.Promoted(meta) })
		}
		if e.mu.pol.NeedEviction() > 0 {
			after = append(after, e.kickEvictor)
		}
		e.verifyLocked()
		return r, nil
	}
	if promote {
		e.mu.m.promotionsSkipped++
	}
	r.tmp = h
	return r, nil
}

// releaseLowerCopy deletes the lower-tier record of version meta of o after a promotion
// moved o to DRAM (Policy.Promoted said releaseLower). It runs without mu, under the key's
// lock, so it cannot overtake a spill of o (evicted again meanwhile) that already wrote a
// new record: that one is kept. Until it runs the record is a complete copy a restart would
// index like any other. A failure is reported (BackgroundError): the record takes room
// until the key is removed or replaced.
func (e *Engine) releaseLowerCopy(o *object, meta base.ObjectMeta) {
	unlock := e.lockKey(meta.Key)
	defer unlock()
	e.mu.Lock()
	cur := e.mu.objects[meta.Key]
	// The record is o's own if o is current and neither spilled since (onLower) nor written
	// by a spill that ended (LocLower); or o has gone and the key holds no object of the same
	// version (a Delete of another version is refused by the lower tier anyway).
	del := cur == nil || cur.meta.Version != meta.Version ||
		(cur == o && !o.onLower && e.mu.pol.Location(o.id) != policy.LocLower)
	e.mu.Unlock()
	if !del {
		return
	}
	if err := e.deleteLowerKeyLocked(meta); err != nil {
		e.backgroundError(fmt.Errorf("tier: releasing the lower-tier copy of promoted %q: %w", meta.Key, err))
	}
}

// readFailed handles a failed lower-tier read of o. A commit of a newer version or a removal
// may have changed the lower tier under the read (they hold the key's lock while the index
// still shows o): after taking the key's lock the index is settled. If o is still current the
// lower tier cannot serve it (corrupt, lost): it is dropped from the index so the master learns
// the replica is gone, rather than sending every reader here.
func (e *Engine) readFailed(o *object, meta base.ObjectMeta, err error) error {
	unlock := e.lockKey(meta.Key)
	locked := true
	defer func() {
		if locked {
			unlock()
		}
	}()
	e.mu.Lock()
	if e.mu.objects[meta.Key] != o {
		e.mu.m.misses++
		e.mu.Unlock()
		return fmt.Errorf("%w: %q version %d (removed or replaced during the read)", base.ErrObjectNotFound, meta.Key, meta.Version)
	}
	e.mu.m.lowerErrors++
	var lost bool
	if errors.Is(err, base.ErrCorruption) || isGone(err) {
		if _, rerr := e.removeLocked(o); rerr != nil {
			err = errors.Join(err, rerr)
		}
		lost = true
	}
	e.mu.Unlock()
	unlock() // before the callback: a listener may touch the same key
	locked = false
	if lost {
		e.lost(meta, "lower tier read failed: "+err.Error())
	}
	return fmt.Errorf("tier: get %q from the lower tier: %w", meta.Key, err)
}
