package server

import (
	"context"
	"errors"
	"testing"

	"github.com/mooncake-go/mooncake/internal/base"
	"github.com/mooncake-go/mooncake/server/worker"
	"github.com/mooncake-go/mooncake/transfer"
)

// TestShmPutStaged drives the worker's side of same-host puts the way a client on this host
// does: a staging area is refused to another host, then opened and mapped read-write; a value
// staged in chunks lands, is verified and committed; a staged byte changed before the worker's
// copy fails the checksum and nothing is stored; bad ranges and unknown areas are refused; the
// area ends with its connection.
func TestShmPutStaged(t *testing.T) {
	s, cli := startShm(t, false, 0)
	d := newDriver(t, []string{s.Addr()})
	ctx := context.Background()
	waddr := s.worker.Addr()

	var info transfer.ShmPutOpenResponse
	if err := cli.Call(ctx, waddr, &transfer.ShmPutOpenRequest{BootID: "another-host"}, &info); !errors.Is(err, base.ErrNotSupported) {
		t.Fatalf("ShmPutOpen from another host: %v", err)
	}
	if n := s.worker.TestHooks().ShmPutStages(); n != 0 {
		t.Fatalf("%d staging areas after a refusal", n)
	}
	if err := cli.Call(ctx, waddr, &transfer.ShmPutOpenRequest{BootID: transfer.BootID()}, &info); err != nil {
		t.Fatal(err)
	}
	a, err := transfer.MapStagingArea(&info)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	if info.Stage == 0 || a.Size() != worker.ShmPutStageSize || s.worker.TestHooks().ShmPutStages() != 1 {
		t.Fatalf("ShmPutOpen: %+v, %d areas", info, s.worker.TestHooks().ShmPutStages())
	}

	start := func(key string, size int64) *transfer.PutStartResponse {
		t.Helper()
		ps := &transfer.PutStartResponse{}
		if err := d.call(&transfer.PutStartRequest{Object: base.Object{ObjectMeta: base.ObjectMeta{Key: key, Size: size}},
			Config: base.PutConfig{Replicas: 1}}, ps); err != nil {
			t.Fatal(err)
		}
		return ps
	}
	write := func(stage uint64, stageOff int64, w transfer.WriteRequest, n int64) error {
		return cli.Call(ctx, waddr, &transfer.ShmPutWriteRequest{Stage: stage, StageOffset: stageOff, Length: n, Write: w},
			transfer.NewEmpty(transfer.OpShmPutWrite))
	}

	// A value of three 1 MiB chunks, staged at different offsets, landed out of order.
	val := make([]byte, 3<<20)
	for i := range val {
		val[i] = byte(i*31 + i>>12)
	}
	sum := base.Checksum(val)
	ps := start("k", int64(len(val)))
	buf, err := a.Bytes(0, a.Size())
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []int64{2, 0, 1} {
		stageOff := (5 - c) << 20
		copy(buf[stageOff:], val[c<<20:(c+1)<<20])
		w := transfer.WriteRequest{Key: "k", Version: ps.Version, TotalSize: int64(len(val)), Offset: c << 20}
		if err := write(info.Stage, stageOff, w, 1<<20); err != nil {
			t.Fatalf("chunk %d: %v", c, err)
		}
	}
	if err := cli.Call(ctx, waddr, &transfer.CommitRequest{Key: "k", Version: ps.Version, Checksum: sum}, transfer.NewEmpty(transfer.OpCommit)); err != nil {
		t.Fatal(err)
	}
	if err := d.call(&transfer.PutEndRequest{Object: base.Object{ObjectMeta: base.ObjectMeta{Key: "k",
		Version: ps.Version, Size: int64(len(val)), Checksum: sum},
		Replicas: []base.WorkerID{ps.Replicas[0].WorkerID}}, Config: base.PutConfig{Replicas: 1}}, nil); err != nil {
		t.Fatal(err)
	}
	d.mustGet("k", val, 1)

	// A byte changed in the staging area after the checksum was taken: refused, not stored.
	small := val[:100_000]
	ps = start("bad", int64(len(small)))
	copy(buf, small)
	buf[777] ^= 0x40
	w := transfer.WriteRequest{Key: "bad", Version: ps.Version, TotalSize: int64(len(small)), Checksum: base.Checksum(small), Commit: true}
	if err := write(info.Stage, 0, w, int64(len(small))); !errors.Is(err, base.ErrCorruption) {
		t.Fatalf("staged write of a changed byte: %v", err)
	}
	if r, err := s.worker.TestHooks().Engine().Get("bad", 0); !errors.Is(err, base.ErrObjectNotFound) {
		if err == nil {
			r.Release()
		}
		t.Fatalf("a corrupted staged put is on the worker: %v", err)
	}
	// The same put over TCP (what the client falls back to) then succeeds from scratch.
	if err := cli.Write(ctx, waddr, w, small); err != nil {
		t.Fatalf("TCP write after the staged one failed: %v", err)
	}

	// Refusals: an unknown area, a range outside the area, a chunk outside the object.
	for _, c := range []struct {
		stage    uint64
		stageOff int64
		n        int64
		w        transfer.WriteRequest
		want     error
	}{
		{info.Stage + 1, 0, 10, transfer.WriteRequest{Key: "x", Version: 1, TotalSize: 10, Commit: true}, base.ErrNotSupported},
		{info.Stage, worker.ShmPutStageSize - 5, 10, transfer.WriteRequest{Key: "x", Version: 1, TotalSize: 10, Commit: true}, base.ErrInvalidParams},
		{info.Stage, 0, 10, transfer.WriteRequest{Key: "x", Version: 1, TotalSize: 5, Commit: true}, base.ErrInvalidParams},
	} {
		if err := write(c.stage, c.stageOff, c.w, c.n); !errors.Is(err, c.want) {
			t.Fatalf("write %+v: %v, want %v", c, err, c.want)
		}
	}

	// The client dies mid-put (a chunk landed, no commit): its area ends with its connection,
	// and nothing of the put becomes visible.
	ps = start("dies", 2<<20)
	copy(buf, val[:1<<20])
	if err := write(info.Stage, 0, transfer.WriteRequest{Key: "dies", Version: ps.Version, TotalSize: 2 << 20}, 1<<20); err != nil {
		t.Fatal(err)
	}
	cli.ClosePeer(waddr)
	eventually(t, "staging area ended with its connection", func() bool { return s.worker.TestHooks().ShmPutStages() == 0 })
	if err := write(info.Stage, 0, transfer.WriteRequest{Key: "dies", Version: ps.Version, TotalSize: 2 << 20, Offset: 1 << 20}, 1<<20); !errors.Is(err, base.ErrNotSupported) {
		t.Fatalf("write through an ended area: %v", err)
	}
	if _, err := d.lookup("dies"); !errors.Is(err, base.ErrObjectNotFound) {
		t.Fatalf("lookup of a put whose client died: %v", err)
	}
}

// TestShmPutLimits: a worker holds at most worker.ShmPutMaxStages areas (later clients put over
// TCP), ShmPutClose frees one, and a worker with private memory opens none.
func TestShmPutLimits(t *testing.T) {
	s, cli := startShm(t, false, 0)
	ctx := context.Background()
	waddr := s.worker.Addr()
	var first transfer.ShmPutOpenResponse
	for i := range worker.ShmPutMaxStages {
		var info transfer.ShmPutOpenResponse
		if err := cli.Call(ctx, waddr, &transfer.ShmPutOpenRequest{BootID: transfer.BootID()}, &info); err != nil {
			t.Fatalf("area %d: %v", i, err)
		}
		if i == 0 {
			first = info
		}
	}
	var info transfer.ShmPutOpenResponse
	if err := cli.Call(ctx, waddr, &transfer.ShmPutOpenRequest{BootID: transfer.BootID()}, &info); !errors.Is(err, base.ErrNotSupported) {
		t.Fatalf("area past the limit: %v", err)
	}
	if err := cli.Call(ctx, waddr, &transfer.ShmPutCloseRequest{Stage: first.Stage}, transfer.NewEmpty(transfer.OpShmPutClose)); err != nil {
		t.Fatal(err)
	}
	if err := cli.Call(ctx, waddr, &transfer.ShmPutOpenRequest{BootID: transfer.BootID()}, &info); err != nil {
		t.Fatalf("area after a close: %v", err)
	}

	p, pcli := startShm(t, true, 0)
	if err := pcli.Call(ctx, p.worker.Addr(), &transfer.ShmPutOpenRequest{BootID: transfer.BootID()}, &info); !errors.Is(err, base.ErrNotSupported) {
		t.Fatalf("ShmPutOpen on a private worker: %v", err)
	}
}
