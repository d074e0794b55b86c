package server

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/mooncake-go/mooncake/internal/base"
	"github.com/mooncake-go/mooncake/server/lifecycle"
	"github.com/mooncake-go/mooncake/server/master"
	"github.com/mooncake-go/mooncake/server/worker"
	"github.com/mooncake-go/mooncake/transfer"
)

// TestRemovalsDropWorkerBytes: every removal (Remove, RemoveByRegex, RemoveAll) owes the
// workers a drop of each object its raft entry removed, so a worker lets the bytes go at its
// next heartbeat instead of holding them until it re-registers. One master, no leader change
// (which would make the worker re-register and reconcile anyway).
func TestRemovalsDropWorkerBytes(t *testing.T) {
	c := startMasters(t, 1, nil)
	w := c.addWorker("", nil)
	d := newDriver(t, c.masterAddrs())
	objects := func() int64 { return w.TestHooks().Engine().Metrics().DRAM.Objects }
	for i := range 6 {
		if err := d.put(fmt.Sprintf("k/%d", i), bytes.Repeat([]byte{byte(i)}, 1000), 1, false); err != nil {
			t.Fatal(err)
		}
	}
	if n := objects(); n != 6 {
		t.Fatalf("worker holds %d objects after 6 puts", n)
	}
	if err := d.call(&transfer.RemoveRequest{Key: "k/0"}, nil); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the removed object's bytes freed", func() bool { return objects() == 5 })
	cr := transfer.NewCountResponse(transfer.OpRemoveByRegex, 0)
	if err := d.call(&transfer.RemoveByRegexRequest{Pattern: "^k/[12]$"}, cr); err != nil || cr.Count != 2 {
		t.Fatalf("remove by regex: %d %v", cr.Count, err)
	}
	eventually(t, "the regex's objects freed", func() bool { return objects() == 3 })
	cr = transfer.NewCountResponse(transfer.OpRemoveAll, 0)
	if err := d.call(transfer.NewEmpty(transfer.OpRemoveAll), cr); err != nil || cr.Count != 3 {
		t.Fatalf("remove all: %d %v", cr.Count, err)
	}
	eventually(t, "every object freed", func() bool { return objects() == 0 })
	if err := d.call(&transfer.LookupRequest{Key: "k/5"}, &transfer.LookupResponse{}); !errors.Is(err, base.ErrObjectNotFound) {
		t.Fatalf("lookup after remove all: %v", err)
	}
}

// TestRemovalOutlivesItsCaller: a removal whose caller goes away (its connection closes) while
// the entry is committing still owes the workers their drops once the entry commits. The
// leader's appends to its followers are held while the caller leaves, so the entry commits
// only after the leader has seen the caller's context end.
func TestRemovalOutlivesItsCaller(t *testing.T) {
	arrived := make(chan context.Context, 1)
	c, links := startPartitionable(t, func(cfg *master.Config) {
		cfg.Test.BeforeCall = func(ctx context.Context, req transfer.Message) {
			if req.Op() == transfer.OpRemove {
				select {
				case arrived <- ctx:
				default:
				}
			}
		}
	})
	w := c.addWorker("", nil)
	d := newDriver(t, c.masterAddrs())
	objects := func() int64 { return w.TestHooks().Engine().Metrics().DRAM.Objects }
	if err := d.put("k", bytes.Repeat([]byte{7}, 1000), 1, false); err != nil {
		t.Fatal(err)
	}
	if n := objects(); n != 1 {
		t.Fatalf("worker holds %d objects after a put", n)
	}
	l := c.waitLeader()
	var followers []string
	for j, m := range c.masters {
		if j != l {
			followers = append(followers, m.TestHooks().Node().RaftAddr())
		}
	}
	links[l].Hold(followers...)
	t.Cleanup(links[l].Release) // before the cluster's cleanup: raft waits for held appends

	cli, err := transfer.NewClient(transfer.ClientOptions{Logger: testLogger()})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		done <- cli.Call(context.Background(), c.masterAddrs()[l], &transfer.RemoveRequest{Key: "k"}, nil)
	}()
	callCtx := <-arrived
	cli.Close()
	<-callCtx.Done() // the leader saw its caller go, with the entry still held
	if err := <-done; err == nil {
		t.Fatal("the removal answered with its commit held")
	}
	links[l].Release()
	eventually(t, "the removed object's bytes freed", func() bool { return objects() == 0 })
	if _, err := d.lookup("k"); !errors.Is(err, base.ErrObjectNotFound) {
		t.Fatalf("lookup after the removal committed: %v", err)
	}
}

// TestLargeRemovalCaughtUp: when the leader owes a worker more drops than one heartbeat answer
// carries, the worker heartbeats again at once until it has them all, rather than once an
// interval: the bytes go sooner, and its answers are settled again (reads from kept lookups
// vouched for) within one round.
func TestLargeRemovalCaughtUp(t *testing.T) {
	c := startMasters(t, 1, func(cfg *master.Config) {
		cfg.Test.Lifecycle = func(lc *lifecycle.Config) { lc.MaxDropsPerHeartbeat = 2 }
	})
	w := c.addWorker("", func(cfg *worker.Config) { cfg.HeartbeatInterval = 300 * time.Millisecond })
	d := newDriver(t, c.masterAddrs())
	objects := func() int64 { return w.TestHooks().Engine().Metrics().DRAM.Objects }
	const n = 10
	for i := range n {
		if err := d.put(fmt.Sprintf("k/%d", i), bytes.Repeat([]byte{byte(i)}, 1000), 1, false); err != nil {
			t.Fatal(err)
		}
	}
	before := w.TestHooks().HeartbeatRounds()
	cr := transfer.NewCountResponse(transfer.OpRemoveAll, 0)
	if err := d.call(transfer.NewEmpty(transfer.OpRemoveAll), cr); err != nil || cr.Count != n {
		t.Fatalf("remove all: %d %v", cr.Count, err)
	}
	eventually(t, "every object freed", func() bool { return objects() == 0 })
	// One round brings them all; one more may have been in flight at the removal, and one may
	// end while this reads. Without catching up it takes n/2 = 5.
	if rounds := w.TestHooks().HeartbeatRounds() - before; rounds > 3 {
		t.Fatalf("%d drops at 2 an answer took %d heartbeat rounds", n, rounds)
	}
}
