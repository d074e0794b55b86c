package raftmetatest

import (
	"context"
	"errors"
	"testing"

	"github.com/mooncake-go/mooncake/internal/base"
	"github.com/mooncake-go/mooncake/internal/testutil"
	"github.com/mooncake-go/mooncake/raftmeta"
)

func TestMain(m *testing.M) { testutil.VerifyNoLeaks(m) }

// TestPartitionFollower checks the link cutter itself: a cut-off follower misses a commit and
// gets it after Heal.
func TestPartitionFollower(t *testing.T) {
	c := MakeCluster(t, 3)
	li := c.Leader()
	f := (li + 1) % 3
	c.Disconnect(f)
	res := c.Apply(raftmeta.RegisterWorker{ID: "w1", Address: "127.0.0.1:1"})
	ctx, cancel := context.WithTimeout(context.Background(), 4*c.Config(f).HeartbeatTimeout)
	defer cancel()
	if err := c.Node(f).WaitApplied(ctx, res.Index); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("cut-off follower applied the entry: %v", err)
	}
	c.Heal()
	c.WaitApplied(res.Index)
	if len(c.Node(f).Segments()) != 1 {
		t.Fatal("follower lacks the entry after heal")
	}
	// While cut off the follower may have started elections; the cluster settles on one
	// leader again.
	c.Leader()
	if _, err := c.Node(f).NewVersion(); err != nil && !errors.Is(err, base.ErrNotLeader) {
		t.Fatal(err)
	}
}
