package tier

import (
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/mooncake-go/mooncake/dram"
	"github.com/mooncake-go/mooncake/internal/base"
	"github.com/mooncake-go/mooncake/tier/policy"
)

// Superseded versions: why the engine keeps a replaced version.
//
// A worker commits version N+1 of a key locally (Writer.Commit) before the master commits it
// through raft (PutEnd). Until the master has decided, it may still list version N, which it
// acknowledged to N's writer: if N+1 then fails (revoked, refused, timed out, superseded) the
// master keeps listing N. So a commit that replaces a committed version keeps the old
// version's bytes aside, as one of the key's superseded versions, instead of freeing them. The
// master lists at most one version of a key and owes the worker a drop of every other version
// it placed there, so each kept version ends with one Remove:
//
//   - Get(key, N) serves it (a reader asks for the version its lookup returned);
//   - Remove(key, N) (the master's drop of N, owed once N+1 committed) releases it;
//   - Remove(key, N+1) (the master's drop of a put that never committed) removes N+1 and
//     restores the newest superseded version as the key's current one;
//   - Remove(key, 0) removes them all.
//
// Concurrent upserts of one key may leave several superseded versions (N, N+1, N+2 committed
// locally while the master decides): none waits for another, and the drops settle them in
// any order.
//
// What bounds the held bytes: each is owed a drop as soon as the master commits the version
// that replaced it, and the worker fetches those drops early rather than at its next
// heartbeat once they hold Options.SupersededFetchBytes (Events.SupersededHeld); so they are
// the upserts in flight plus the drops on their way (a round trip to the leader, a few
// milliseconds), not a heartbeat interval of upserts, which at GB/s outgrows an arena. Should
// they still fill DRAM, a Put that finds nothing else to evict waits for their drops
// (waitForSuperseded, at most Options.SupersededWait) instead of failing with ErrNoSpace at
// once: the bytes are owed back, and a correct upsert workload must not see "no space".
//
// The bytes are held in DRAM only: an old version that was on the lower tier only is read into
// a DRAM range first (a lower-tier write of N+1 replaces the key's record there). They count as
// reserved DRAM (Metrics.ReservedBytes, and Metrics.Superseded), which eviction cannot free.
type superseded struct {
	meta        base.ObjectMeta
	persistence base.Persistence
	hardPin     bool
	softUntil   time.Time
	model       uint16
	// c is detached from the index; the slot is one of its holders (so its bytes are
	// reserved in the policy until released).
	c *dramCopy
	// onLower: the lower tier may still hold this version's record (a restart then finds it);
	// it is deleted there (by version: a newer record is left alone) when the slot is released.
	onLower bool
}

// holdOld returns a DRAM copy of old's bytes held by the caller (one holder): old's own DRAM
// copy, or, when old is on the lower tier only, *pre (a range of preSize bytes the caller
// allocated, reserved in the policy) with old's bytes read into it; it then takes *pre (sets
// it nil). Holding it before the index changes means an eviction in between cannot free the
// bytes. need > 0: old is on the lower tier only and *pre does not fit; the caller allocates
// need bytes without the key's lock and calls again. nil, 0, nil: old cannot be held
// (unreadable); the commit goes on without keeping it. Called under the key's lock, without
// mu: it never allocates, so it never waits for a spill or a drop under that lock.
func (e *Engine) holdOld(old *object, pre **dram.Handle, preSize int64) (c *dramCopy, need int64, err error) {
	e.mu.Lock()
	if c := old.copy; c != nil {
		err := e.addHolderLocked(c, false)
		e.mu.Unlock()
		return c, 0, err
	}
	meta := old.meta
	if *pre == nil || preSize != meta.Size {
		e.mu.Unlock()
		return nil, meta.Size, nil
	}
	// allocate counted a Writer; the range is a held copy instead (still reserved).
	h := *pre
	*pre = nil
	e.mu.writers--
	e.mu.writerBytes -= meta.Size
	e.mu.Unlock()
	c = &dramCopy{h: h, size: meta.Size, holders: 1}
	if rerr := e.lower.ReadInto(meta.Key, meta.Version, h.Bytes()); rerr != nil {
		e.mu.Lock()
		e.mu.m.lowerErrors++
		_ = e.releaseHolderLocked(c, false)
		e.mu.Unlock()
		e.backgroundError(fmt.Errorf("tier: %q version %d replaced; its lower-tier copy is unreadable: %w", meta.Key, meta.Version, rerr))
		return nil, 0, nil
	}
	return c, 0, nil
}

// supersedeLocked keeps o (being replaced, already out of the index) as the newest of its
// key's superseded versions, in c (held by the caller, whose holder becomes the slot's).
// onLower: o's lower-tier record was left in place (the commit replacing o did not write the
// lower tier); whoever releases the slot deletes it (releaseSupLocked). REQUIRES: e.mu.
func (e *Engine) supersedeLocked(o *object, c *dramCopy, onLower bool) {
	e.mu.sup[o.meta.Key] = append(e.mu.sup[o.meta.Key], &superseded{meta: o.meta, persistence: o.persistence,
		hardPin: o.hardPin, softUntil: o.softUntil, model: o.model, c: c, onLower: onLower})
	e.mu.supBytes += o.meta.Size
	e.mu.m.superseded++
}

// waitForSuperseded decides whether a Put that found nothing to evict (reason) waits for
// superseded versions to be released by the master's drops rather than failing with
// ErrNoSpace: only when they hold bytes (held), when their release could make room for size
// bytes together with the arena's free bytes (free; else waiting for them cannot help), and
// while the Put's wait has time left (left, what remains of Options.SupersededWait).
func waitForSuperseded(reason policy.Reason, held, free, size int64, left time.Duration) bool {
	return reason == policy.ReasonAllInUse && held > 0 && held+free >= size && left > 0
}

// supersededHeld tells the worker (Events.SupersededHeld) that superseded versions hold held
// bytes, when that is at least Options.SupersededFetchBytes. Called without mu.
func (e *Engine) supersededHeld(held int64) {
	if f := e.ev.SupersededHeld; f != nil && held >= e.opts.SupersededFetchBytes {
		f(held)
	}
}

// supIndexLocked returns the position of key's superseded version v, or -1. REQUIRES: e.mu.
func (e *Engine) supIndexLocked(key string, v base.Version) int {
	return slices.IndexFunc(e.mu.sup[key], func(s *superseded) bool { return s.meta.Version == v })
}

// newestSupLocked returns key's newest superseded version (nil: none). REQUIRES: e.mu.
func (e *Engine) newestSupLocked(key string) *superseded {
	if l := e.mu.sup[key]; len(l) > 0 {
		return l[len(l)-1]
	}
	return nil
}

// takeSupLocked takes key's superseded version at position i out of the list; the caller
// owns the slot's holder. REQUIRES: e.mu.
func (e *Engine) takeSupLocked(key string, i int) *superseded {
	l := e.mu.sup[key]
	s := l[i]
	e.mu.supBytes -= s.meta.Size
	if l = slices.Delete(l, i, i+1); len(l) == 0 {
		delete(e.mu.sup, key)
	} else {
		e.mu.sup[key] = l
	}
	return s
}

// releaseSupLocked drops key's superseded version at position i. It appends the version to
// lower when its lower-tier record is the caller's to delete (deleteLower, outside mu).
// REQUIRES: e.mu.
func (e *Engine) releaseSupLocked(key string, i int, lower []base.ObjectMeta) ([]base.ObjectMeta, error) {
	s := e.takeSupLocked(key, i)
	if s.onLower {
		lower = append(lower, s.meta)
	}
	if e.ev.CopyDetached != nil {
		// Get served this version from its slot (a client may have pinned it there): its
		// range may be freed now, so clients must stop copying it unpinned.
		e.ev.CopyDetached(key)
	}
	return lower, e.releaseHolderLocked(s.c, false)
}

// releaseAllSupLocked drops every superseded version of key (see releaseSupLocked).
// REQUIRES: e.mu.
func (e *Engine) releaseAllSupLocked(key string, lower []base.ObjectMeta) ([]base.ObjectMeta, error) {
	var errs []error
	for len(e.mu.sup[key]) > 0 {
		var err error
		if lower, err = e.releaseSupLocked(key, 0, lower); err != nil {
			errs = append(errs, err)
		}
	}
	return lower, errors.Join(errs...)
}

// restoreLocked makes key's newest superseded version current again (the current one was
// just removed, or left without a Remove). The restored object is indexed in DRAM only; the
// caller settles its lower-tier state outside mu (settleRestoredLower). REQUIRES: e.mu, and
// key has no current object.
func (e *Engine) restoreLocked(key string) (*object, error) {
	s := e.takeSupLocked(key, len(e.mu.sup[key])-1)
	if err := s.c.h.Retain(); err != nil {
		_ = e.releaseHolderLocked(s.c, false)
		return nil, err
	}
	e.mu.nextID++
	o := &object{id: e.mu.nextID, meta: s.meta, persistence: s.persistence, hardPin: s.hardPin,
		softUntil: s.softUntil, model: s.model}
	o.copy = &dramCopy{h: s.c.h, id: o.id, size: s.meta.Size, attached: true}
	e.mu.objects[key] = o
	e.mu.byID[o.id] = o
	e.tallyLocked(o)
	e.mu.pol.AddDRAM(policy.Object{ID: o.id, Size: s.meta.Size, Persistence: o.persistence,
		HardPin: o.hardPin, SoftPinUntil: unixNanos(o.softUntil), Tenant: base.TenantOf(key)})
	e.mu.m.restored++
	// The slot's holder ends; the bytes are now the index's (readers of the old copy keep
	// theirs: the range is counted twice until they release, never freed under them).
	return o, e.releaseHolderLocked(s.c, false)
}

// holdSupLocked makes a Reader of key's superseded version v, if the key holds one.
// REQUIRES: e.mu.
func (e *Engine) holdSupLocked(key string, v base.Version) (*Reader, bool, error) {
	i := -1
	if v != 0 {
		i = e.supIndexLocked(key, v)
	}
	if i < 0 {
		return nil, false, nil
	}
	s := e.mu.sup[key][i]
	if err := e.addHolderLocked(s.c, false); err != nil {
		return nil, true, fmt.Errorf("tier: get %q: %w", key, err)
	}
	e.mu.m.hitsDRAM++
	return &Reader{e: e, meta: s.meta, tier: base.TierDRAM, c: s.c}, true, nil
}

// settleRestoredLower makes a restored object's lower-tier state true, under the key's lock:
// if the lower tier still holds its version (kept there while it was superseded) the object
// is marked on the lower tier; else a durable object is written there again (its record was
// replaced by a durable or spilled newer version), since its put was acknowledged as durable.
// A plain one stays in DRAM, to be spilled like any other. Called without mu.
func (e *Engine) settleRestoredLower(o *object) error {
	if e.lower == nil {
		return nil
	}
	unlock := e.lockKey(o.meta.Key)
	m, err := e.lower.Stat(o.meta.Key)
	if err == nil && m.Version == o.meta.Version {
		foot := e.footprint(o.meta)
		e.mu.Lock()
		if e.mu.byID[o.id] == o && !o.onLower && e.mu.pol.Location(o.id) == policy.LocDRAM {
			_ = e.mu.pol.MarkOnLower(o.id)
			o.onLower, o.lowerBytes = true, foot
			e.tallyLocked(o)
		}
		e.mu.Unlock()
		unlock()
		return nil
	}
	unlock()
	if o.persistence != base.PersistenceDurable {
		return nil
	}
	if _, err := e.spillOne(o); err != nil {
		return fmt.Errorf("tier: restoring durable %q version %d: %w", o.meta.Key, o.meta.Version, err)
	}
	return nil
}

// SupersededBytes returns the bytes superseded versions hold (Metrics.Superseded.Bytes,
// without the rest of Metrics).
func (e *Engine) SupersededBytes() int64 {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.mu.supBytes
}

// supUsageLocked sums the superseded versions. REQUIRES: e.mu.
func (e *Engine) supUsageLocked() Usage {
	var u Usage
	for _, l := range e.mu.sup {
		for _, s := range l {
			u.Objects++
			u.Bytes += s.meta.Size
		}
	}
	return u
}
