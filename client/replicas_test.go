package client

import (
	"context"
	"fmt"
	"slices"
	"testing"

	"github.com/mooncake-go/mooncake/internal/base"
	"github.com/mooncake-go/mooncake/transfer"
)

// TestOrderReplicas: nearest first (this host, unknown, other hosts), then fewest reads in
// flight from this client; equal replicas come in both orders.
func TestOrderReplicas(t *testing.T) {
	type w struct {
		d    replicaDistance
		load int64
	}
	f := func(workers map[string]w, want ...string) {
		t.Helper()
		var rs []base.Placement
		for a := range workers {
			rs = append(rs, base.Placement{Address: a})
		}
		slices.SortFunc(rs, func(a, b base.Placement) int { return len(a.Address) - len(b.Address) })
		rank := func(addr string) (replicaDistance, int64) { return workers[addr].d, workers[addr].load }
		seen := map[string]bool{}
		for range 200 {
			var got []string
			for _, r := range orderReplicas(rs, rank) {
				got = append(got, r.Address)
			}
			seen[fmt.Sprint(got)] = true
			if len(want) > 0 && !slices.Equal(got, want) {
				t.Fatalf("order %v, want %v", got, want)
			}
		}
		if len(want) == 0 && len(seen) < 2 {
			t.Fatalf("equal replicas always in one order: %v", seen)
		}
	}
	f(map[string]w{"remote": {replicaRemote, 0}, "unknown": {replicaUnknown, 5}, "local": {replicaLocal, 9}}, "local", "unknown", "remote")
	f(map[string]w{"a1": {replicaRemote, 3}, "b22": {replicaRemote, 1}, "c333": {replicaRemote, 2}}, "b22", "c333", "a1")
	f(map[string]w{"a": {replicaLocal, 1}, "bb": {replicaLocal, 0}, "ccc": {replicaUnknown, 0}}, "bb", "a", "ccc")
	f(map[string]w{"a": {replicaRemote, 0}, "bb": {replicaRemote, 0}}) // ties: both orders
}

// TestReadsPreferSameHost: workers on real (non-loopback) addresses; the one whose ShmOpen
// answers this host's boot id serves the reads once the client has asked each worker, though
// its address says nothing. A worker that does not say (private arena) is tried before the
// ones known to be elsewhere.
func TestReadsPreferSameHost(t *testing.T) {
	bid := transfer.BootID()
	if bid == "" {
		t.Skip("no kernel boot id on this platform: host identity is unknown")
	}
	ctx := context.Background()
	f := newFakeCluster(1, 3)
	f.workers[f.wids[0]].bootID = "another-host"
	f.workers[f.wids[1]].bootID = bid
	// f.wids[2] keeps its arena private: unknown.
	c := newFakeClient(t, f)
	if err := c.Put(ctx, "k", value(1000, 1), ReplicateConfig{Replicas: 3}); err != nil {
		t.Fatal(err)
	}
	// Learn: a get asks ShmOpen of the worker it reads from; workers of unknown host are
	// tried (in random order) before those known to be elsewhere, so the same-host one is
	// found within a few gets.
	for i := 0; c.shm.host(f.wids[1]) != hostSame; i++ {
		if i == 1000 {
			t.Fatal("the same-host worker was never asked")
		}
		if _, err := c.Get(ctx, "k"); err != nil {
			t.Fatal(err)
		}
	}
	if h := c.shm.host(f.wids[2]); h != hostUnknown {
		t.Fatalf("a worker with a private arena has host %d, want unknown", h)
	}
	if h := c.shm.host(f.wids[0]); h == hostSame {
		t.Fatal("a worker of another boot id counted as this host")
	}
	f.mu.Lock()
	before := f.workers[f.wids[1]].reads
	f.mu.Unlock()
	for range 10 {
		if _, err := c.Get(ctx, "k"); err != nil {
			t.Fatal(err)
		}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if got := f.workers[f.wids[1]].reads - before; got != 10 {
		t.Fatalf("the same-host worker served %d of 10 reads", got)
	}
}
