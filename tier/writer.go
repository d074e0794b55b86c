package tier

import (
	"errors"
	"fmt"
	"hash"
	"sync"
	"time"

	"github.com/mooncake-go/mooncake/dram"
	"github.com/mooncake-go/mooncake/internal/base"
	"github.com/mooncake-go/mooncake/tier/policy"
)

// Writer is a put in progress: an arena range the caller fills (the transfer layer reads the
// socket straight into Bytes()), invisible until Commit. It must end with exactly one Commit
// or Abort, from one goroutine. Bytes() may be filled by several goroutines at
// disjoint offsets (striped transfers) as long as every fill happens before that call.
type Writer struct {
	e       *Engine
	key     string
	v       base.Version
	size    int64
	persist base.Persistence // resolved
	o       PutOptions
	model   uint16 // o.Model's tag
	// h is the range; the Writer owns its one reference until Commit hands it to the index
	// (or Abort releases it).
	h    *dram.Handle
	done bool

	// sum hashes Bytes() in order as ranges are reported filled (Landed), so Commit finds
	// the checksum computed and makes no second pass over the object.
	sum struct {
		// Mutex protects the fields below. It is held while hashing: hashing is sequential,
		// so a Landed call whose range is next waits for the one hashing before it, and
		// Commit waits for any hashing in progress.
		sync.Mutex
		h    hash.Hash64 // nil until the first Landed
		next int64       // Bytes()[:next] is hashed
		// landed holds the ranges reported past next (offset -> length).
		landed map[int64]int64
		// broken: ranges overlapped or were reported twice; Commit hashes in one pass.
		broken bool
	}
}

// Put reserves size bytes of DRAM for key at version v and returns the Writer to fill them.
// When DRAM is full it evicts cold objects inline (dropping, or spilling and waiting for the
// spill, through the bounded spill queue); when nothing can be evicted it fails with an error
// wrapping base.ErrNoSpace that says why (all pinned, all in use, larger than the arena).
//
// Errors: base.ErrInvalidKey, base.ErrInvalidParams (size <= 0, bad mode), base.ErrInvalidVersion
// (v == 0, or v older than the committed version), base.ErrObjectAlreadyExists (v committed),
// base.ErrNotSupported (durable without a lower tier), base.ErrNoSpace, ErrClosed.
func (e *Engine) Put(key string, v base.Version, size int64, o PutOptions) (*Writer, error) {
	if err := base.ValidateKey(key); err != nil {
		return nil, err
	}
	if size <= 0 {
		return nil, fmt.Errorf("%w: tier: object size %d must be > 0", base.ErrInvalidParams, size)
	}
	if v == 0 {
		return nil, fmt.Errorf("%w: tier: put of %q needs a version", base.ErrInvalidVersion, key)
	}
	if o.SoftPinTTL < 0 {
		return nil, fmt.Errorf("%w: tier: negative soft pin TTL %v", base.ErrInvalidParams, o.SoftPinTTL)
	}
	persist, err := e.resolve(o.Persistence)
	if err != nil {
		return nil, err
	}
	e.mu.Lock()
	err = e.checkVersionLocked(key, v)
	var model uint16 // 0: no model, no lookup
	if o.Model != "" {
		model = e.internLocked(o.Model)
	}
	e.mu.Unlock()
	if err != nil {
		return nil, err
	}
	e.saveLabel(model) // before any copy of the object can reach the lower tier
	h, err := e.allocate(size)
	if err != nil {
		return nil, fmt.Errorf("tier: put %q (%d bytes): %w", key, size, err)
	}
	return &Writer{e: e, key: key, v: v, size: size, persist: persist, o: o, model: model, h: h}, nil
}

// resolve turns a per-put mode into the one used.
func (e *Engine) resolve(p base.Persistence) (base.Persistence, error) {
	switch p {
	case base.PersistenceDefault:
		p = e.opts.Persistence
	case base.PersistenceCache, base.PersistenceSpill, base.PersistenceDurable:
	default:
		return 0, fmt.Errorf("%w: tier: unknown persistence %d", base.ErrInvalidParams, p)
	}
	if e.lower == nil {
		if p == base.PersistenceDurable {
			return 0, fmt.Errorf("%w: tier: persistence durable needs a lower tier", base.ErrNotSupported)
		}
		p = base.PersistenceCache // spill without a lower tier can only drop
	}
	return p, nil
}

// checkVersionLocked refuses a put that cannot replace the committed version. REQUIRES: e.mu.
func (e *Engine) checkVersionLocked(key string, v base.Version) error {
	if e.mu.closed {
		return ErrClosed
	}
	if old := e.mu.objects[key]; old != nil {
		switch {
		case old.meta.Version == v:
			return fmt.Errorf("%w: %q version %d", base.ErrObjectAlreadyExists, key, v)
		case old.meta.Version > v:
			return fmt.Errorf("%w: %q is at version %d, newer than %d", base.ErrInvalidVersion, key, old.meta.Version, v)
		}
	}
	// A superseded version (supersede.go) counts too: the versions of a key ascend.
	if s := e.newestSupLocked(key); s != nil {
		switch {
		case s.meta.Version == v:
			return fmt.Errorf("%w: %q version %d", base.ErrObjectAlreadyExists, key, v)
		case s.meta.Version > v:
			return fmt.Errorf("%w: %q holds version %d, newer than %d", base.ErrInvalidVersion, key, s.meta.Version, v)
		}
	}
	return nil
}

// Bytes returns the destination range, len == size. Valid until Commit or Abort.
func (w *Writer) Bytes() []byte { return w.h.Bytes() }

// Landed reports that Bytes()[off:off+n] is filled and will not change again. The Writer
// hashes, in order, every range that has landed from the first byte not yet hashed, on the
// calling goroutine: a striped put is hashed while its later stripes are still arriving,
// and once every byte was reported Commit uses that checksum instead of a second pass over
// the object. Ranges may be reported in any order from several goroutines; ranges that
// overlap make Commit fall back to one pass. It must happen before Commit or Abort.
func (w *Writer) Landed(off, n int64) {
	s := &w.sum
	s.Lock()
	defer s.Unlock()
	if s.broken || n <= 0 {
		return
	}
	if off < s.next || off+n > w.size || s.landed[off] != 0 {
		s.broken = true
		return
	}
	if s.landed == nil {
		s.landed = make(map[int64]int64)
		s.h = base.NewChecksum()
	}
	s.landed[off] = n
	b := w.h.Bytes()
	for {
		n, ok := s.landed[s.next]
		if !ok {
			break
		}
		delete(s.landed, s.next)
		s.h.Write(b[s.next : s.next+n])
		s.next += n
	}
	if len(s.landed) > 0 {
		// A range starts inside one already hashed: the reports overlap.
		for o := range s.landed {
			if o < s.next {
				s.broken = true
			}
		}
	}
}

// checksum returns base.Checksum(Bytes()): the one Landed computed when every byte was
// reported, else a pass over the bytes.
func (w *Writer) checksum() uint64 {
	s := &w.sum
	s.Lock()
	defer s.Unlock()
	if !s.broken && s.h != nil && s.next == w.size && len(s.landed) == 0 {
		return s.h.Sum64()
	}
	return base.Checksum(w.h.Bytes())
}

// Commit verifies base.Checksum(Bytes()) == checksum (checksum 0: nothing to verify; the
// checksum is computed either way, for the object's meta, in a pass over the bytes unless
// Landed already hashed them all as they arrived) and makes the object visible,
// replacing an older version of the key. In durable mode it writes the lower tier (synced)
// first. On any error the Writer is aborted.
//
// With Options.KeepSuperseded the replaced version is kept (supersede.go): a commit whose
// replaced version is on the lower tier only needs DRAM room for it (base.ErrNoSpace
// otherwise).
//
// Errors: base.ErrCorruption (checksum mismatch), a lower-tier error (durable),
// base.ErrObjectAlreadyExists / base.ErrInvalidVersion (a concurrent put committed v or newer),
// ErrClosed, base.ErrInvalidParams (Writer already ended).
func (w *Writer) Commit(checksum uint64) error {
	if w.done {
		return fmt.Errorf("%w: tier: Writer already committed or aborted", base.ErrInvalidParams)
	}
	sum := w.checksum()
	if checksum != 0 && sum != checksum {
		w.e.mu.Lock()
		w.e.mu.m.checksumMismatches++
		w.e.mu.Unlock()
		w.Abort()
		return fmt.Errorf("%w: tier: %q version %d: checksum %#x, want %#x", base.ErrCorruption, w.key, w.v, sum, checksum)
	}
	return w.commit(sum)
}

// commit makes the filled range key's object at version v, with checksum sum, under the key
// lock: the durable copy first (putDurable), then, under e.mu, the replaced version out and
// the new one in (installLocked). On an error the Writer is aborted. Once the new version is
// committed, a failure to clean up the replaced one is not the caller's error: it goes to
// the engine's background errors after the key lock is released.
func (w *Writer) commit(sum uint64) (err error) {
	e := w.e
	var cleanupErr error // reported once the key lock is released
	defer func() {
		if err != nil {
			w.Abort()
		}
		if cleanupErr != nil {
			e.backgroundError(cleanupErr)
		}
	}()
	unlock, prev, held, err := e.lockKeyHoldingPrev(w.key, w.v)
	if err != nil {
		return err
	}
	defer unlock()
	if held != nil {
		defer func() {
			if held != nil {
				e.mu.Lock()
				if rerr := e.releaseHolderLocked(held, false); rerr != nil {
					cleanupErr = errors.Join(cleanupErr, rerr)
				}
				e.mu.Unlock()
			}
		}()
	}
	meta := base.ObjectMeta{Key: w.key, Version: w.v, Size: w.size, Checksum: sum}
	foot, err := w.putDurable(meta)
	if err != nil {
		return err
	}

	e.mu.Lock()
	if err := e.checkVersionLocked(w.key, w.v); err != nil {
		e.mu.Unlock()
		// Only Close can get here (the key lock excludes other commits). The durable copy, if
		// any, is a complete object the next Open indexes: harmless.
		return err
	}
	var oldLower bool
	var old base.ObjectMeta
	var errs []error
	var supHeld int64 // superseded bytes after keeping prev (0: not kept)
	if o := e.mu.objects[w.key]; o != nil {
		old = o.meta
		// A superseded version's lower-tier record stays while nothing replaced it there: a
		// restart before the master settles the key finds it.
		keepLower := held != nil && o == prev && o.onLower && w.persist != base.PersistenceDurable
		var derr error
		oldLower, derr = e.removeLocked(o)
		errs = append(errs, derr)
		e.mu.m.replaced++
		if held != nil && o == prev {
			e.supersedeLocked(o, held, keepLower) // the held reference becomes the slot's
			held = nil
			oldLower = oldLower && !keepLower
			supHeld = e.mu.supBytes
		}
	}
	w.installLocked(meta, foot)
	need := e.mu.pol.NeedEviction() > 0
	e.verifyLocked()
	e.mu.Unlock()
	if need {
		e.kickEvictor()
	}
	if supHeld > 0 {
		e.supersededHeld(supHeld)
	}
	if oldLower && (old.Version != w.v) {
		errs = append(errs, e.deleteLowerKeyLocked(old))
	}
	if err := errors.Join(errs...); err != nil {
		// The new version is committed; only the cleanup of the old one failed.
		cleanupErr = fmt.Errorf("tier: commit of %q replaced version %d: %w", w.key, old.Version, err)
	}
	return nil
}

// putDurable writes a durable put's object to the lower tier, synced, before the commit makes
// it visible, and returns the bytes it takes there (0, and nothing written, in the other
// modes). REQUIRES: the key lock (no other commit of the key writes the lower tier meanwhile).
func (w *Writer) putDurable(meta base.ObjectMeta) (int64, error) {
	if w.persist != base.PersistenceDurable {
		return 0, nil
	}
	e := w.e
	if err := e.putLower(meta, w.h.Bytes(), true, w.model); err != nil {
		e.mu.Lock()
		e.mu.m.lowerErrors++
		e.mu.Unlock()
		return 0, fmt.Errorf("tier: durable put of %q version %d: %w", w.key, w.v, err)
	}
	return e.footprint(meta), nil
}

// installLocked indexes the Writer's range as key's committed object (meta; foot bytes on the
// lower tier) and moves its accounting from the writers to the index and the policy. It ends
// the Writer. REQUIRES: e.mu and the key lock, with the replaced version already removed.
func (w *Writer) installLocked(meta base.ObjectMeta, foot int64) {
	e := w.e
	e.mu.nextID++
	o := &object{id: e.mu.nextID, meta: meta, persistence: w.persist, hardPin: w.o.HardPin,
		onLower: w.persist == base.PersistenceDurable, lowerBytes: foot, model: w.model}
	if w.o.SoftPinTTL > 0 {
		o.softUntil = e.opts.Now().Add(w.o.SoftPinTTL)
	}
	// Hand-off: the Writer's reference to the range becomes the index's.
	o.copy = &dramCopy{h: w.h, id: o.id, size: w.size, attached: true}
	w.done = true
	e.mu.objects[w.key] = o
	e.mu.byID[o.id] = o
	e.tallyLocked(o)
	e.mu.writers--
	e.mu.writerBytes -= w.size
	e.mu.pol.Unreserve(w.size)
	e.mu.pol.AddDRAM(policy.Object{ID: o.id, Size: w.size, Persistence: w.persist, OnLower: o.onLower,
		HardPin: o.hardPin, SoftPinUntil: unixNanos(o.softUntil), Tenant: base.TenantOf(w.key)})
	e.mu.m.commits++
	e.mu.m.committedBytes += w.size
}

// lockKeyHoldingPrev takes key's lock for the commit of version v and checks v. With
// KeepSuperseded it also holds the version being replaced (holdOld): that version stays
// readable until the master settles the key (supersede.go), so its bytes are held before
// anything can free them. One on the lower tier only needs a DRAM range: it is allocated
// without the key lock (allocate may wait for spills, which take key locks, and for the
// master's drops, which the worker applies through Remove, which may too), then the key is
// checked again. It returns the unlock function, the version found (nil: none) and the held
// copy of it (nil: nothing held); on an error the lock is not held.
func (e *Engine) lockKeyHoldingPrev(key string, v base.Version) (unlock func(), prev *object, held *dramCopy, err error) {
	var pre *dram.Handle // a range allocated for a lower-tier version, or nil; preSize bytes
	var preSize int64
	defer func() { // a range holdOld did not take (the key changed meanwhile)
		if pre != nil {
			e.mu.Lock()
			e.unallocateLocked(pre, preSize)
			e.mu.Unlock()
		}
	}()
	for {
		unlock = e.lockKey(key)
		e.mu.Lock()
		err = e.checkVersionLocked(key, v)
		prev = e.mu.objects[key]
		e.mu.Unlock()
		var need int64
		if err == nil && prev != nil && e.opts.KeepSuperseded {
			held, need, err = e.holdOld(prev, &pre, preSize)
		}
		if err != nil {
			unlock()
			return nil, nil, nil, err
		}
		if need == 0 {
			return unlock, prev, held, nil
		}
		unlock()
		if pre != nil {
			e.mu.Lock()
			e.unallocateLocked(pre, preSize)
			e.mu.Unlock()
			pre = nil
		}
		h, aerr := e.allocate(need)
		if aerr != nil {
			return nil, nil, nil, fmt.Errorf("tier: keeping %q version %d while a newer version is unsettled: %w", key, prev.meta.Version, aerr)
		}
		pre, preSize = h, need
	}
}

// Abort frees the range. Safe to call after Commit (no-op) and more than once.
func (w *Writer) Abort() {
	if w.done {
		return
	}
	w.done = true
	e := w.e
	e.mu.Lock()
	defer e.mu.Unlock()
	e.mu.m.aborts++
	e.unallocateLocked(w.h, w.size)
}

// unallocateLocked frees a range allocate returned (size bytes) and undoes its accounting.
// REQUIRES: e.mu.
func (e *Engine) unallocateLocked(h *dram.Handle, size int64) {
	e.mu.writers--
	e.mu.writerBytes -= size
	e.mu.pol.Unreserve(size)
	if err := h.Release(); err != nil {
		e.log.Error("tier: releasing an unused range", "err", err)
	}
	e.signalSpaceLocked()
}

// allocate gets a range of size bytes for a Writer, evicting inline when the arena is full:
// drops free bytes at once; spills are queued (waiting while the queue is full: writers wait)
// and the Put waits for them to end. It fails with an error wrapping base.ErrNoSpace when the
// policy finds nothing to evict; while superseded versions hold bytes it first waits up to
// Options.SupersededWait for the master's drops to release them (waitForSuperseded).
func (e *Engine) allocate(size int64) (*dram.Handle, error) {
	var sw supWait
	if size > e.arena.Capacity() {
		e.mu.Lock()
		e.mu.m.noSpace[policy.ReasonTooLarge]++
		e.mu.Unlock()
		return nil, fmt.Errorf("%w: %w: object of %d bytes is larger than the DRAM arena (%d bytes)",
			base.ErrNoSpace, base.ErrTooLarge, size, e.arena.Capacity())
	}
	for {
		e.mu.Lock()
		if e.mu.closed {
			e.mu.Unlock()
			return nil, ErrClosed
		}
		h, err := e.arena.Alloc(size)
		if err == nil {
			e.mu.writers++
			e.mu.writerBytes += size
			e.mu.pol.Reserve(size)
			need := e.mu.pol.NeedEviction() > 0
			e.mu.Unlock()
			if need {
				e.kickEvictor()
			}
			return h, nil
		}
		if !errors.Is(err, base.ErrNoSpace) {
			e.mu.Unlock()
			return nil, err
		}
		plan := e.mu.pol.Evict(size, e.opts.Now().UnixNano())
		if len(plan.Victims) > 0 {
			jobs, events := e.applyVictimsLocked(plan.Victims, EvictPressure)
			e.mu.Unlock()
			e.fireEvicted(events)
			if err := e.enqueue(jobs); err != nil {
				return nil, err
			}
			continue
		}
		// Wait rather than fail while spill jobs are queued or running: they free DRAM when
		// they end (their objects', or detached copies they still hold).
		if plan.NoSpace.Reason == policy.ReasonSpilling || e.spillQ.queuedBytes() > 0 {
			wait := e.mu.space
			e.mu.Unlock()
			select {
			case <-wait:
			case <-e.closeCh:
				return nil, ErrClosed
			}
			continue
		}
		st := e.arena.Stats()
		ns := plan.NoSpace
		// Superseded versions are reserved bytes to the policy; say them apart (they are
		// owed a drop, not held by a client).
		held := e.mu.supBytes
		ns.SupersededBytes, ns.ReservedBytes = held, max(ns.ReservedBytes-held, 0)
		waited, err := e.waitSupersededLocked(&sw, ns.Reason, held, st.Free, size)
		if err != nil {
			return nil, err
		}
		if waited {
			continue // e.mu was released
		}
		reason := ns.Reason
		if reason == policy.ReasonEmpty {
			e.mu.m.noSpaceFragmented++
		} else {
			e.mu.m.noSpace[reason]++
		}
		e.mu.Unlock()
		if reason == policy.ReasonEmpty {
			return nil, fmt.Errorf("%w: nothing left to evict and no free range of %d bytes (arena: %d free, largest free block %d)",
				base.ErrNoSpace, size, st.Free, st.LargestFree)
		}
		waitedFor := ""
		if sw.waited {
			waitedFor = fmt.Sprintf("; waited %v for the master's drops of superseded versions", e.opts.SupersededWait)
		}
		return nil, fmt.Errorf("%w: nothing can be evicted: %s; arena: %d of %d bytes used, largest free block %d%s",
			base.ErrNoSpace, ns, st.Used, st.Capacity, st.LargestFree, waitedFor)
	}
}

// supWait is one allocate's wait for superseded versions (waitSupersededLocked).
type supWait struct {
	deadline time.Time // set at the first wait: Options.SupersededWait in all
	waited   bool
}

// waitSupersededLocked waits, when waitForSuperseded says a Put that found nothing to evict
// should, until space is released (the master's drops of superseded versions) or the wait's
// time is up, telling the worker first (Events.SupersededHeld) so it fetches the drops owed.
// It returns true after waiting (e.mu released; the caller tries again) and false, with e.mu
// still held, when there is nothing to wait for. REQUIRES: e.mu.
func (e *Engine) waitSupersededLocked(sw *supWait, reason policy.Reason, held, free, size int64) (bool, error) {
	if !e.opts.KeepSuperseded || e.opts.SupersededWait <= 0 {
		return false, nil
	}
	now := time.Now()
	if sw.deadline.IsZero() {
		sw.deadline = now.Add(e.opts.SupersededWait)
	}
	left := sw.deadline.Sub(now)
	if !waitForSuperseded(reason, held, free, size, left) {
		return false, nil
	}
	if !sw.waited {
		sw.waited = true
		e.mu.m.supersededWaits++
	}
	wait := e.mu.space
	e.mu.Unlock()
	if f := e.ev.SupersededHeld; f != nil {
		f(held) // the worker fetches the drops owed now
	}
	t := time.NewTimer(left)
	defer t.Stop()
	select {
	case <-wait:
	case <-t.C:
	case <-e.closeCh:
		return true, ErrClosed
	}
	return true, nil
}

// applyVictimsLocked executes the index side of the policy's victims (the policy has already
// moved them): drops leave the index, copies are detached, spills become jobs holding their
// range. REQUIRES: e.mu.
func (e *Engine) applyVictimsLocked(vs []policy.Victim, why EvictReason) ([]*spillJob, []EvictInfo) {
	var jobs []*spillJob
	events := make([]EvictInfo, 0, len(vs))
	if len(vs) > 0 {
		e.mu.m.evictPasses++
	}
	for _, v := range vs {
		o := e.mu.byID[v.ID]
		if o == nil || o.copy == nil {
			e.backgroundError(fmt.Errorf("tier: policy chose victim %d that the index does not hold in DRAM", v.ID))
			continue
		}
		events = append(events, EvictInfo{Meta: o.meta, Action: v.Action.String(), Reason: why})
		e.mu.m.evictions[why]++
		e.mu.m.evictedBytes += o.meta.Size
		switch v.Action {
		case policy.ActionDrop:
			e.mu.m.evictDropped++
			delete(e.mu.objects, o.meta.Key)
			delete(e.mu.byID, o.id)
			if err := e.detachLocked(o); err != nil {
				e.log.Error("tier: eviction", "err", err)
			}
		case policy.ActionDropCopy:
			e.mu.m.evictCopies++
			if err := e.detachLocked(o); err != nil {
				e.log.Error("tier: eviction", "err", err)
			}
		case policy.ActionSpill:
			e.mu.m.evictSpilled++
			c := o.copy
			if err := e.addHolderLocked(c, false); err != nil {
				e.log.Error("tier: spill", "err", err)
				continue
			}
			jobs = append(jobs, &spillJob{obj: o, c: c, queued: time.Now()})
		}
	}
	e.verifyLocked()
	return jobs, events
}

// fireEvicted reports evictions; drops of whole objects are losses too.
func (e *Engine) fireEvicted(events []EvictInfo) {
	for _, ev := range events {
		if e.ev.Evicted != nil {
			e.ev.Evicted(ev)
		}
		if ev.Action == policy.ActionDrop.String() {
			e.lost(ev.Meta, "evicted from DRAM ("+ev.Reason.String()+") in cache mode")
		}
	}
}
