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
	var vs []lowerVictim
	e.mu.Lock()
	if !e.mu.closed {
		vs = e.takeLowerVictimsLocked(e.mu.pol.EvictLower(need, e.lowerBusyLocked()))
		for _, v := range vs {
			e.mu.m.lowerEvictions++
			e.mu.m.lowerEvictedBytes += v.meta.Size
		}
		e.verifyLocked()
	}
	e.mu.Unlock()
	e.dropLowerVictims(vs, "evicted from the lower tier (least recently used) to make room")
	return len(vs) > 0
}

// lowerVictim is a lower-tier object the policy evicted: out of the index, its key locked.
type lowerVictim struct {
	meta   base.ObjectMeta
	unlock func()
}

// lowerBusyLocked returns the busy function of Policy.EvictLower and SpillPlan: objects
// unknown to the engine or whose key lock is held. REQUIRES: mu, for as long as it is used.
func (e *Engine) lowerBusyLocked() func(policy.ID) bool {
	return func(id policy.ID) bool {
		o := e.mu.byID[id]
		if o == nil {
			return true
		}
		_, locked := e.mu.keyLocks[o.meta.Key]
		return locked
	}
}

// takeLowerVictimsLocked takes the policy's lower-tier victims (chosen with lowerBusyLocked,
// under the same mu) out of the index, locking each one's key (free: busy said so).
func (e *Engine) takeLowerVictimsLocked(victims []policy.Victim) []lowerVictim {
	var vs []lowerVictim
	for _, v := range victims {
		o := e.mu.byID[v.ID]
		unlock, ok := e.tryLockKeyLocked(o.meta.Key)
		if !ok {
			e.log.Error("tier: lower-tier eviction", "err",
				invariants.AssertionFailedf("tier: the key lock of victim %q is held", o.meta.Key))
			unlock = func() {}
		}
		if _, err := e.removeLocked(o); err != nil { // no DRAM copy: nothing to release
			e.log.Error("tier: lower-tier eviction", "err", err)
		}
		vs = append(vs, lowerVictim{o.meta, unlock})
	}
	return vs
}

// dropLowerVictims deletes the victims from the lower tier, releases their key locks and
// reports them lost (why). Called without mu.
func (e *Engine) dropLowerVictims(vs []lowerVictim, why string) {
	for _, v := range vs {
		if err := e.deleteLowerKeyLocked(v.meta); err != nil {
			e.backgroundError(fmt.Errorf("tier: evicting from the lower tier: %w", err))
		}
		v.unlock()
		e.lost(v.meta, why)
	}
}
