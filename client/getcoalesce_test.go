package client

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/mooncake-go/mooncake/internal/base"
	"github.com/mooncake-go/mooncake/transfer"
)

// TestGetLookupsCoalesce: gets that miss the lookup cache while a lookup is in flight share
// one BatchLookup when it returns, gets of one key included; each gets its own object, and
// a missing key fails alone.
func TestGetLookupsCoalesce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		f := newFakeCluster(1, 2)
		c := newFakeClient(t, f)
		vals := map[string][]byte{}
		for i := range 6 {
			k := fmt.Sprintf("k%d", i)
			vals[k] = value(1000+i, byte(i))
			if err := c.Put(ctx, k, vals[k], ReplicateConfig{}); err != nil {
				t.Fatal(err)
			}
		}
		c.lookups.clear() // the puts seeded their placements: these gets must look up
		arrived, release := f.hold(transfer.OpLookup)
		var wg sync.WaitGroup
		errs := map[string]error{}
		var mu sync.Mutex
		get := func(k string) {
			wg.Add(1)
			go func() {
				defer wg.Done()
				got, err := c.Get(ctx, k)
				if err == nil && !bytes.Equal(got, vals[k]) {
					err = fmt.Errorf("wrong bytes for %s", k)
				}
				mu.Lock()
				errs[k] = err
				mu.Unlock()
			}()
		}
		get("k0")
		<-arrived // k0's Lookup is in flight, alone
		for _, k := range []string{"k1", "k2", "k3", "k4", "k5", "nope"} {
			get(k)
		}
		settle(t, "6 queued lookups", func() bool { return queued(&c.lookupBatch().calls) == 6 })
		// Gets of one key share the batch too (a lookup is a read).
		var dup [3]error
		for i := range dup {
			wg.Add(1)
			go func() {
				defer wg.Done()
				got, err := c.Get(ctx, "k1")
				if err == nil && !bytes.Equal(got, vals["k1"]) {
					err = errors.New("wrong bytes for k1")
				}
				dup[i] = err
			}()
		}
		settle(t, "9 queued lookups", func() bool { return queued(&c.lookupBatch().calls) == 9 })
		release()
		wg.Wait()
		for _, err := range dup {
			if err != nil {
				t.Fatalf("get k1 in a batch with other gets of k1: %v", err)
			}
		}
		for k, err := range errs {
			if k == "nope" {
				if !errors.Is(err, base.ErrObjectNotFound) {
					t.Fatalf("get of a missing key in a batch: %v", err)
				}
				continue
			}
			if err != nil {
				t.Fatalf("get %s: %v", k, err)
			}
		}
		// The fake serves a BatchLookup as one Lookup per key, counted too.
		if l, b := f.count(transfer.OpLookup)-9, f.count(transfer.OpBatchLookup); l != 1 || b != 1 {
			t.Fatalf("%d Lookup and %d BatchLookup calls, want 1 and 1", l, b)
		}
	})
}

// TestGetLookupRefreshAhead: a get that hits a cached lookup near its expiry reads with it at
// once and has the entry refreshed in the background, so later gets keep hitting; an object
// removed meanwhile by another client leaves the cache at its refresh.
func TestGetLookupRefreshAhead(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		f := newFakeCluster(1, 1)
		c := newFakeClient(t, f)
		other := newFakeClient(t, f)
		for _, k := range []string{"a", "b"} {
			if err := other.Put(ctx, k, value(100, 1), ReplicateConfig{}); err != nil {
				t.Fatal(err)
			}
		}
		ttl := c.lookups.ttl
		age := func(k string, by time.Duration) { // make k's entry as old as a lookup sent `by` ago
			c.lookups.mu.Lock()
			defer c.lookups.mu.Unlock()
			e := c.lookups.mu.m[k]
			e.expires = time.Now().Add(ttl - by)
			c.lookups.mu.m[k] = e
		}
		expiry := func(k string) (time.Time, bool) {
			c.lookups.mu.Lock()
			defer c.lookups.mu.Unlock()
			e, ok := c.lookups.mu.m[k]
			return e.expires, ok
		}
		for _, k := range []string{"a", "b"} {
			if _, err := c.Get(ctx, k); err != nil { // a miss: cached
				t.Fatal(err)
			}
			age(k, ttl*9/10)
		}
		lookups := f.count(transfer.OpLookup)
		old, _ := expiry("a")

		// The get does not wait for the refresh (the master holds it).
		arrived, release := f.hold(transfer.OpLookup)
		if got, err := c.Get(ctx, "a"); err != nil || !bytes.Equal(got, value(100, 1)) {
			t.Fatalf("get near expiry: %v", err)
		}
		<-arrived
		if _, err := c.Get(ctx, "a"); err != nil { // asks for no second refresh
			t.Fatal(err)
		}
		release()
		settle(t, "the refreshed entry", func() bool { e, _ := expiry("a"); return e.After(old) })
		if n := f.count(transfer.OpLookup); n != lookups+1 {
			t.Fatalf("%d lookups for one refresh", n-lookups)
		}

		// Removed by another client: the refresh drops the entry.
		if err := other.Remove(ctx, "b"); err != nil {
			t.Fatal(err)
		}
		// The cached version may still be read until the refresh answers (the documented
		// staleness: the fake's worker still holds it).
		if got, err := c.Get(ctx, "b"); err == nil && !bytes.Equal(got, value(100, 1)) {
			t.Fatal("get of b through the cache read other bytes")
		}
		settle(t, "b to leave the cache", func() bool { _, ok := expiry("b"); return !ok })
		if _, err := c.Get(ctx, "b"); !errors.Is(err, base.ErrObjectNotFound) {
			t.Fatalf("get after remove: %v", err)
		}
	})
}

// TestBatchGetLookupRefreshAhead: a batch get reads keys with cached lookups without a
// lookup, and refreshes those near their end of life in the background, as single gets do.
// BatchGetIntoNoWait (the C library's first pass of a batch get) asks for the refresh in
// the same way.
func TestBatchGetLookupRefreshAhead(t *testing.T) {
	for _, shm := range []bool{true, false} {
		t.Run(fmt.Sprintf("shared_memory=%v", shm), func(t *testing.T) { testBatchGetLookupRefreshAhead(t, shm, false) })
	}
	t.Run("nowait", func(t *testing.T) { testBatchGetLookupRefreshAhead(t, true, true) })
}

// testBatchGetLookupRefreshAhead: with shared memory on, a batch get first tries each key's
// no-call copy (copyNoWait), with it off it does not: both must ask for the refresh. With
// nowait the refresh is asked for by BatchGetIntoNoWait (which copies nothing here: the
// fake's workers share no memory).
func testBatchGetLookupRefreshAhead(t *testing.T, shm, nowait bool) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		f := newFakeCluster(1, 1)
		c := newFakeClient(t, f)
		c.cfg.DisableSharedMemory = !shm
		other := newFakeClient(t, f)
		keys := []string{"a", "b"}
		for _, k := range keys {
			if err := other.Put(ctx, k, value(100, 1), ReplicateConfig{}); err != nil {
				t.Fatal(err)
			}
		}
		bufs := [][]byte{make([]byte, 100), make([]byte, 100)}
		batch := func() {
			t.Helper()
			if _, errs := c.BatchGetInto(ctx, keys, bufs); errs[0] != nil || errs[1] != nil {
				t.Fatalf("batch get: %v", errs)
			}
		}
		// The fake answers a BatchLookup through one Lookup per key: count calls by the
		// client, so a BatchLookup of the two keys is one.
		lookups := func() int {
			return f.count(transfer.OpLookup) - 2*f.count(transfer.OpBatchLookup) + f.count(transfer.OpBatchLookup)
		}
		batch() // misses: one BatchLookup, answers cached
		n := lookups()
		batch() // hits: no lookup
		if got := lookups(); got != n {
			t.Fatalf("a batch get of cached keys made %d lookups", got-n)
		}
		ttl := c.lookups.ttl
		c.lookups.mu.Lock()
		var old time.Time
		for _, k := range keys {
			e := c.lookups.mu.m[k]
			e.expires = time.Now().Add(ttl / 10) // in the last quarter of its life
			old = e.expires
			c.lookups.mu.m[k] = e
		}
		c.lookups.mu.Unlock()
		if nowait {
			if _, ok := c.BatchGetIntoNoWait(keys, bufs); ok[0] || ok[1] {
				t.Fatalf("a no-wait copy from a fake worker: %v", ok)
			}
		} else {
			batch()
		}
		settle(t, "both entries refreshed", func() bool {
			c.lookups.mu.Lock()
			defer c.lookups.mu.Unlock()
			return c.lookups.mu.m["a"].expires.After(old) && c.lookups.mu.m["b"].expires.After(old)
		})
		if got := lookups(); got != n+1 {
			t.Fatalf("%d lookup calls for the refresh of two keys, want 1 (Lookup %d, BatchLookup %d)", got-n, f.count(transfer.OpLookup), f.count(transfer.OpBatchLookup))
		}
	})
}

// TestLookupRefreshStopsAtClose: Close cancels a refresh in flight and returns; no refresh
// starts after it.
func TestLookupRefreshStopsAtClose(t *testing.T) {
	ctx := context.Background()
	f := newFakeCluster(1, 1)
	c := newFakeClient(t, f)
	if err := c.Put(ctx, "a", value(10, 1), ReplicateConfig{}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Get(ctx, "a"); err != nil {
		t.Fatal(err)
	}
	c.closeLookups()
	c.refreshLookup("a")
	b := c.lookupBatch()
	b.mu.Lock()
	running := b.mu.running
	b.mu.Unlock()
	if running {
		t.Fatal("a refresh started after Close")
	}
}

// TestKeptLookup: an entry past its TTL is kept (keptLookupLife) for reads that ask the
// worker to vouch for it: a get then reads with ReadRequest.Cached and no lookup. A worker
// that refuses such a read (it has not heard from the leader lately) sends the get to the
// master for a fresh lookup and an ordinary read; past its kept life the entry is not used.
func TestKeptLookup(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		f := newFakeCluster(1, 1)
		c := newFakeClient(t, f)
		c.cfg.DisableSharedMemory = true
		other := newFakeClient(t, f)
		if err := other.Put(ctx, "k", value(100, 1), ReplicateConfig{}); err != nil {
			t.Fatal(err)
		}
		w := f.workers[f.wids[0]]
		lookups := func() int { return f.count(transfer.OpLookup) }
		get := func(what string) {
			t.Helper()
			if got, err := c.Get(ctx, "k"); err != nil || !bytes.Equal(got, value(100, 1)) {
				t.Fatalf("%s: %v", what, err)
			}
		}
		get("first get: a lookup")
		n := lookups()
		time.Sleep(c.lookups.ttl + time.Millisecond)
		get("past the TTL: a kept lookup")
		if lookups() != n || !w.cached[len(w.cached)-1] {
			t.Fatalf("past the TTL: %d lookups, last read cached %v", lookups()-n, w.cached[len(w.cached)-1])
		}
		w.refuseCached = true
		get("the worker refuses the kept lookup")
		if lookups() != n+1 || w.cached[len(w.cached)-1] {
			t.Fatalf("after a refused kept read: %d lookups, last read cached %v", lookups()-n, w.cached[len(w.cached)-1])
		}
		w.refuseCached = false
		time.Sleep(c.lookups.ttl + keptLookupLife + time.Millisecond)
		get("past the kept life: a lookup")
		if lookups() != n+2 || w.cached[len(w.cached)-1] {
			t.Fatalf("past the kept life: %d lookups, last read cached %v", lookups()-n, w.cached[len(w.cached)-1])
		}
	})
}

// TestKeptReadsBackOff: a worker that refuses a read from a kept lookup while the fresh lookup
// shows the same version (it could not vouch) gets no kept reads for a while; the other keys'
// gets look up instead of being refused too. After the back-off kept reads resume, and a kept
// read that failed because the object was replaced (a new version) starts no back-off.
func TestKeptReadsBackOff(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		vals := map[string][]byte{"a": value(100, 1), "b": value(100, 2), "c": value(100, 3)}
		k := newKeptFixture(t, vals)
		c, w, other, get, cachedReads := k.c, k.w, k.other, k.get, k.cachedReads
		w.refuseCached = true
		get("a") // refused, then looked up: the same version
		n := cachedReads()
		get("b")
		if cachedReads() != n {
			t.Fatal("a kept read went to a worker backing off")
		}
		time.Sleep(minKeptBackoff)
		w.refuseCached = false
		get("c")
		if cachedReads() != n+1 || !w.cached[len(w.cached)-1] {
			t.Fatal("no kept read after the back-off")
		}

		time.Sleep(c.lookups.ttl + time.Millisecond) // a and b kept again
		vals["a"] = value(100, 9)
		if err := other.Put(ctx, "a", vals["a"], ReplicateConfig{Upsert: true}); err != nil {
			t.Fatal(err)
		}
		get("a") // its kept read fails: a new version
		n = cachedReads()
		get("b")
		if cachedReads() != n+1 {
			t.Fatal("a replaced object's failed kept read started a back-off")
		}
	})
}

// TestKeptReadsOldWorker: a worker built before ReadRequest.Cached refuses such reads with
// INVALID_PARAMS; the get looks the key up and reads it, and kept reads to that worker back
// off as from one that cannot vouch.
func TestKeptReadsOldWorker(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		k := newKeptFixture(t, map[string][]byte{"a": value(100, 1), "b": value(100, 2)})
		k.w.noCachedFlag = true
		k.get("a") // through a refused kept read
		n := k.cachedReads()
		if n == 0 {
			t.Fatal("no kept read was tried")
		}
		k.get("b")
		if k.cachedReads() != n {
			t.Fatal("a kept read went to a worker that refused the flag")
		}
	})
}

// keptFixture is a client whose lookups of vals are all kept, none live: vals were put by
// another client on one fake worker, read once, and the TTL has passed. Run inside a synctest
// bubble.
type keptFixture struct {
	c, other    *Client
	w           *fakeWorker
	get         func(k string)
	cachedReads func() int // reads the worker saw with ReadRequest.Cached
}

func newKeptFixture(t *testing.T, vals map[string][]byte) *keptFixture {
	t.Helper()
	ctx := context.Background()
	f := newFakeCluster(1, 1)
	k := &keptFixture{c: newFakeClient(t, f), other: newFakeClient(t, f), w: f.workers[f.wids[0]]}
	k.c.cfg.DisableSharedMemory = true
	for key, v := range vals {
		if err := k.other.Put(ctx, key, v, ReplicateConfig{}); err != nil {
			t.Fatal(err)
		}
	}
	k.get = func(key string) {
		t.Helper()
		if got, err := k.c.Get(ctx, key); err != nil || !bytes.Equal(got, vals[key]) {
			t.Fatalf("get %s: %v", key, err)
		}
	}
	k.cachedReads = func() (n int) {
		for _, x := range k.w.cached {
			if x {
				n++
			}
		}
		return n
	}
	for key := range vals {
		k.get(key)
	}
	time.Sleep(k.c.lookups.ttl + time.Millisecond)
	return k
}
