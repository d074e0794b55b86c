package raftmeta_test

import (
	"context"
	"testing"
	"time"

	"github.com/mooncake-go/mooncake/raftmeta"
	"github.com/mooncake-go/mooncake/raftmeta/raftmetatest"
)

// TestSoleVoterElectsAtOnce: with heartbeat and election timeouts of ten minutes, a node
// that is the only voter leads long before either could expire, both on first bootstrap and
// on a restart from its data directory; its commit histogram and leader-change counter move.
func TestSoleVoterElectsAtOnce(t *testing.T) {
	dir := t.TempDir()
	open := func() *raftmeta.Node {
		t.Helper()
		cfg := raftmeta.Config{ID: "m1", RaftAddr: "127.0.0.1:0", RPCAddr: "rpc-m1", DataDir: dir, Logger: raftmetatest.QuietLogger(),
			HeartbeatTimeout: 10 * time.Minute, ElectionTimeout: 10 * time.Minute, LeaderLeaseTimeout: time.Second}
		n, err := raftmeta.Open(cfg)
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	waitLeader := func(n *raftmeta.Node) {
		t.Helper()
		// A minute is far under the 10-minute timeouts a non-nudged node would wait.
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if _, err := n.WaitLeader(ctx); err != nil {
			t.Fatalf("sole voter did not elect itself: %v", err)
		}
	}
	n := open()
	if err := n.Bootstrap([]raftmeta.Peer{{ID: "m1", RaftAddr: n.RaftAddr()}}); err != nil {
		t.Fatal(err)
	}
	waitLeader(n)
	if _, err := n.Apply(ctxT(t), raftmeta.RegisterMaster{ID: "m1", RPCAddr: "rpc-m1b"}); err != nil {
		t.Fatal(err)
	}
	if h := n.CommitLatency(); h.Count == 0 || h.Counts[len(h.Counts)-1] != h.Count {
		t.Fatalf("commit histogram after an apply: %+v", h)
	}
	if h := n.LogStoreLatency(); h.Count == 0 || h.Counts[len(h.Counts)-1] != h.Count || h.Sum <= 0 {
		t.Fatalf("log store histogram after an apply: %+v", h)
	}
	if n.LeaderChanges() == 0 {
		t.Fatal("no leader change counted")
	}
	if err := n.Close(); err != nil {
		t.Fatal(err)
	}
	n = open() // restart: existing state, no Bootstrap
	defer n.Close()
	waitLeader(n)
}
