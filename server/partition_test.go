package server

import (
	"bytes"
	"context"
	"testing"
	"time"

	"github.com/mooncake-go/mooncake/client"
	"github.com/mooncake-go/mooncake/raftmeta"
	"github.com/mooncake-go/mooncake/raftmeta/raftmetatest"
)

// startPartitionable starts three masters whose raft links can be cut (links[i] is master
// i's view of its peers).
func startPartitionable(t *testing.T) (*testCluster, []*raftmetatest.Links) {
	t.Helper()
	var links []*raftmetatest.Links
	c := startMasters(t, 3, func(cfg *MasterConfig) {
		l := raftmetatest.NewLinks()
		links = append(links, l)
		cfg.testRaft = func(rc *raftmeta.Config) {
			raftmetatest.FastTimeouts(rc)
			rc.WrapTransport = l.Wrap
		}
	})
	return c, links
}

// cutOff cuts master i off from the other masters' raft, both directions; its RPC port stays
// open, so clients still reach it and it answers as a master without a leader.
func cutOff(c *testCluster, links []*raftmetatest.Links, i int) {
	for j, m := range c.masters {
		if j != i {
			links[i].Cut(m.node.RaftAddr())
			links[j].Cut(c.masters[i].node.RaftAddr())
		}
	}
}

// waitLeaderAmong waits until one of the masters idx is leader and returns it.
func waitLeaderAmong(t *testing.T, c *testCluster, idx ...int) *Master {
	t.Helper()
	deadline := time.Now().Add(testWait)
	for time.Now().Before(deadline) {
		for _, i := range idx {
			if c.masters[i].IsLeader() {
				return c.masters[i]
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("no leader among masters %v", idx)
	return nil
}

// TestStatusFirstMasterPartitioned is issue 18's `mooncake status --timeout 3s` with the
// first listed master cut off from raft: it answers "no leader" (as a follower that lost its
// leader, or a candidate), and the client moves on to the next master within the timeout
// and reports the leader's view. A put and a get through a fresh client (which guesses the
// first master as leader) move on the same way.
func TestStatusFirstMasterPartitioned(t *testing.T) {
	c, links := startPartitionable(t)
	waitLeaderAmong(t, c, 0, 1, 2)
	c.addWorker("", nil)
	cutOff(c, links, 0)
	leader := waitLeaderAmong(t, c, 1, 2)
	// The cut-off master stops naming a leader (it steps down, or its leader's heartbeats stop).
	deadline := time.Now().Add(testWait)
	for {
		if id, _ := c.masters[0].node.Leader(); id == "" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the cut-off master still names a leader")
		}
		time.Sleep(20 * time.Millisecond)
	}

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
	if st.Self != leader.cfg.ID || st.Leader != leader.cfg.ID {
		t.Fatalf("status answered by %q (leader %q), want the leader %s's view", st.Self, st.Leader, leader.cfg.ID)
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
