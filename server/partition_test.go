package server

import (
	"bytes"
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mooncake-go/mooncake/client"
	"github.com/mooncake-go/mooncake/internal/base"
	"github.com/mooncake-go/mooncake/internal/testutil"
	"github.com/mooncake-go/mooncake/raftmeta"
	"github.com/mooncake-go/mooncake/raftmeta/raftmetatest"
	"github.com/mooncake-go/mooncake/server/master"
	"github.com/mooncake-go/mooncake/server/rpcsrv"
	"github.com/mooncake-go/mooncake/server/worker"
	"github.com/mooncake-go/mooncake/transfer"
)

// startPartitionable starts three masters whose raft links can be cut (links[i] is master
// i's view of its peers); mut (may be nil) adjusts each master's config.
func startPartitionable(t *testing.T, mut func(*master.Config)) (*testCluster, []*raftmetatest.Links) {
	t.Helper()
	var links []*raftmetatest.Links
	c := startMasters(t, 3, func(cfg *master.Config) {
		l := raftmetatest.NewLinks()
		links = append(links, l)
		cfg.Test.Raft = func(rc *raftmeta.Config) {
			raftmetatest.FastTimeouts(rc)
			rc.WrapTransport = l.Wrap
		}
		if mut != nil {
			mut(cfg)
		}
	})
	return c, links
}

// cutOff cuts master i off from the other masters' raft, both directions; its RPC port stays
// open, so clients still reach it and it answers as a master without a leader.
func cutOff(c *testCluster, links []*raftmetatest.Links, i int) {
	for j, m := range c.masters {
		if j != i {
			links[i].Cut(m.TestHooks().Node().RaftAddr())
			links[j].Cut(c.masters[i].TestHooks().Node().RaftAddr())
		}
	}
}

// TestStatusFirstMasterPartitioned is issue 18's `mooncake status --timeout 3s` with the
// first listed master cut off from raft: it answers "no leader" (as a follower that lost its
// leader, or a candidate), and the client moves on to the next master within the timeout
// and reports the leader's view. A put and a get through a fresh client (which guesses the
// first master as leader) move on the same way.
func TestStatusFirstMasterPartitioned(t *testing.T) {
	c, links := startPartitionable(t, nil)
	c.waitLeaderAmong(0, 1, 2)
	c.addWorker("", nil)
	cutOff(c, links, 0)
	leader := c.masters[c.waitLeaderAmong(1, 2)]
	// The cut-off master stops naming a leader (it steps down, or its leader's heartbeats stop).
	testutil.WaitFor(t, "the cut-off master names no leader", testWait, func() error {
		if id, _ := c.masters[0].TestHooks().Node().Leader(); id != "" {
			return fmt.Errorf("it names %s", id)
		}
		return nil
	})

	connect := func() *client.Client {
		cli, err := client.Connect(context.Background(), client.Config{MasterAddresses: c.masterAddrs(),
			Timeout: 3 * time.Second, Logger: testLogger()})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cli.Close() })
		return cli
	}
	cli := connect()
	st, err := cli.Status(context.Background())
	if err != nil {
		t.Fatalf("status with the first master cut off: %v", err)
	}
	if st.Self != leader.ID() || st.Leader != leader.ID() {
		t.Fatalf("status answered by %q (leader %q), want the leader %s's view", st.Self, st.Leader, leader.ID())
	}

	cli = connect()
	v := bytes.Repeat([]byte("x"), 1000)
	if err := cli.Put(context.Background(), "k", v, client.ReplicateConfig{}); err != nil {
		t.Fatalf("put with the first master cut off: %v", err)
	}
	if got, err := connect().Get(context.Background(), "k"); err != nil || !bytes.Equal(got, v) {
		t.Fatalf("get with the first master cut off: %v", err)
	}
}

// TestWorkersSurviveSilentLeader is issue 24's failover with a short client_ttl: the leader's
// host goes silent (its raft links cut, its RPC calls never answered, its connections left
// open), and the workers, heartbeating at the default 1 s, must find the new leader and
// register there before it marks them dead, client_ttl (3 s) after its election. Their
// heartbeat calls follow client_ttl (a quarter of it, learned from the heartbeat replies);
// with the fixed 5 s timeout both were dead after every failover.
func TestWorkersSurviveSilentLeader(t *testing.T) {
	const ttl = 3 * time.Second
	dead := make(chan base.WorkerID, 4)
	var silent [3]atomic.Bool
	done := make(chan struct{})
	defer close(done) // before the cluster's cleanup, which waits for the calls held below
	n := 0
	c, links := startPartitionable(t, func(cfg *master.Config) {
		i := n
		n++
		cfg.ClientTTL = ttl
		cfg.Test.OnWorkerDead = func(id base.WorkerID) { dead <- id }
		cfg.Test.BeforeCall = func(ctx context.Context, _ transfer.Message) {
			if silent[i].Load() {
				select { // no answer, as from a host that went silent
				case <-ctx.Done():
				case <-done:
				}
			}
		}
	})
	var workers []*worker.Worker
	for range 2 {
		workers = append(workers, c.addWorker("", func(cfg *worker.Config) { cfg.HeartbeatInterval = rpcsrv.DefaultHeartbeatInterval }))
	}
	for _, w := range workers {
		eventually(t, "the worker learned client_ttl", func() bool { return w.TestHooks().HeartbeatTimeout() == ttl/4 })
	}
	old := c.leaderIndex()
	if old < 0 {
		t.Fatal("no leader")
	}
	silent[old].Store(true)
	cutOff(c, links, old)
	var others []int
	for i := range c.masters {
		if i != old {
			others = append(others, i)
		}
	}
	leader := c.masters[c.waitLeaderAmong(others...)]
	elected := time.Now()
	for _, w := range workers {
		eventually(t, "the worker registered with the new leader", func() bool {
			l, _ := w.TestHooks().Leader(), true
			return l == leader.Addr()
		})
	}
	// Past the new leader's deadline for a worker that had not registered, with room.
	noDeathWithin(t, "within twice client_ttl of the failover", dead, 2*ttl-time.Since(elected))
	for _, w := range leader.TestHooks().Status().Workers {
		if w.Lifecycle != "alive" {
			t.Fatalf("worker %s is %s on the new leader, want alive", w.ID, w.Lifecycle)
		}
	}
}
