package client

import (
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mooncake-go/mooncake/internal/base"
	"github.com/mooncake-go/mooncake/transfer"
)

// Reads from kept lookups (docs/protocol.md, "Reads from a kept lookup"): a get whose cached
// lookup is past its TTL but kept (lookupCache.getKept) reads the replica over TCP asking the
// worker to vouch for it (ReadRequest.Cached), and looks the key up only when refused.

// keptLookup returns key's kept lookup when a read through it would go over TCP to workers
// not backing off (keptBackoff): a worker on this host is read through shared memory, whose
// copies without a call cannot ask it to vouch, so those reads look up first as before.
func (c *Client) keptLookup(key string) (*transfer.LookupResponse, bool) {
	lr, ok := c.lookups.getKept(key)
	if !ok {
		return nil, false
	}
	now := time.Now()
	for _, r := range lr.Replicas {
		if !c.cfg.DisableSharedMemory && c.shm.host(r.Address) == hostSame {
			return nil, false
		}
		if !c.keptBackoff.allowed(r.Address, now) {
			return nil, false
		}
	}
	return lr, true
}

// keptRefused is told of a read from the kept lookup kept that failed with err, and of the
// fresh lookup of the same key (nil if it failed). A worker answers INVALID_VERSION both when
// its version is not the one asked for and when it cannot vouch now; the fresh lookup tells
// them apart: the same version means the object was not replaced or removed, so the workers
// refused to vouch, and kept reads to them back off. A worker built before the flag answers
// INVALID_PARAMS, and is backed off from the same way (for up to maxKeptBackoff at a time).
func (c *Client) keptRefused(kept *transfer.LookupResponse, err error, fresh *transfer.LookupResponse) {
	if fresh == nil || fresh.Version != kept.Version ||
		!errors.Is(err, base.ErrInvalidVersion) && !errors.Is(err, base.ErrInvalidParams) {
		return
	}
	now := time.Now()
	for _, r := range kept.Replicas {
		c.keptBackoff.refused(r.Address, now)
	}
}

// keptBackoff spaces the reads from kept lookups sent to workers that refused one because they
// could not vouch. A worker that cannot vouch now (a registration pending, a removal of many
// objects being dropped) usually cannot for a while, and each refused read costs a round trip
// before the lookup it ends in: at 64 KiB and 64 in flight, gets during a large removal ran
// at half the rate of gets that always look up. Keyed by worker address; the zero value is
// ready.
type keptBackoff struct {
	m sync.Map // address -> *workerBackoff
}

// workerBackoff is one worker's back-off.
type workerBackoff struct {
	until atomic.Int64 // UnixNano: no kept reads to the worker before it
	// step is the last back-off: doubled by a refusal after it ended, zeroed by a served read.
	step atomic.Int64
}

const (
	minKeptBackoff = 50 * time.Millisecond
	// maxKeptBackoff is about a heartbeat interval: a worker vouches again from its next
	// settled heartbeat answer.
	maxKeptBackoff = time.Second
)

// allowed reports whether a kept read may be sent to the worker at addr at now.
func (b *keptBackoff) allowed(addr string, now time.Time) bool {
	v, ok := b.m.Load(addr)
	return !ok || now.UnixNano() >= v.(*workerBackoff).until.Load()
}

// refused records a refusal by the worker at addr. Refusals while it backs off (the other
// reads of the same burst) do not lengthen it.
func (b *keptBackoff) refused(addr string, now time.Time) {
	v, _ := b.m.LoadOrStore(addr, new(workerBackoff))
	w := v.(*workerBackoff)
	old := w.until.Load()
	if now.UnixNano() < old {
		return
	}
	step := min(max(2*time.Duration(w.step.Load()), minKeptBackoff), maxKeptBackoff)
	if w.until.CompareAndSwap(old, now.Add(step).UnixNano()) {
		w.step.Store(int64(step))
	}
}

// served records a kept read the worker at addr served: its next refusal backs off from the
// shortest step again.
func (b *keptBackoff) served(addr string) {
	if v, ok := b.m.Load(addr); ok {
		if w := v.(*workerBackoff); w.step.Load() != 0 {
			w.step.Store(0)
		}
	}
}
