package raftmeta

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/mooncake-go/mooncake/internal/base"
)

// TestNewVersionStaleTerm: a NewVersion call that saw leadership in a term older than the one
// the counter already belongs to (it stalled across two elections) is refused instead of
// restarting the older term's counter, which would repeat versions.
func TestNewVersionStaleTerm(t *testing.T) {
	cfg := Config{ID: "m1", RaftAddr: "127.0.0.1:0", DataDir: t.TempDir(), Peers: []Peer{{ID: "m1", RaftAddr: "127.0.0.1:0"}}}
	cfg.HeartbeatTimeout, cfg.ElectionTimeout, cfg.LeaderLeaseTimeout = 300*time.Millisecond, 300*time.Millisecond, 300*time.Millisecond
	n, err := Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for !n.IsLeader() {
		if _, err := n.WaitLeader(ctx); err != nil {
			t.Fatal(err)
		}
	}
	v1, err := n.NewVersion()
	if err != nil {
		t.Fatal(err)
	}
	term := uint64(v1) >> versionCounterBits
	// As if this node had meanwhile led in a later term and handed out versions there.
	n.ver.mu.Lock()
	n.ver.term, n.ver.next = term+2, 5
	n.ver.mu.Unlock()
	if v, err := n.NewVersion(); !errors.Is(err, base.ErrNotLeader) {
		t.Fatalf("NewVersion in a term older than the counter's: %d, %v (want not leader)", v, err)
	}
	n.ver.mu.Lock()
	if n.ver.term != term+2 || n.ver.next != 5 {
		t.Fatalf("counter moved: term %d next %d", n.ver.term, n.ver.next)
	}
	n.ver.mu.Unlock()
}
