package tier

import (
	"errors"
	"fmt"

	"github.com/mooncake-go/mooncake/internal/base"
	"github.com/mooncake-go/mooncake/internal/invariants"
	"github.com/mooncake-go/mooncake/tier/policy"
)

// lowerEvictRounds bounds how often one write to the lower tier evicts and tries again:
// each round asks for twice the bytes of the one before (the lower tier's records take more
// than the objects' sizes, and deleted extent space may come back only once punched or
// collected), so a few rounds cover any write that room can be made for.
const lowerEvictRounds = 4

// putLower writes an object to the lower tier (putLowerOnce). When the lower tier refuses it
// for lack of room (base.ErrNoSpace), the lower tier evicts its own least recently used
// objects to make room (evictLower) and the write is tried again, so a full NVMe tier keeps
// the objects spilled last rather than those spilled first. REQUIRES: m.Key's lock.
func (e *Engine) putLower(m base.ObjectMeta, data []byte, sync bool, tag uint16) error {
	err := e.putLowerOnce(m, data, sync, tag)
	need := m.Size
	for round := 0; round < lowerEvictRounds && errors.Is(err, base.ErrNoSpace); round++ {
		if !e.evictLower(need) {
			return err
		}
		err = e.putLowerOnce(m, data, sync, tag)
		need *= 2
	}
	return err
}

// evictLower deletes lower-tier-only objects, least recently used first, until their sizes
// add up to need (Policy.EvictLower decides which: never durable objects, objects found at
// Open, hard-pinned ones, or keys whose lock is held, the caller's own among them). Each
// leaves the index and is reported lost (Events.ObjectLost), so the master drops the replica.
// It reports whether anything was evicted. Called without mu, holding one key's lock: a
// victim's lock is only ever taken when free, never waited for.
func (e *Engine) evictLower(need int64) bool {
	type victim struct {
		meta   base.ObjectMeta
		unlock func()
	}
	var vs []victim
	e.mu.Lock()
	if !e.mu.closed {
		busy := func(id policy.ID) bool {
			o := e.mu.byID[id]
			if o == nil {
				return true
			}
			_, locked := e.mu.keyLocks[o.meta.Key]
			return locked
		}
		for _, v := range e.mu.pol.EvictLower(need, busy) {
			o := e.mu.byID[v.ID]
			unlock, ok := e.tryLockKeyLocked(o.meta.Key) // free: busy said so, under the same mu
			if !ok {
				e.log.Error("tier: lower-tier eviction", "err",
					invariants.AssertionFailedf("tier: the key lock of victim %q is held", o.meta.Key))
				unlock = func() {}
			}
			if _, err := e.removeLocked(o); err != nil { // no DRAM copy: nothing to release
				e.log.Error("tier: lower-tier eviction", "err", err)
			}
			e.mu.m.lowerEvictions++
			e.mu.m.lowerEvictedBytes += o.meta.Size
			vs = append(vs, victim{o.meta, unlock})
		}
		e.verifyLocked()
	}
	e.mu.Unlock()
	for _, v := range vs {
		if err := e.deleteLowerKeyLocked(v.meta); err != nil {
			e.backgroundError(fmt.Errorf("tier: evicting from the lower tier: %w", err))
		}
		v.unlock()
		e.lost(v.meta, "evicted from the lower tier (least recently used) to make room")
	}
	return len(vs) > 0
}
