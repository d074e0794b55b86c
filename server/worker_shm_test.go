package server

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/mooncake-go/mooncake/internal/base"
	"github.com/mooncake-go/mooncake/server/worker"
	"github.com/mooncake-go/mooncake/transfer"
)

// startShm runs one master and one worker (its arena shared unless private) and returns
// them with a transfer client for calls straight to the worker.
type shmSetup struct {
	worker *worker.Worker
	addr   string // the master's
}

func (s *shmSetup) Addr() string { return s.addr }

func startShm(t *testing.T, private bool, ttl time.Duration, opts ...func(*worker.Config)) (*shmSetup, *transfer.Client) {
	t.Helper()
	c := startMasters(t, 1, nil)
	w := c.addWorker("", func(cfg *worker.Config) {
		cfg.GlobalSegmentSize = 16 << 20
		cfg.PrivateArena = private
		cfg.ShmLeaseTTL = ttl
		for _, o := range opts {
			o(cfg)
		}
	})
	cli, err := transfer.NewClient(transfer.ClientOptions{Logger: testLogger()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cli.Close() })
	return &shmSetup{worker: w, addr: c.masters[0].Addr()}, cli
}

// TestShmPinRelease maps the worker's arena the way a client on this host does, pins an
// object, reads it from the mapping, and checks how each kind of lease end is reported.
func TestShmPinRelease(t *testing.T) {
	s, cli := startShm(t, false, 0)
	d := newDriver(t, []string{s.Addr()})
	val := bytes.Repeat([]byte("0123456789abcdef"), 1<<14) // 256 KiB
	if err := d.put("k", val, 1, false); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	waddr := s.worker.Addr()
	var info transfer.ShmOpenResponse
	if err := cli.Call(ctx, waddr, transfer.NewEmpty(transfer.OpShmOpen), &info); err != nil {
		t.Fatal(err)
	}
	if info.BootID != transfer.BootID() || info.ArenaID == 0 || info.LeaseTTL != worker.DefaultShmLeaseTTL {
		t.Fatalf("ShmOpen: %+v", info)
	}
	a, err := transfer.MapSharedArena(&info)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()

	pin := func(req *transfer.ShmPinRequest) *transfer.ShmPinResponse {
		t.Helper()
		var resp transfer.ShmPinResponse
		if err := cli.Call(ctx, waddr, req, &resp); err != nil {
			t.Fatalf("pin %+v: %v", req, err)
		}
		return &resp
	}
	release := func(leases ...uint64) int64 {
		t.Helper()
		resp := transfer.NewCountResponse(transfer.OpShmRelease, 0)
		if err := cli.Call(ctx, waddr, &transfer.ShmReleaseRequest{Leases: leases}, resp); err != nil {
			t.Fatal(err)
		}
		return resp.Count
	}

	// The whole object, then a range: the bytes at the offsets are the object's.
	p := pin(&transfer.ShmPinRequest{Key: "k"})
	if p.ArenaID != info.ArenaID || p.Length != int64(len(val)) || p.Size != int64(len(val)) || p.Checksum != base.Checksum(val) || p.Tier != base.TierDRAM {
		t.Fatalf("pin: %+v", p)
	}
	b, err := a.Bytes(p.ArenaOffset, p.Length)
	if err != nil || !bytes.Equal(b, val) {
		t.Fatalf("mapped bytes differ: %v", err)
	}
	r := pin(&transfer.ShmPinRequest{Key: "k", Version: p.Version, Offset: 1000, Length: 24})
	if b, _ := a.Bytes(r.ArenaOffset, r.Length); !bytes.Equal(b, val[1000:1024]) || r.ArenaOffset != p.ArenaOffset+1000 {
		t.Fatalf("range: %+v", r)
	}
	if got := s.worker.TestHooks().ShmLeases(); got != 2 {
		t.Fatalf("%d leases held, want 2", got)
	}
	// Released once: counted; twice, or unknown: not.
	if n := release(p.Lease, r.Lease, 12345); n != 2 {
		t.Fatalf("release counted %d, want 2", n)
	}
	if n := release(p.Lease); n != 0 {
		t.Fatalf("second release counted %d", n)
	}

	// Errors: another version, a key that is not there, a range outside the object.
	var resp transfer.ShmPinResponse
	for _, c := range []struct {
		req  transfer.ShmPinRequest
		want error
	}{
		{transfer.ShmPinRequest{Key: "k", Version: p.Version + 1}, base.ErrInvalidVersion},
		{transfer.ShmPinRequest{Key: "nope"}, base.ErrObjectNotFound},
		{transfer.ShmPinRequest{Key: "k", Offset: int64(len(val)) + 1}, base.ErrInvalidParams},
		{transfer.ShmPinRequest{Key: "k", Offset: 10, Length: int64(len(val))}, base.ErrInvalidParams},
	} {
		if err := cli.Call(ctx, waddr, &c.req, &resp); !errors.Is(err, c.want) {
			t.Fatalf("pin %+v: %v, want %v", c.req, err, c.want)
		}
	}

	// A lease ends with the connection that made it: the client died or gave up.
	p = pin(&transfer.ShmPinRequest{Key: "k"})
	cli.ClosePeer(waddr)
	eventually(t, "lease ended with its connection", func() bool { return s.worker.TestHooks().ShmLeases() == 0 })
	if n := release(p.Lease); n != 0 {
		t.Fatalf("release after the connection ended counted %d", n)
	}

	// Removing the object while it is pinned does not free its bytes until the release.
	p = pin(&transfer.ShmPinRequest{Key: "k"})
	var rm transfer.Empty
	if err := d.call(&transfer.RemoveRequest{Key: "k"}, &rm); err != nil {
		t.Fatal(err)
	}
	eventually(t, "worker dropped the removed object", func() bool {
		r, err := s.worker.TestHooks().Engine().Get("k", 0)
		if err == nil {
			r.Release()
		}
		return errors.Is(err, base.ErrObjectNotFound)
	})
	other := bytes.Repeat([]byte{0xEE}, len(val))
	for i := range 80 { // 20 MiB through a 16 MiB arena: evictions reuse every range not pinned
		if err := d.put(fmt.Sprintf("other%d", i), other, 1, false); err != nil {
			t.Fatal(err)
		}
	}
	if b, _ := a.Bytes(p.ArenaOffset, p.Length); !bytes.Equal(b, val) {
		t.Fatal("a pinned range was reused while its lease was held")
	}
	if n := release(p.Lease); n != 1 {
		t.Fatalf("release counted %d, want 1", n)
	}
}

// TestShmLeaseTTL: a lease never released ends after the TTL (the sweeper), and the release
// that comes too late says so.
func TestShmLeaseTTL(t *testing.T) {
	s, cli := startShm(t, false, 50*time.Millisecond)
	d := newDriver(t, []string{s.Addr()})
	if err := d.put("k", []byte("value"), 1, false); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	var p transfer.ShmPinResponse
	if err := cli.Call(ctx, s.worker.Addr(), &transfer.ShmPinRequest{Key: "k"}, &p); err != nil {
		t.Fatal(err)
	}
	eventually(t, "lease expired", func() bool { return s.worker.TestHooks().ShmLeases() == 0 })
	resp := transfer.NewCountResponse(transfer.OpShmRelease, 0)
	if err := cli.Call(ctx, s.worker.Addr(), &transfer.ShmReleaseRequest{Leases: []uint64{p.Lease}}, resp); err != nil || resp.Count != 0 {
		t.Fatalf("late release: %d %v", resp.Count, err)
	}
}

// TestShmPrivateArena: a worker with a private arena refuses the shared-memory calls with
// NOT_SUPPORTED (clients then read over TCP).
func TestShmPrivateArena(t *testing.T) {
	s, cli := startShm(t, true, 0)
	d := newDriver(t, []string{s.Addr()})
	if err := d.put("k", []byte("value"), 1, false); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	var info transfer.ShmOpenResponse
	if err := cli.Call(ctx, s.worker.Addr(), transfer.NewEmpty(transfer.OpShmOpen), &info); !errors.Is(err, base.ErrNotSupported) {
		t.Fatalf("ShmOpen: %v", err)
	}
	var p transfer.ShmPinResponse
	if err := cli.Call(ctx, s.worker.Addr(), &transfer.ShmPinRequest{Key: "k"}, &p); !errors.Is(err, base.ErrNotSupported) {
		t.Fatalf("ShmPin: %v", err)
	}
	touch := &transfer.ShmTouchRequest{Items: []base.KeyVersion{{Key: "k"}}}
	if err := cli.Call(ctx, s.worker.Addr(), touch, transfer.NewBatchResponse(transfer.OpShmTouch, nil)); !errors.Is(err, base.ErrNotSupported) {
		t.Fatalf("ShmTouch: %v", err)
	}
	d.mustGet("k", []byte("value"), 1)
}

// TestShmTouchAndGenerations: ShmTouch counts DRAM hits for objects the worker holds and
// reports misses per item; the copy generation of a key's slot (mapped with the arena) moves
// when its DRAM copy stops being the object's: replaced by an upsert, removed.
func TestShmTouchAndGenerations(t *testing.T) {
	s, cli := startShm(t, false, 0)
	d := newDriver(t, []string{s.Addr()})
	if err := d.put("k", []byte("value one"), 1, false); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	waddr := s.worker.Addr()
	var info transfer.ShmOpenResponse
	if err := cli.Call(ctx, waddr, transfer.NewEmpty(transfer.OpShmOpen), &info); err != nil {
		t.Fatal(err)
	}
	if info.GenSize != transfer.ShmGenSlots*8 || info.GenInode == 0 {
		t.Fatalf("ShmOpen without a generation table: %+v", info)
	}
	a, err := transfer.MapSharedArena(&info)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	g0, ok := a.Gen("k")
	if !ok {
		t.Fatal("generation table not mapped")
	}

	lr, err := d.lookup("k")
	if err != nil {
		t.Fatal(err)
	}
	hits := s.worker.TestHooks().Engine().Metrics().HitsDRAM
	resp := transfer.NewBatchResponse(transfer.OpShmTouch, nil)
	req := &transfer.ShmTouchRequest{Items: []base.KeyVersion{
		{Key: "k", Version: lr.Version}, {Key: "missing", Version: 1}, {Key: "k", Version: lr.Version + 99}, {Key: "k"}}}
	if err := cli.Call(ctx, waddr, req, resp); err != nil {
		t.Fatal(err)
	}
	want := []base.Code{base.CodeOK, base.CodeObjectNotFound, base.CodeInvalidVersion, base.CodeOK}
	for i, it := range resp.Items {
		if i >= len(want) || it.Code != want[i] {
			t.Fatalf("touch answers %+v, want codes %v", resp.Items, want)
		}
	}
	if got := s.worker.TestHooks().Engine().Metrics().HitsDRAM; got != hits+2 {
		t.Fatalf("DRAM hits %d after two touches from %d", got, hits)
	}
	if g, _ := a.Gen("k"); g != g0 {
		t.Fatalf("generation moved from %d to %d with no change to k", g0, g)
	}

	if err := d.put("k", []byte("value two"), 1, true); err != nil {
		t.Fatal(err)
	}
	g1, _ := a.Gen("k")
	if g1 == g0 {
		t.Fatal("generation unchanged after an upsert replaced k's DRAM copy")
	}
	if err := d.call(&transfer.RemoveRequest{Key: "k"}, nil); err != nil {
		t.Fatal(err)
	}
	eventually(t, "generation moved after the remove", func() bool { g, _ := a.Gen("k"); return g != g1 })
}

// TestReadByReferenceOverTCP: with TCPSendfile, a verified TCP read of an object in a shared
// (memfd) arena is sent by reference (sendfile) and arrives intact; an unverified one, any
// read from a private (anonymous) arena, and any read without TCPSendfile, is copied.
func TestReadByReferenceOverTCP(t *testing.T) {
	for _, tc := range []struct{ private, sendfile bool }{{false, true}, {true, true}, {false, false}} {
		private := tc.private
		s, cli := startShm(t, private, 0, func(cfg *worker.Config) { cfg.TCPSendfile = tc.sendfile })
		d := newDriver(t, []string{s.Addr()})
		val := bytes.Repeat([]byte("0123456789abcdef"), 1<<16) // 1 MiB
		if err := d.put("k", val, 1, false); err != nil {
			t.Fatal(err)
		}
		ctx := context.Background()
		sends := func() int64 { return s.worker.TestHooks().RPCStats().SendfileSends }
		read := func(verifies bool) int64 {
			t.Helper()
			before := sends()
			dst := make([]byte, len(val))
			rr, n, sum, err := cli.ReadSum(ctx, s.worker.Addr(), transfer.ReadRequest{Key: "k", Verifies: verifies}, dst)
			if err != nil || n != len(val) || sum != rr.Checksum || !bytes.Equal(dst, val) {
				t.Fatalf("private %v, verifies %v: %d %v", private, verifies, n, err)
			}
			return sends() - before
		}
		want := int64(1)
		if private || !tc.sendfile {
			want = 0
		}
		if got := read(true); got != want {
			t.Fatalf("private %v: %d verified reads by reference, want %d", private, got, want)
		}
		if got := read(false); got != 0 {
			t.Fatalf("private %v: an unverified read went by reference", private)
		}
		if st := s.worker.TestHooks().RPCStats(); st.SendfileRefused != 0 {
			t.Fatalf("refused sends: %+v", st)
		}
	}
}

// TestShmPinNVMeOnly: an object the worker holds on NVMe alone is not read to answer a pin
// (NOT_SUPPORTED: the client reads it over TCP), so a get of it reads NVMe once, not twice;
// the TCP reads bring it back into DRAM, and the next pin serves it from the arena.
func TestShmPinNVMeOnly(t *testing.T) {
	root := t.TempDir()
	s, cli := startShm(t, false, 0, func(cfg *worker.Config) { cfg.RootFSDir = root })
	d := newDriver(t, []string{s.Addr()})
	val := bytes.Repeat([]byte("nvme-only "), 25_000) // 250 KB
	if err := d.put("k", val, 1, false); err != nil {
		t.Fatal(err)
	}
	eng := s.worker.TestHooks().Engine()
	other := bytes.Repeat([]byte{0xEE}, len(val))
	for i := 0; ; i++ { // spill mode: eviction writes k to NVMe and drops its DRAM copy
		if info, err := eng.Info("k", 0); err == nil && info.Tier == base.TierNVMe {
			break
		}
		if i == 500 {
			t.Fatal("k never left DRAM")
		}
		if err := d.put(fmt.Sprintf("other%d", i), other, 1, false); err != nil {
			t.Fatal(err)
		}
	}
	ctx := context.Background()
	reads := eng.Metrics().HitsNVMe
	var p transfer.ShmPinResponse
	if err := cli.Call(ctx, s.worker.Addr(), &transfer.ShmPinRequest{Key: "k"}, &p); !errors.Is(err, base.ErrNotSupported) {
		t.Fatalf("pin of an NVMe-only object: %v, want NOT_SUPPORTED", err)
	}
	if got := eng.Metrics().HitsNVMe; got != reads {
		t.Fatalf("the refused pin read NVMe %d times", got-reads)
	}
	d.mustGet("k", val, 1) // over TCP: one NVMe read
	if got := eng.Metrics().HitsNVMe; got != reads+1 {
		t.Fatalf("the get read NVMe %d times, want 1", got-reads)
	}
	d.mustGet("k", val, 1) // the second hit brings it back (the policy's second-hit admission)
	if info, err := eng.Info("k", 0); err != nil || info.Tier != base.TierDRAM {
		t.Fatalf("after two reads: %+v %v, want it back in DRAM", info, err)
	}
	if err := cli.Call(ctx, s.worker.Addr(), &transfer.ShmPinRequest{Key: "k"}, &p); err != nil || p.Tier != base.TierDRAM {
		t.Fatalf("pin after the read: %+v %v", p, err)
	}
}
