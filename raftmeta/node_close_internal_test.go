package raftmeta

import (
	"errors"
	"io"
	"log/slog"
	"testing"

	"github.com/hashicorp/raft"
)

// TestTransportDoesNotPipeline: the node's transport refuses pipelined replication, so raft
// replicates with one AppendEntries at a time (transportConfig says why: pipelining can wedge
// a follower's replication and hang raft.Shutdown).
func TestTransportDoesNotPipeline(t *testing.T) {
	n, err := Open(Config{ID: "m1", RaftAddr: "127.0.0.1:0", DataDir: t.TempDir(), Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	p, err := n.trans.AppendEntriesPipeline("m2", "127.0.0.1:1")
	if !errors.Is(err, raft.ErrPipelineReplicationNotSupported) {
		if p != nil {
			p.Close()
		}
		t.Fatalf("AppendEntriesPipeline: %v, want ErrPipelineReplicationNotSupported", err)
	}
}
