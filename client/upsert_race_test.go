package client_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/mooncake-go/mooncake/client"
	"github.com/mooncake-go/mooncake/internal/base"
	"github.com/mooncake-go/mooncake/internal/testutil"
	"github.com/mooncake-go/mooncake/server/memory"
	"github.com/mooncake-go/mooncake/server/worker"
	"github.com/mooncake-go/mooncake/transfer"
)

// TestConcurrentUpsertKeepsCommittedVersion: upserts of one key racing on a real worker over
// TCP. Whatever versions win or lose, the version the master lists must stay readable: a
// worker must not drop the master's committed version because a newer, never-committed
// version of the key landed on it first.
func TestConcurrentUpsertKeepsCommittedVersion(t *testing.T) {
	ip := startInproc(t, 1, 64<<20)
	c := connect(t, ip)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	const key = "race"
	if err := c.Put(ctx, key, []byte("v0"), client.ReplicateConfig{Upsert: true}); err != nil {
		t.Fatal(err)
	}
	for round := range 12 {
		var wg sync.WaitGroup
		for i := range 48 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				// Errors are expected (a put superseded by a newer one fails); losing the
				// committed version is not.
				_ = c.Put(ctx, key, []byte(fmt.Sprintf("r%d-g%d", round, i)), client.ReplicateConfig{Upsert: true})
			}()
		}
		wg.Wait()
		if _, err := c.Get(ctx, key); err != nil {
			t.Fatalf("round %d: get after concurrent upserts: %v", round, err)
		}
	}
	// Every version but the listed one is owed a drop: once they arrive the worker holds no
	// replaced version (a missed drop would hold one for good).
	raw := rawClient(t)
	testutil.WaitFor(t, "every replaced version dropped", 30*time.Second, func() error {
		if h := workerHeldBytes(ctx, t, raw, ip.workers[0].Addr()); h != 0 {
			return fmt.Errorf("the worker still holds %d bytes of replaced versions", h)
		}
		return nil
	})
	if _, err := c.Get(ctx, key); err != nil {
		t.Fatalf("get once settled: %v", err)
	}
}

// rawClient is a protocol client for calls the client package does not make.
func rawClient(t *testing.T) *transfer.Client {
	t.Helper()
	raw, err := transfer.NewClient(transfer.ClientOptions{Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { raw.Close() })
	return raw
}

// workerHeldBytes returns the worker's held DRAM bytes (its memory report's held_bytes):
// copies detached from the index, which include the replaced versions it keeps.
func workerHeldBytes(ctx context.Context, t *testing.T, raw *transfer.Client, worker string) int64 {
	t.Helper()
	resp := &transfer.JSONResponse{Call: transfer.OpWorkerMemory}
	if err := raw.Call(ctx, worker, transfer.NewEmpty(transfer.OpWorkerMemory), resp); err != nil {
		t.Fatal(err)
	}
	var wm memory.WorkerMemory
	if err := json.Unmarshal(resp.JSON, &wm); err != nil {
		t.Fatal(err)
	}
	return wm.HeldBytes
}

// TestUpsertPutEndFailsKeepsCommittedVersion reproduces the durability window of upserts step
// by step, over raw protocol calls: an upsert's bytes are written to the worker (which
// commits them locally) but its PutEnd then fails for good (a newer put superseded it) or
// never comes (revoked), while the master still lists the version acknowledged before. That
// version must stay readable throughout, its bytes held (and counted) by the worker until the
// master's drop settles the key, and freed then.
func TestUpsertPutEndFailsKeepsCommittedVersion(t *testing.T) {
	// Drops reach the worker with its heartbeats: beat often, so the test waits less.
	ip := startInprocWith(t, 1, 64<<20, func(cfg *worker.Config) { cfg.HeartbeatInterval = 50 * time.Millisecond })
	c := connectWith(t, ip, client.Config{LookupCacheTTL: -1})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	raw := rawClient(t)
	master, worker := ip.master.Addr(), ip.workers[0].Addr()
	const key = "window"
	v1 := bytes.Repeat([]byte("committed "), 6400) // 64,000 bytes
	if err := c.Put(ctx, key, v1, client.ReplicateConfig{}); err != nil {
		t.Fatal(err)
	}
	mustRead := func(when string) {
		t.Helper()
		got, err := c.Get(ctx, key)
		if err != nil || !bytes.Equal(got, v1) {
			t.Fatalf("%s: get: %v (%d bytes, want the committed %d)", when, err, len(got), len(v1))
		}
	}
	held := func() int64 {
		t.Helper()
		return workerHeldBytes(ctx, t, raw, worker)
	}
	upsert := base.PutConfig{Replicas: 1, Upsert: true}
	start := func(size int) *transfer.PutStartResponse {
		t.Helper()
		ps := &transfer.PutStartResponse{}
		if err := raw.Call(ctx, master,
			&transfer.PutStartRequest{Object: base.Object{ObjectMeta: base.ObjectMeta{Key: key, Size: int64(size)}},
				Config: upsert}, ps); err != nil {
			t.Fatal(err)
		}
		return ps
	}
	write := func(ps *transfer.PutStartResponse, val []byte) error {
		return raw.Write(ctx, ps.Replicas[0].Address, transfer.WriteRequest{Key: key, Version: ps.Version, Checksum: base.Checksum(val)}, val)
	}
	settled := func(when string) {
		t.Helper()
		testutil.WaitFor(t, when, 30*time.Second, func() error {
			mustRead(when)
			if h := held(); h != 0 {
				return fmt.Errorf("the worker still holds %d bytes", h)
			}
			return nil
		})
		mustRead(when)
	}

	// v2 is written, so committed on the worker, and its put then fails for good: v3's
	// PutStart supersedes it and its PutEnd is refused.
	v2 := bytes.Repeat([]byte("never committed "), 2000)
	ps2 := start(len(v2))
	if err := write(ps2, v2); err != nil {
		t.Fatal(err)
	}
	mustRead("v2 committed on the worker, not on the master")
	if h := held(); h != int64(len(v1)) {
		t.Fatalf("held bytes %d after v2's local commit, want v1's %d", h, len(v1))
	}
	ps3 := start(100)
	err := raw.Call(ctx, master, &transfer.PutEndRequest{Object: base.Object{ObjectMeta: base.ObjectMeta{Key: key,
		Version: ps2.Version, Size: int64(len(v2)), Checksum: base.Checksum(v2)}}, Config: upsert}, nil)
	if !errors.Is(err, base.ErrInvalidVersion) {
		t.Fatalf("PutEnd of a superseded put: %v, want ErrInvalidVersion", err)
	}
	mustRead("v2's PutEnd refused")
	settled("v2 dropped") // the drop of v2 makes v1 current again on the worker

	// v3 is revoked before any byte of it reached the worker, then written late.
	if err := raw.Call(ctx, master, &transfer.PutRevokeRequest{Key: key, Version: ps3.Version}, nil); err != nil {
		t.Fatal(err)
	}
	_ = write(ps3, bytes.Repeat([]byte("z"), 100)) // refused once the drop arrived; else dropped after
	mustRead("v3 written after its revoke")
	settled("v3 dropped")

	// A put that commits replaces v1 for good; the master's drop of v1 frees it.
	v4 := []byte("the next committed version")
	if err := c.Put(ctx, key, v4, client.ReplicateConfig{Upsert: true}); err != nil {
		t.Fatal(err)
	}
	if got, err := c.Get(ctx, key); err != nil || !bytes.Equal(got, v4) {
		t.Fatalf("get after a committed upsert: %v %q", err, got)
	}
	testutil.WaitFor(t, "v1 dropped after v4 committed", 30*time.Second, func() error {
		if h := held(); h != 0 {
			return fmt.Errorf("v1 still held: %d bytes", h)
		}
		return nil
	})
}
