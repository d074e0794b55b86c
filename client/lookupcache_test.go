package client

import (
	"fmt"
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
