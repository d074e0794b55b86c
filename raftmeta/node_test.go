package raftmeta_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mooncake-go/mooncake/internal/base"
	"github.com/mooncake-go/mooncake/internal/testutil"
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

// reopenSingle restarts the single node of dir on addr (its raft state there: no bootstrap),
// waits until it leads and has applied its log, and closes it at the end of the test.
func reopenSingle(t *testing.T, dir, addr string) *raftmeta.Node {
	t.Helper()
	cfg := raftmeta.Config{ID: "m1", RaftAddr: addr, RPCAddr: "rpc-m1", DataDir: dir,
		Peers: []raftmeta.Peer{{ID: "m1", RaftAddr: addr}}, Logger: raftmetatest.QuietLogger()}
	raftmetatest.FastTimeouts(&cfg)
	n, err := raftmeta.Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { n.Close() })
	ctx := ctxT(t)
	for !n.IsLeader() {
		if _, err := n.WaitLeader(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if err := n.VerifyLeader(ctx); err != nil {
		t.Fatal(err)
	}
	return n
}

func put(key string, v base.Version, workers ...base.WorkerID) base.Object {
	return base.Object{ObjectMeta: base.ObjectMeta{Key: key, Size: int64(len(key)) * 10, Version: v,
		Checksum: uint64(v) * 7}, Replicas: workers}
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
	res, err := n.Apply(ctx, raftmeta.PutEnd{Items: []base.Object{put("k1", v, "w1")}})
	if err != nil || res.Err != nil {
		t.Fatalf("put: %v %v", err, res.Err)
	}
	o, ok := n.Lookup("k1")
	if !ok || o.Version != v || len(o.Replicas) != 1 || o.Replicas[0] != "w1" || o.Created == 0 {
		t.Fatalf("lookup: %+v %v", o, ok)
	}
	res, err = n.Apply(ctx, &raftmeta.PutEnd{Items: []base.Object{put("k1", v+1, "w1")}})
	if err != nil || !errors.Is(res.Err, base.ErrObjectAlreadyExists) {
		t.Fatalf("dup put: %v %v", err, res.Err)
	}
	if err := n.VerifyLeader(ctx); err != nil {
		t.Fatal(err)
	}
	addr := n.RaftAddr()
	if err := n.Close(); err != nil {
		t.Fatal(err)
	}

	// Restart from the data dir on the same address: no bootstrap, state back from the log,
	// versions keep growing (a new term).
	n = reopenSingle(t, filepath.Join(dir, "m1"), addr)
	if o, ok := n.Lookup("k1"); !ok || o.Version != v {
		t.Fatalf("after restart: %+v %v", o, ok)
	}
	v2, err := n.NewVersion()
	if err != nil || v2 <= v {
		t.Fatalf("version after restart %d (before %d): %v", v2, v, err)
	}
	if m := n.Masters(); len(m) != 1 || m[0] != (raftmeta.Master{ID: "m1", RPCAddr: "rpc-m1"}) {
		t.Fatalf("masters %+v", m)
	}
	if err := n.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := n.Apply(ctx, raftmeta.RemoveAll{}); !errors.Is(err, base.ErrClosed) {
		t.Fatalf("apply after close: %v", err)
	}
}

// TestStandalonePortZero: a single voter bootstrapped from Peers with port 0 names the bound
// port in its configuration.
func TestStandalonePortZero(t *testing.T) {
	cfg := raftmeta.Config{ID: "solo", RaftAddr: "127.0.0.1:0", DataDir: t.TempDir(),
		Peers: []raftmeta.Peer{{ID: "solo", RaftAddr: "127.0.0.1:0"}}, Logger: raftmetatest.QuietLogger()}
	raftmetatest.FastTimeouts(&cfg)
	n, err := raftmeta.Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	if err := n.VerifyLeader(ctxT(t)); err != nil && !errors.Is(err, base.ErrNotLeader) {
		t.Fatal(err)
	}
	srv, err := n.Servers()
	if err != nil || len(srv) != 1 || srv[0].RaftAddr != n.RaftAddr() {
		t.Fatalf("servers %+v (bound %s): %v", srv, n.RaftAddr(), err)
	}
}

// TestPeersIgnoredWarning: reopening a data directory with --peers that differ from its raft
// configuration logs one warning (the directory wins); the same peers, or this node on port 0,
// log none.
func TestPeersIgnoredWarning(t *testing.T) {
	dir := t.TempDir()
	open := func(peers ...raftmeta.Peer) string {
		t.Helper()
		var buf testutil.SyncBuffer
		cfg := raftmeta.Config{ID: "m1", RaftAddr: "127.0.0.1:0", DataDir: dir, Peers: peers,
			Logger: slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelWarn}))}
		raftmetatest.FastTimeouts(&cfg)
		n, err := raftmeta.Open(cfg)
		if err != nil {
			t.Fatal(err)
		}
		if err := n.Close(); err != nil {
			t.Fatal(err)
		}
		return buf.String()
	}
	self := raftmeta.Peer{ID: "m1", RaftAddr: "127.0.0.1:0"}
	if out := open(self); strings.Contains(out, "differs") {
		t.Fatalf("bootstrap warned: %s", out)
	}
	if out := open(self); strings.Contains(out, "differs") {
		t.Fatalf("same peers warned: %s", out)
	}
	if out := open(self, raftmeta.Peer{ID: "m2", RaftAddr: "127.0.0.1:7999"}); !strings.Contains(out, "--peers differs") || !strings.Contains(out, "m2=127.0.0.1:7999") {
		t.Fatalf("other peers: no warning: %q", out)
	}
}

func TestNewVersionUnique(t *testing.T) {
	n := openSingle(t, t.TempDir())
	defer n.Close()
	ctx := ctxT(t)
	for !n.IsLeader() {
		if _, err := n.WaitLeader(ctx); err != nil {
			t.Fatal(err)
		}
	}
	const goroutines, each = 8, 500
	out := make(chan base.Version, goroutines*each)
	errc := make(chan error, goroutines)
	for range goroutines {
		go func() {
			for range each {
				v, err := n.NewVersion()
				if err != nil {
					errc <- err
					return
				}
				out <- v
			}
			errc <- nil
		}()
	}
	for range goroutines {
		if err := <-errc; err != nil {
			t.Fatal(err)
		}
	}
	close(out)
	seen := map[base.Version]bool{}
	term := n.Stats().Term
	for v := range out {
		if seen[v] || v == 0 || uint64(v)>>40 != term {
			t.Fatalf("version %d (term %d) repeated or out of layout", v, term)
		}
		seen[v] = true
	}
}

func TestConfigValidate(t *testing.T) {
	bad := func(mod func(*raftmeta.Config)) {
		t.Helper()
		cfg := raftmeta.Config{ID: "m1", RaftAddr: "127.0.0.1:0", DataDir: t.TempDir()}
		mod(&cfg)
		cfg.EnsureDefaults()
		if err := cfg.Validate(); !errors.Is(err, base.ErrInvalidParams) {
			t.Fatalf("%+v: %v", cfg, err)
		}
		if _, err := raftmeta.Open(cfg); !errors.Is(err, base.ErrInvalidParams) {
			t.Fatalf("Open %+v: %v", cfg, err)
		}
	}
	bad(func(c *raftmeta.Config) { c.ID = "" })
	bad(func(c *raftmeta.Config) { c.RaftAddr = "nohostport" })
	bad(func(c *raftmeta.Config) { c.DataDir = "" })
	bad(func(c *raftmeta.Config) { c.Peers = []raftmeta.Peer{{ID: "m2", RaftAddr: "a:1"}} })
	bad(func(c *raftmeta.Config) {
		c.Peers = []raftmeta.Peer{{ID: "m1", RaftAddr: "a:1"}, {ID: "m1", RaftAddr: "b:1"}}
	})
	bad(func(c *raftmeta.Config) { c.MaxAppendEntries = 5000 })

	d := raftmeta.DefaultConfig()
	if d.HeartbeatTimeout != time.Second || d.MaxAppendEntries != 256 || d.SnapshotThreshold != 8192 || d.TrailingLogs != 10240 {
		t.Fatalf("defaults %+v", d)
	}
}

func TestApplyValidates(t *testing.T) {
	n := openSingle(t, t.TempDir())
	defer n.Close()
	ctx := ctxT(t)
	for _, c := range []raftmeta.Command{
		nil,
		(*raftmeta.Remove)(nil),
		raftmeta.PutEnd{},
		raftmeta.PutEnd{Items: []base.Object{{ObjectMeta: base.ObjectMeta{Key: "", Version: 1},
			Replicas: []base.WorkerID{"w"}}}},
		raftmeta.PutEnd{Items: []base.Object{{ObjectMeta: base.ObjectMeta{Key: "k", Version: 1},
			Replicas: []base.WorkerID{"w", "w"}}}},
		raftmeta.PutEnd{Items: []base.Object{{ObjectMeta: base.ObjectMeta{Key: "k", Version: 1, Size: -1},
			Replicas: []base.WorkerID{"w"}}}},
		raftmeta.Remove{},
		raftmeta.RemoveRegex{Pattern: "a**"},
		raftmeta.RegisterWorker{ID: "a/b", Address: "x:1"},
		raftmeta.RegisterWorker{ID: "w", Address: ""},
		raftmeta.DropReplicas{Worker: "w"},
		raftmeta.RegisterMaster{},
	} {
		if _, err := n.Apply(ctx, c); !errors.Is(err, base.ErrInvalidParams) && !errors.Is(err, base.ErrInvalidKey) {
			t.Fatalf("%#v: %v", c, err)
		}
	}
	big := raftmeta.PutEnd{}
	for i := range 2000 {
		big.Items = append(big.Items, base.Object{ObjectMeta: base.ObjectMeta{Key: fmt.Sprintf("%04d%s", i,
			strings.Repeat("k", 4000)), Version: 1},
			Replicas: []base.WorkerID{"w"}})
	}
	if _, err := n.Apply(ctx, big); !errors.Is(err, base.ErrTooLarge) {
		t.Fatalf("8 MB command: %v", err)
	}
}
