package client

import (
	"hash/maphash"
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
// Seeded entries: a put of this client caches the placement it committed (seed), and an
// exists asks the master for placements beside its answer and caches them, so a get after
// either (LMCache's contains then get, SGLang's batch_exists then batch_get_into) goes to the
// worker without a lookup. They are the same bounded-staleness answers as a lookup's: each
// expires ttl after the call that learned it was sent.
//
// Refresh ahead: a get that hits an entry in the last quarter of its life asks for it to be
// looked up again in the background (getcoalesce.go), so a key read again and again keeps a
// fresh entry and its gets never wait for the master. The new answer replaces the entry and
// expires ttl after its own lookup was sent: no answer is ever used longer than ttl after it
// was asked for, with or without refreshing.
type lookupCache struct {
	ttl time.Duration
	max int
	// gens count invalidations, per stripe of keys (genStripe). A get records its key's
	// before its lookup (token) and stores the answer only if it is unchanged, so a lookup
	// that raced with this client's own put or remove of the key is never cached after the
	// invalidation. Striped, so this client's puts of other keys (one invalidation each)
	// rarely keep a lookup out of the cache. Bumped under mu, read without it.
	gens  [genStripes]atomic.Uint64
	hseed maphash.Seed
	mu    struct {
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
	lc := &lookupCache{ttl: ttl, max: max, hseed: maphash.MakeSeed()}
	lc.mu.m = make(map[string]cachedLookup)
	return lc
}

// get returns the cached lookup of key if it has not expired. It asks for no refresh and
// marks none (a caller that reads through the entry uses getRefresh: a mark with nobody
// refreshing would keep every later reader from refreshing the entry).
func (lc *lookupCache) get(key string) (*transfer.LookupResponse, bool) {
	if lc == nil {
		return nil, false
	}
	lc.mu.Lock()
	defer lc.mu.Unlock()
	e, ok := lc.liveLocked(key, time.Now())
	return e.lr, ok
}

// liveLocked returns key's entry when it has not expired at now. REQUIRES: lc.mu.
func (lc *lookupCache) liveLocked(key string, now time.Time) (cachedLookup, bool) {
	e, ok := lc.mu.m[key]
	if !ok || now.After(e.expires) {
		return cachedLookup{}, false
	}
	return e, true
}

// keptLookupLife is how long an entry stays past its TTL for reads through it that ask the
// worker to vouch for it (ReadRequest.Cached: the worker serves the version only while it has
// heard from the leader within two heartbeats, so the drops it is owed have arrived;
// docs/protocol.md, "Reads from a kept lookup"). A key read once long after it was put or
// looked up then costs one round trip to its worker, not a lookup first.
const keptLookupLife = time.Minute

// getKept returns key's entry when it is past its TTL but kept (keptLookupLife): for a read
// with ReadRequest.Cached only.
func (lc *lookupCache) getKept(key string) (*transfer.LookupResponse, bool) {
	if lc == nil {
		return nil, false
	}
	now := time.Now()
	lc.mu.Lock()
	defer lc.mu.Unlock()
	e, ok := lc.mu.m[key]
	if !ok || !now.After(e.expires) || now.After(e.expires.Add(keptLookupLife)) {
		return nil, false
	}
	return e.lr, true
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
	e, ok := lc.liveLocked(key, now)
	if !ok {
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

// genStripes is the number of invalidation counters: two keys share one with probability
// 1/genStripes, and then an invalidation of one only keeps a racing answer of the other out
// of the cache. Every put ends with an invalidation of its key (seed), so a put's own seed
// is left out when another put of a key on its stripe ends during its PutEnd: with 1,024
// counters that was about 7 puts in 1,024 at concurrency 8, each costing its first get a
// lookup; with 16,384 it is under 1 in 2,000, for 128 KiB of counters per client.
const genStripes = 1 << 14

func (lc *lookupCache) stripe(key string) *atomic.Uint64 {
	return &lc.gens[maphash.String(lc.hseed, key)%genStripes]
}

// token returns the value to pass to put or seed for a lookup of key sent now.
func (lc *lookupCache) token(key string) uint64 {
	if lc == nil {
		return 0
	}
	return lc.stripe(key).Load()
}

// tokens returns token(k) for each of keys.
func (lc *lookupCache) tokens(keys []string) []uint64 {
	toks := make([]uint64, len(keys))
	for i, k := range keys {
		toks[i] = lc.token(k)
	}
	return toks
}

// put caches lr, a lookup of key sent at sent when key's token was tok, and reports whether
// it did.
func (lc *lookupCache) put(key string, lr *transfer.LookupResponse, tok uint64, sent time.Time) bool {
	if lc == nil {
		return false
	}
	lc.mu.Lock()
	defer lc.mu.Unlock()
	if lc.stripe(key).Load() != tok {
		return false // an invalidation happened since the lookup was sent
	}
	lc.insertLocked(key, lr, sent)
	return true
}

// seed ends a change of key by this client: like drop, it invalidates the lookups of key in
// flight; then, when lr is not nil (the change committed that object) and nothing else
// invalidated key since the commit was sent at sent with token tok, it caches lr.
func (lc *lookupCache) seed(key string, lr *transfer.LookupResponse, tok uint64, sent time.Time) {
	lc.seedAll([]seedItem{{key, lr, tok}}, sent)
}

// seedItem is one key of seedAll: what seed takes for it.
type seedItem struct {
	key string
	lr  *transfer.LookupResponse
	tok uint64
}

// seedAll is seed for the keys of one change (a batch put's commit, sent at sent). Every
// token is checked before any counter moves: two keys of the change that share a stripe must
// not invalidate each other's seed, as seeding them one after the other did (with 1,024
// stripes, about 8 of a batch of 128 keys were left out and cost their first get a lookup).
func (lc *lookupCache) seedAll(items []seedItem, sent time.Time) {
	if lc == nil || len(items) == 0 {
		return
	}
	lc.mu.Lock()
	defer lc.mu.Unlock()
	unchanged := make([]bool, len(items))
	for i, it := range items {
		unchanged[i] = lc.stripe(it.key).Load() == it.tok
	}
	for i, it := range items {
		lc.stripe(it.key).Add(1)
		delete(lc.mu.m, it.key)
		if it.lr != nil && unchanged[i] {
			lc.insertLocked(it.key, it.lr, sent)
		}
	}
}

// insertLocked caches lr for key until ttl after sent, making room when the cache is full.
// REQUIRES: lc.mu.
func (lc *lookupCache) insertLocked(key string, lr *transfer.LookupResponse, sent time.Time) {
	if _, ok := lc.mu.m[key]; !ok && len(lc.mu.m) >= lc.max {
		// Full: drop entries past their kept life, else an arbitrary one (map order), to
		// stay bounded.
		now := time.Now()
		for k, e := range lc.mu.m {
			if now.After(e.expires.Add(keptLookupLife)) {
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
}

// drop forgets keys (after this client changed them, or when a read with a key's entry
// failed).
func (lc *lookupCache) drop(keys ...string) {
	if lc == nil || len(keys) == 0 {
		return
	}
	lc.mu.Lock()
	for _, k := range keys {
		lc.stripe(k).Add(1)
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
	for i := range lc.gens {
		lc.gens[i].Add(1)
	}
	clear(lc.mu.m)
	lc.mu.Unlock()
}
