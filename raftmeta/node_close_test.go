package raftmeta_test

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mooncake-go/mooncake/internal/base"
	"github.com/mooncake-go/mooncake/internal/testutil"
	"github.com/mooncake-go/mooncake/raftmeta"
	"github.com/mooncake-go/mooncake/raftmeta/raftmetatest"
)

// silentPeer accepts TCP connections and never reads or answers: a raft peer whose RPCs hang
// until the connection closes (or the transport's 10s I/O timeout passes).
type silentPeer struct {
	ln     net.Listener
	joined chan struct{} // closed at the first accepted connection
	mu     sync.Mutex    // protects conns
	conns  []net.Conn
}

func newSilentPeer(t *testing.T) *silentPeer {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &silentPeer{ln: ln, joined: make(chan struct{})}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			p.mu.Lock()
			if p.conns = append(p.conns, c); len(p.conns) == 1 {
				close(p.joined)
			}
			p.mu.Unlock()
		}
	}()
	return p
}

// close ends every connection, which fails the RPCs parked on them at once.
func (p *silentPeer) close() {
	p.ln.Close()
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range p.conns {
		c.Close()
	}
}

// TestCloseStuckRaftFailsLoudly: when raft's shutdown cannot finish (here a replication RPC
// parked on a peer that never answers), Close gives up after CloseTimeout with an error
// wrapping base.ErrTimeout and logs every goroutine's stack, instead of hanging its caller.
// Once the peer's connections close, raft's goroutines end (the package's leak check verifies
// that nothing stays behind).
func TestCloseStuckRaftFailsLoudly(t *testing.T) {
	peer := newSilentPeer(t)
	defer peer.close()
	var logs testutil.SyncBuffer
	cfg := raftmeta.Config{ID: "m1", RaftAddr: "127.0.0.1:0", DataDir: t.TempDir(),
		Logger: slog.New(slog.NewTextHandler(&logs, nil)), CloseTimeout: 200 * time.Millisecond}
	raftmetatest.FastTimeouts(&cfg)
	n, err := raftmeta.Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	closed := false
	defer func() {
		if !closed {
			n.Close()
		}
	}()
	if err := n.Bootstrap([]raftmeta.Peer{{ID: "m1", RaftAddr: n.RaftAddr()}}); err != nil {
		t.Fatal(err)
	}
	ctx := ctxT(t)
	for !n.IsLeader() {
		if _, err := n.WaitLeader(ctx); err != nil {
			t.Fatal(err)
		}
	}
	// The new voter's replication starts when the configuration entry is appended; the
	// change never commits (the silent peer is half the quorum), so the call ends with its
	// context.
	addCtx, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
	_ = n.AddVoter(addCtx, "m2", peer.ln.Addr().String())
	cancel()
	select {
	case <-peer.joined:
	case <-time.After(10 * time.Second):
		t.Fatal("raft never connected to the new voter")
	}

	err = n.Close()
	closed = true
	if !errors.Is(err, base.ErrTimeout) {
		t.Fatalf("Close with a replication RPC parked: %v, want an error wrapping base.ErrTimeout", err)
	}
	out := logs.String()
	if !strings.Contains(out, "raft shutdown stuck") || !strings.Contains(out, "github.com/hashicorp/raft.(*Raft)") {
		t.Fatalf("Close logged no goroutine stacks:\n%s", testutil.Tail(out, 2000))
	}
	if err2 := n.Close(); !errors.Is(err2, base.ErrTimeout) {
		t.Fatalf("second Close: %v, want the first one's error", err2)
	}
}
