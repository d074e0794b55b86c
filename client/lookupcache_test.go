package client

import (
	"bytes"
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mooncake-go/mooncake/internal/base"
	"github.com/mooncake-go/mooncake/transfer"
)

func TestLookupCache(t *testing.T) {
	if newLookupCache(-1, 10) != nil || newLookupCache(time.Second, 0) != nil {
		t.Fatal("a disabled cache must be nil")
	}
	var off *lookupCache // a nil cache is a no-op
	off.put("k", &transfer.LookupResponse{}, off.token("k"), time.Now())
	off.seed("k", &transfer.LookupResponse{}, off.token("k"), time.Now())
	if _, ok := off.get("k"); ok {
		t.Fatal("nil cache hit")
	}
	off.drop("k")
	off.clear()

	lc := newLookupCache(time.Hour, 3)
	lr := &transfer.LookupResponse{ObjectMeta: base.ObjectMeta{Version: 7}}
	lc.put("a", lr, lc.token("a"), time.Now())
	if got, ok := lc.get("a"); !ok || got != lr {
		t.Fatal("miss after put")
	}
	// Expired: sent two hours ago.
	lc.put("old", lr, lc.token("old"), time.Now().Add(-2*time.Hour))
	if _, ok := lc.get("old"); ok {
		t.Fatal("expired entry hit")
	}
	// A lookup sent before an invalidation is not cached.
	tok := lc.token("a")
	lc.drop("a")
	lc.put("a", lr, tok, time.Now())
	if _, ok := lc.get("a"); ok {
		t.Fatal("a lookup older than the invalidation was cached")
	}
	// Seeds: a change's commit caches what it committed unless key was invalidated since the
	// commit was sent; either way lookups sent before it are no longer cached.
	tok = lc.token("s")
	lookupTok := lc.token("s")
	lc.seed("s", lr, tok, time.Now())
	if got, ok := lc.get("s"); !ok || got != lr {
		t.Fatal("a seed was not cached")
	}
	if lc.put("s", &transfer.LookupResponse{}, lookupTok, time.Now()) {
		t.Fatal("a lookup sent before the seeding change was cached")
	}
	tok = lc.token("s")
	lc.drop("s") // this client removed s while its put was committing
	lc.seed("s", lr, tok, time.Now())
	if _, ok := lc.get("s"); ok {
		t.Fatal("a seed older than an invalidation was cached")
	}
	lc.seed("s", nil, lc.token("s"), time.Now()) // a change that failed: a drop
	if _, ok := lc.get("s"); ok {
		t.Fatal("a failed change left an entry")
	}
	// Bounded.
	for i := range 10 {
		lc.put(fmt.Sprint(i), lr, lc.token(fmt.Sprint(i)), time.Now())
		if n := len(lc.mu.m); n > 3 {
			t.Fatalf("%d entries, bound 3", n)
		}
	}
	if _, ok := lc.get("9"); !ok {
		t.Fatal("the newest entry was evicted")
	}
	lc.clear()
	if _, ok := lc.get("9"); ok || len(lc.mu.m) != 0 {
		t.Fatal("clear left entries")
	}
}

// TestLookupCacheRefreshMark: an entry in the last quarter of its life asks its first reader
// to refresh it, and nobody else until the refresh failed or replaced it.
func TestLookupCacheRefreshMark(t *testing.T) {
	lc := newLookupCache(time.Hour, 10)
	lr := &transfer.LookupResponse{ObjectMeta: base.ObjectMeta{Version: 1}}
	lc.put("young", lr, lc.token("young"), time.Now())
	if _, ok, refresh := lc.getRefresh("young"); !ok || refresh {
		t.Fatalf("young entry: hit %v refresh %v", ok, refresh)
	}
	lc.put("old", lr, lc.token("old"), time.Now().Add(-50*time.Minute))
	if _, ok, refresh := lc.getRefresh("old"); !ok || !refresh {
		t.Fatalf("old entry, first reader: hit %v refresh %v", ok, refresh)
	}
	if _, ok, refresh := lc.getRefresh("old"); !ok || refresh {
		t.Fatalf("old entry, second reader: hit %v refresh %v", ok, refresh)
	}
	lc.refreshFailed("old", "missing")
	if _, _, refresh := lc.getRefresh("old"); !refresh {
		t.Fatal("after a failed refresh the next reader must be asked again")
	}
	if !lc.put("old", &transfer.LookupResponse{ObjectMeta: base.ObjectMeta{Version: 2}}, lc.token("old"), time.Now()) {
		t.Fatal("refresh answer not stored")
	}
	if got, ok, refresh := lc.getRefresh("old"); !ok || refresh || got.Version != 2 {
		t.Fatalf("refreshed entry: %v %v %v", got, ok, refresh)
	}
}

// TestLookupCacheSeedAll: the keys of one batch put that share an invalidation stripe are all
// seeded (seedAll checks every token before it moves a counter); seeding them one after the
// other leaves the second out, which cost its first get a lookup (TestGetsWithoutLookups
// failed so, rarely: 3 keys, then 1,024 stripes).
func TestLookupCacheSeedAll(t *testing.T) {
	lc := newLookupCache(time.Hour, 100)
	pair := sharedStripeKeys(lc, "batch/", 1)
	a, b := pair[0], pair[1]
	lr := &transfer.LookupResponse{ObjectMeta: base.ObjectMeta{Version: 3}}
	sent := time.Now()

	ta, tb := lc.token(a), lc.token(b)
	lc.seed(a, lr, ta, sent)
	lc.seed(b, lr, tb, sent)
	if _, ok := lc.get(b); ok {
		t.Fatalf("one after the other: %q seeded although %q moved their stripe (the test's premise)", b, a)
	}

	ta, tb = lc.token(a), lc.token(b)
	lc.seedAll([]seedItem{{a, lr, ta}, {b, lr, tb}}, sent)
	for _, k := range []string{a, b} {
		if _, ok := lc.get(k); !ok {
			t.Fatalf("seedAll: %q (stripe shared with the other key) not cached", k)
		}
	}
	// An invalidation since a token was taken still keeps that key out.
	ta, tb = lc.token(a), lc.token(b)
	lc.drop(a)
	lc.seedAll([]seedItem{{a, lr, ta}, {b, lr, tb}}, sent)
	if _, ok := lc.get(a); ok {
		t.Fatal("seedAll cached a key invalidated since its token was taken")
	}
}

// TestBatchPutSeedsSharedStripes: a batch put whose keys share invalidation stripes leaves
// every committed placement in the cache, so the gets after it ask the master nothing.
func TestBatchPutSeedsSharedStripes(t *testing.T) {
	ctx := context.Background()
	f := newFakeCluster(1, 2)
	c := newFakeClient(t, f)
	keys := sharedStripeKeys(c.lookups, "kv/", 3)
	vals := make([][]byte, len(keys))
	for i := range vals {
		vals[i] = []byte(keys[i])
	}
	for i, err := range c.BatchPut(ctx, keys, vals, ReplicateConfig{}) {
		if err != nil {
			t.Fatalf("batch put %s: %v", keys[i], err)
		}
	}
	before := f.count(transfer.OpLookup) + f.count(transfer.OpBatchLookup)
	for i, k := range keys {
		got, err := c.Get(ctx, k)
		if err != nil || !bytes.Equal(got, vals[i]) {
			t.Fatalf("get %s: %q %v", k, got, err)
		}
	}
	if n := f.count(transfer.OpLookup) + f.count(transfer.OpBatchLookup) - before; n != 0 {
		t.Fatalf("%d lookups after a batch put of keys sharing stripes, want none", n)
	}
}

// sharedStripeKeys returns 2*pairs keys (prefix followed by a number), in pairs that share an
// invalidation stripe of lc: keys[0] and keys[1], keys[2] and keys[3], and so on.
func sharedStripeKeys(lc *lookupCache, prefix string, pairs int) []string {
	byStripe := map[*atomic.Uint64][]string{}
	var keys []string
	for i := 0; len(keys) < 2*pairs; i++ {
		k := fmt.Sprint(prefix, i)
		s := lc.stripe(k)
		byStripe[s] = append(byStripe[s], k)
		if len(byStripe[s]) == 2 {
			keys = append(keys, byStripe[s]...)
		}
	}
	return keys
}
