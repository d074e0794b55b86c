package client

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/mooncake-go/mooncake/transfer"
)

// lookupCache remembers recent Lookup answers so hot gets skip the master round trip (design.md
// section 1: the client keeps "a short cache of lookups").
//
// Why a stale entry is safe: a get reads with the cached version, and the worker serves only
// that version (design.md section 2), so an entry made stale by an upsert or a remove on the
// same worker misses with base.ErrInvalidVersion or base.ErrObjectNotFound; the get then drops
// the entry and asks the master. The bytes it returns are always those of the cached version,
// verified against its checksum. What the cache adds is bounded staleness across clients: for
// up to ttl after another client replaced an object on a different worker, or removed it, a
// get may still read the old version while its worker holds it (the worker frees it after its
// next heartbeat). This client's own Put/Remove calls drop their keys, so a client always
// reads its own writes.
//
// Refresh ahead: a get that hits an entry in the last quarter of its life asks for it to be
// looked up again in the background (getcoalesce.go), so a key read again and again keeps a
// fresh entry and its gets never wait for the master. The new answer replaces the entry and
// expires ttl after its own lookup was sent: no answer is ever used longer than ttl after it
// was asked for, with or without refreshing.
type lookupCache struct {
	ttl time.Duration
	max int
	// gen counts invalidations. A get records it before its lookup and stores the answer only
	// if it is unchanged, so a lookup that raced with this client's own put or remove of the
	// key is never cached after the invalidation.
	gen atomic.Uint64
	mu  struct {
		sync.Mutex // protects m
		// m holds at most max entries; each expires ttl after its lookup was sent.
		m map[string]cachedLookup
	}
}

type cachedLookup struct {
	lr      *transfer.LookupResponse // never modified after it is cached
	expires time.Time
	// refreshing is set when a get asked for the entry to be refreshed; the refresh's
	// answer replaces the entry (clearing it), or refreshFailed clears it.
	refreshing bool
}

// newLookupCache returns a cache of up to max entries kept for ttl; nil (no cache) when ttl
// or max is not positive.
func newLookupCache(ttl time.Duration, max int) *lookupCache {
	if ttl <= 0 || max <= 0 {
		return nil
	}
	lc := &lookupCache{ttl: ttl, max: max}
	lc.mu.m = make(map[string]cachedLookup)
	return lc
}

// get returns the cached lookup of key if it has not expired.
func (lc *lookupCache) get(key string) (*transfer.LookupResponse, bool) {
	lr, ok, _ := lc.getRefresh(key)
	return lr, ok
}

// getRefresh is get that also says whether the caller should refresh the entry: it is in
// the last quarter of its life and no refresh was asked for since it was cached (the first
// caller to see that is told, the others are not).
func (lc *lookupCache) getRefresh(key string) (lr *transfer.LookupResponse, ok, refresh bool) {
	if lc == nil {
		return nil, false, false
	}
	now := time.Now()
	lc.mu.Lock()
	defer lc.mu.Unlock()
	e, ok := lc.mu.m[key]
	if !ok || now.After(e.expires) {
		return nil, false, false
	}
	if !e.refreshing && now.After(e.expires.Add(-lc.ttl/4)) {
		e.refreshing = true
		lc.mu.m[key] = e
		refresh = true
	}
	return e.lr, true, refresh
}

// refreshFailed clears the refreshing mark of keys whose refresh did not replace their
// entry, so a later get may ask again.
func (lc *lookupCache) refreshFailed(keys ...string) {
	lc.mu.Lock()
	defer lc.mu.Unlock()
	for _, k := range keys {
		if e, ok := lc.mu.m[k]; ok && e.refreshing {
			e.refreshing = false
			lc.mu.m[k] = e
		}
	}
}

// generation returns the value to pass to put for a lookup sent now.
func (lc *lookupCache) generation() uint64 {
	if lc == nil {
		return 0
	}
	return lc.gen.Load()
}

// put caches lr, a lookup of key sent at sent when the generation was gen, and reports
// whether it did.
func (lc *lookupCache) put(key string, lr *transfer.LookupResponse, gen uint64, sent time.Time) bool {
	if lc == nil {
		return false
	}
	lc.mu.Lock()
	defer lc.mu.Unlock()
	if lc.gen.Load() != gen {
		return false // an invalidation happened since the lookup was sent
	}
	if _, ok := lc.mu.m[key]; !ok && len(lc.mu.m) >= lc.max {
		// Full: drop expired entries, else an arbitrary one (map order), to stay bounded.
		now := time.Now()
		for k, e := range lc.mu.m {
			if now.After(e.expires) {
				delete(lc.mu.m, k)
			}
		}
		for k := range lc.mu.m {
			if len(lc.mu.m) < lc.max {
				break
			}
			delete(lc.mu.m, k)
		}
	}
	lc.mu.m[key] = cachedLookup{lr: lr, expires: sent.Add(lc.ttl)}
	return true
}

// drop forgets keys (after this client changed them, or when a read with a key's entry
// failed).
func (lc *lookupCache) drop(keys ...string) {
	if lc == nil || len(keys) == 0 {
		return
	}
	lc.mu.Lock()
	lc.gen.Add(1)
	for _, k := range keys {
		delete(lc.mu.m, k)
	}
	lc.mu.Unlock()
}

// clear forgets every entry (after RemoveByRegex or RemoveAll).
func (lc *lookupCache) clear() {
	if lc == nil {
		return
	}
	lc.mu.Lock()
	lc.gen.Add(1)
	clear(lc.mu.m)
	lc.mu.Unlock()
}
