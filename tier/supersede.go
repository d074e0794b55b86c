package tier

import (
	"context"
	"fmt"
	"time"

	"github.com/mooncake-go/mooncake/internal/base"
	"github.com/mooncake-go/mooncake/tier/policy"
)

// Superseded versions: why the engine keeps a replaced version.
//
// A worker commits version N+1 of a key locally (Writer.Commit) before the master commits it
// through raft (PutEnd). Until the master has decided, it may still list version N, which it
// acknowledged to N's writer: if N+1 then fails (revoked, refused, timed out) the master keeps
// listing N. So a commit that replaces a committed version keeps the old version's bytes
// aside, as the key's superseded version, instead of freeing them:
//
//   - Get(key, N) serves it (a reader asks for the version its lookup returned);
//   - Remove(key, N) (the master's drop of N, owed once N+1 committed) releases it;
//   - Remove(key, N+1) (the master's drop of a put that never committed) removes N+1 and
//     restores N as the key's current version;
//   - Remove(key, 0) removes both.
//
// The bytes are held in DRAM only: an old version that was on the lower tier only is read into
// a DRAM range first (a lower-tier write of N+1 replaces the key's record there). They count as
// reserved DRAM (Metrics.ReservedBytes, and Metrics.Superseded), which eviction cannot free.
//
// At most one superseded version per key: while a key has one, a commit of a third version is
// refused with base.ErrUnavailable (the Writer is aborted); AwaitSettled lets the caller wait
// for the master's drop that settles the key first. Whenever a third version reaches a worker
// the master has already decided the current one (its reservation ended when the newer put
// started), so that drop is on its way.
type superseded struct {
	meta        base.ObjectMeta
	persistence base.Persistence
	hardPin     bool
	softUntil   time.Time
	model       uint16
	// c is detached from the index; the slot is one of its holders (so its bytes are
	// reserved in the policy until released).
	c *dramCopy
}

// errUnsettled refuses a third version of a key.
func errUnsettled(key string, cur, sup base.Version) error {
	return fmt.Errorf("%w: tier: %q: version %d replaced version %d and the master has not settled which one it keeps; retry",
		base.ErrUnavailable, key, cur, sup)
}

// Unsettled reports whether key holds a superseded version (a commit of a newer version would
// be refused until the master settles the key).
func (e *Engine) Unsettled(key string) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.mu.sup[key] != nil
}

// AwaitSettled waits until key holds no superseded version, or ctx ends (its error is
// returned), or the engine closes.
func (e *Engine) AwaitSettled(ctx context.Context, key string) error {
	for {
		e.mu.Lock()
		if e.mu.closed {
			e.mu.Unlock()
			return ErrClosed
		}
		if e.mu.sup[key] == nil {
			e.mu.Unlock()
			return nil
		}
		ch := e.mu.settled
		e.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		case <-e.closeCh:
			return ErrClosed
		}
	}
}

// holdOld returns a DRAM copy of old's bytes held by the caller (one holder): old's own DRAM
// copy, or a range read from the lower tier (reserved in the policy). Holding it before the
// index changes means an eviction in between cannot free the bytes. nil, nil: old cannot be
// held (unreadable); the commit goes on without keeping it. Called under the key's lock,
// without mu.
func (e *Engine) holdOld(old *object) (*dramCopy, error) {
	e.mu.Lock()
	if c := old.copy; c != nil {
		err := e.addHolderLocked(c, false)
		e.mu.Unlock()
		return c, err
	}
	meta := old.meta
	e.mu.Unlock()
	h, err := e.allocate(meta.Size)
	if err != nil {
		return nil, fmt.Errorf("tier: keeping %q version %d while a newer version is unsettled: %w", meta.Key, meta.Version, err)
	}
	// allocate counted a Writer; the range is a held copy instead (still reserved).
	e.mu.Lock()
	e.mu.writers--
	e.mu.writerBytes -= meta.Size
	e.mu.Unlock()
	c := &dramCopy{h: h, size: meta.Size, holders: 1}
	if rerr := e.lower.ReadInto(meta.Key, meta.Version, h.Bytes()); rerr != nil {
		e.mu.Lock()
		e.mu.m.lowerErrors++
		_ = e.releaseHolderLocked(c, false)
		e.mu.Unlock()
		e.backgroundError(fmt.Errorf("tier: %q version %d replaced; its lower-tier copy is unreadable: %w", meta.Key, meta.Version, rerr))
		return nil, nil
	}
	return c, nil
}

// supersedeLocked keeps o (being replaced, already out of the index) as key's superseded
// version, in c (held by the caller, whose holder becomes the slot's). REQUIRES: e.mu.
func (e *Engine) supersedeLocked(o *object, c *dramCopy) {
	e.mu.sup[o.meta.Key] = &superseded{meta: o.meta, persistence: o.persistence, hardPin: o.hardPin,
		softUntil: o.softUntil, model: o.model, c: c}
	e.mu.m.superseded++
}

// releaseSupLocked drops key's superseded version. REQUIRES: e.mu.
func (e *Engine) releaseSupLocked(key string) error {
	s := e.mu.sup[key]
	delete(e.mu.sup, key)
	close(e.mu.settled)
	e.mu.settled = make(chan struct{})
	return e.releaseHolderLocked(s.c, false)
}

// restoreLocked makes key's superseded version current again (the current one was just
// removed). The restored object is in DRAM only: its lower-tier copy, if it had one, was
// replaced. REQUIRES: e.mu.
func (e *Engine) restoreLocked(key string) error {
	s := e.mu.sup[key]
	if err := s.c.h.Retain(); err != nil {
		return err
	}
	e.mu.nextID++
	o := &object{id: e.mu.nextID, meta: s.meta, persistence: s.persistence, hardPin: s.hardPin,
		softUntil: s.softUntil, model: s.model}
	o.copy = &dramCopy{h: s.c.h, id: o.id, size: s.meta.Size, attached: true}
	e.mu.objects[key] = o
	e.mu.byID[o.id] = o
	e.tallyLocked(o)
	e.mu.pol.AddDRAM(policy.Object{ID: o.id, Size: s.meta.Size, Persistence: o.persistence,
		HardPin: o.hardPin, SoftPinUntil: unixNanos(o.softUntil)})
	e.mu.m.restored++
	// The slot's holder ends; the bytes are now the index's (readers of the old copy keep
	// theirs: the range is counted twice until they release, never freed under them).
	return e.releaseSupLocked(key)
}

// holdSupLocked makes a Reader of key's superseded version if it is at version v.
// REQUIRES: e.mu.
func (e *Engine) holdSupLocked(key string, v base.Version) (*Reader, bool, error) {
	s := e.mu.sup[key]
	if s == nil || v == 0 || s.meta.Version != v {
		return nil, false, nil
	}
	if err := e.addHolderLocked(s.c, false); err != nil {
		return nil, true, fmt.Errorf("tier: get %q: %w", key, err)
	}
	e.mu.m.hitsDRAM++
	return &Reader{e: e, meta: s.meta, tier: base.TierDRAM, c: s.c}, true, nil
}

// supUsageLocked sums the superseded versions. REQUIRES: e.mu.
func (e *Engine) supUsageLocked() Usage {
	var u Usage
	for _, s := range e.mu.sup {
		u.Objects++
		u.Bytes += s.meta.Size
	}
	return u
}
