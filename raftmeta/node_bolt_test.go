package raftmeta_test

import (
	"path/filepath"
	"testing"

	"github.com/hashicorp/raft"
	raftboltdb "github.com/hashicorp/raft-boltdb/v2"

	"github.com/mooncake-go/mooncake/internal/base"
	"github.com/mooncake-go/mooncake/raftmeta"
)

// TestLogFileCompatible: raft.db, written without its freelist (boltOptions), opens in a build
// that syncs bolt's freelist (raft-boltdb's defaults: an older master, a tool), which reads
// the log whole and writes the freelist back; and a node opens that file again with its state.
func TestLogFileCompatible(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "m1")
	n := openSingle(t, dir)
	ctx := ctxT(t)
	if _, err := n.Apply(ctx, raftmeta.RegisterWorker{ID: "w1", Address: "127.0.0.1:1", DRAMCapacity: 1 << 30}); err != nil {
		t.Fatal(err)
	}
	var last base.Version
	for i := range 50 {
		v, err := n.NewVersion()
		if err != nil {
			t.Fatal(err)
		}
		if res, err := n.Apply(ctx, raftmeta.PutEnd{Items: []base.Object{put("k"+string(rune('a'+i%26))+string(rune('a'+i/26)), v, "w1")}}); err != nil || res.Err != nil {
			t.Fatalf("put %d: %v %v", i, err, res.Err)
		}
		last = v
	}
	addr := n.RaftAddr()
	if err := n.Close(); err != nil {
		t.Fatal(err)
	}

	// As raft-boltdb opens it by default (the freelist synced at each commit).
	s, err := raftboltdb.New(raftboltdb.Options{Path: filepath.Join(dir, "raft.db")})
	if err != nil {
		t.Fatal(err)
	}
	first, err1 := s.FirstIndex()
	lastIdx, err2 := s.LastIndex()
	if err1 != nil || err2 != nil || first == 0 || lastIdx < first+50 {
		t.Fatalf("log %d..%d: %v %v", first, lastIdx, err1, err2)
	}
	for i := first; i <= lastIdx; i++ {
		var l raft.Log
		if err := s.GetLog(i, &l); err != nil {
			t.Fatalf("log %d: %v", i, err)
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	n = reopenSingle(t, dir, addr)
	if o, ok := n.Lookup("kxb"); !ok || o.Version != last {
		t.Fatalf("after reopening: %+v %v (want version %d)", o, ok, last)
	}
	if v, err := n.NewVersion(); err != nil {
		t.Fatal(err)
	} else if res, err := n.Apply(ctx, raftmeta.PutEnd{Items: []base.Object{put("after", v, "w1")}}); err != nil || res.Err != nil {
		t.Fatalf("put after reopening: %v %v", err, res.Err)
	}
}
