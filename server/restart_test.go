package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mooncake-go/mooncake/internal/base"
	"github.com/mooncake-go/mooncake/internal/testutil"
	"github.com/mooncake-go/mooncake/server/master"
	"github.com/mooncake-go/mooncake/server/worker"
	"github.com/mooncake-go/mooncake/transfer"
)

// TestWorkerDeadAfterTTL stops a worker's heartbeats without the final "leaving" heartbeat of
// a graceful shutdown (as a crash or SIGKILL would) and checks that the leader marks it dead
// through raft after ClientTTL, although the master has a long WorkerRestartGrace: its
// replicas are dropped, objects that had another replica stay readable, and objects it held
// alone are gone.
func TestWorkerDeadAfterTTL(t *testing.T) {
	dead := make(chan base.WorkerID, 4)
	c := startMasters(t, 1, func(cfg *master.Config) {
		cfg.ClientTTL = 300 * time.Millisecond
		cfg.WorkerRestartGrace = time.Hour // never reached: the test fails at testWait instead
		cfg.Test.OnWorkerDead = func(id base.WorkerID) { dead <- id }
	})
	w1 := c.addWorker("", nil)
	w2 := c.addWorker("", func(cfg *worker.Config) { cfg.Test.NoLeavingBeat = true })
	d := newDriver(t, c.masterAddrs())
	if err := d.put("both", []byte("on two workers"), 2, false); err != nil {
		t.Fatal(err)
	}
	// A single replica on w2, by preference.
	ps := &transfer.PutStartResponse{}
	if err := d.call(&transfer.PutStartRequest{Object: base.Object{ObjectMeta: base.ObjectMeta{Key: "alone", Size: 5}},
		Config: base.PutConfig{Replicas: 1, PreferredWorker: w2.ID()}}, ps); err != nil {
		t.Fatal(err)
	}
	if ps.Replicas[0].WorkerID != w2.ID() {
		t.Fatalf("preferred worker ignored: %v", ps.Replicas)
	}
	if err := d.cli.Write(context.Background(), ps.Replicas[0].Address, transfer.WriteRequest{Key: "alone", Version: ps.Version}, []byte("alone")); err != nil {
		t.Fatal(err)
	}
	if err := d.call(&transfer.PutEndRequest{Object: base.Object{ObjectMeta: base.ObjectMeta{Key: "alone",
		Version: ps.Version, Size: 5, Checksum: base.Checksum([]byte("alone"))}}}, nil); err != nil {
		t.Fatal(err)
	}

	ctx, cancel := context.WithTimeout(context.Background(), testWait)
	defer cancel()
	if err := w2.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case id := <-dead:
		if id != w2.ID() {
			t.Fatalf("marked dead: %s, want %s", id, w2.ID())
		}
	case <-ctx.Done():
		t.Fatal("worker not marked dead")
	}
	d.mustGet("both", []byte("on two workers"), 1)
	if _, err := d.lookup("alone"); !errors.Is(err, base.ErrObjectNotFound) {
		t.Fatalf("object held only by the dead worker: %v", err)
	}
	st := d.status()
	for _, ws := range st.Workers {
		want := "active"
		if ws.ID == string(w2.ID()) {
			want = "dead"
		}
		if ws.State != want {
			t.Fatalf("worker %s state %s, want %s", ws.ID, ws.State, want)
		}
	}
	// New puts avoid the dead worker.
	if err := d.put("x", []byte("x"), 2, false); !errors.Is(err, base.ErrNoSpace) {
		t.Fatalf("2 replicas with one live worker: %v", err)
	}
	if err := d.put("x", []byte("x"), 1, false); err != nil {
		t.Fatal(err)
	}
	_ = w1
}

// TestPutTimeout: a put that never reaches PutEnd is forgotten by the leader after
// PutTimeout; its workers drop the bytes; a late PutEnd is refused and nothing is visible.
func TestPutTimeout(t *testing.T) {
	c := startMasters(t, 1, func(cfg *master.Config) { cfg.PutTimeout = 200 * time.Millisecond })
	w := c.addWorker("", func(cfg *worker.Config) { cfg.PendingWriteTimeout = time.Hour })
	d := newDriver(t, c.masterAddrs())
	ps := &transfer.PutStartResponse{}
	if err := d.call(&transfer.PutStartRequest{Object: base.Object{ObjectMeta: base.ObjectMeta{Key: "slow",
		Size: 4}}}, ps); err != nil {
		t.Fatal(err)
	}
	if err := d.cli.Write(context.Background(), ps.Replicas[0].Address, transfer.WriteRequest{Key: "slow", Version: ps.Version}, []byte("slow")); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the worker drops the expired put", func() bool { return !w.TestHooks().Engine().Exists("slow") })
	err := d.call(&transfer.PutEndRequest{Object: base.Object{ObjectMeta: base.ObjectMeta{Key: "slow",
		Version: ps.Version, Size: 4, Checksum: base.Checksum([]byte("slow"))}}}, nil)
	if !errors.Is(err, base.ErrInvalidVersion) {
		t.Fatalf("late PutEnd: %v", err)
	}
	if _, err := d.lookup("slow"); !errors.Is(err, base.ErrObjectNotFound) {
		t.Fatalf("expired put visible: %v", err)
	}
	// PutRevoke drops at once.
	if err := d.call(&transfer.PutStartRequest{Object: base.Object{ObjectMeta: base.ObjectMeta{Key: "revoked",
		Size: 1}}}, ps); err != nil {
		t.Fatal(err)
	}
	if err := d.cli.Write(context.Background(), ps.Replicas[0].Address, transfer.WriteRequest{Key: "revoked", Version: ps.Version}, []byte("r")); err != nil {
		t.Fatal(err)
	}
	if err := d.call(&transfer.PutRevokeRequest{Key: "revoked", Version: ps.Version}, nil); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the worker drops the revoked put", func() bool { return !w.TestHooks().Engine().Exists("revoked") })
}

// TestWorkerDropPending: a drop at one version aborts only that version's pending write; a
// drop at version 0 aborts every pending write of the key; other keys are left alone.
func TestWorkerDropPending(t *testing.T) {
	c := startMasters(t, 1, nil)
	w := c.addWorker("", nil)
	type pendKey = worker.PendingWrite
	for _, k := range []pendKey{{Key: "k", Version: 7}, {Key: "k", Version: 8}, {Key: "k", Version: 9}, {Key: "other", Version: 7}} {
		sink, err := w.TestHooks().BeginWrite(&transfer.WriteRequest{Key: k.Key, Version: k.Version, TotalSize: 10}, 5)
		if err != nil {
			t.Fatal(err)
		}
		if err := sink.Done(nil); err != nil {
			t.Fatal(err)
		}
	}
	pendingKeys := w.TestHooks().PendingWrites // sorted by key, then version
	if err := w.TestHooks().Drop("k", 8); err != nil {
		t.Fatalf("drop of a pending version: %v", err)
	}
	if got, want := pendingKeys(), []pendKey{{Key: "k", Version: 7}, {Key: "k", Version: 9}, {Key: "other", Version: 7}}; !slices.Equal(got, want) {
		t.Fatalf("pending after dropping k at 8: %v, want %v", got, want)
	}
	_ = w.TestHooks().Drop("other", 3) // no such version: nothing pending changes
	if err := w.TestHooks().Drop("k", 0); err != nil {
		t.Fatalf("drop of every version: %v", err)
	}
	if got, want := pendingKeys(), []pendKey{{Key: "other", Version: 7}}; !slices.Equal(got, want) {
		t.Fatalf("pending after dropping k: %v, want %v", got, want)
	}
}

// TestWorkerPendingTimeout: bytes written without a Commit are dropped by the worker itself.
func TestWorkerPendingTimeout(t *testing.T) {
	c := startMasters(t, 1, nil)
	w := c.addWorker("", func(cfg *worker.Config) { cfg.PendingWriteTimeout = 100 * time.Millisecond })
	d := newDriver(t, c.masterAddrs())
	// A striped write whose Commit never comes: only the first chunk.
	ctx := context.Background()
	if err := d.cli.Call(ctx, w.Addr(), &transfer.CommitRequest{Key: "k", Version: 1}, nil); !errors.Is(err, base.ErrObjectNotFound) {
		t.Fatalf("commit of nothing: %v", err)
	}
	sink, err := w.TestHooks().BeginWrite(&transfer.WriteRequest{Key: "k", Version: 7, TotalSize: 10}, 5)
	if err != nil {
		t.Fatal(err)
	}
	copy(sink.Dst, "hello")
	if err := sink.Done(nil); err != nil {
		t.Fatal(err)
	}
	if err := d.cli.Call(ctx, w.Addr(), &transfer.CommitRequest{Key: "k", Version: 7}, nil); !errors.Is(err, base.ErrReplicaNotReady) {
		t.Fatalf("commit of half an object: %v", err)
	}
	eventually(t, "pending write dropped", func() bool {
		n := len(w.TestHooks().PendingWrites())
		return n == 0 && w.TestHooks().Engine().Metrics().PendingWrites.Objects == 0
	})
}

// TestWorkerRestartReconciles restarts a worker on the same root_fs_dir: objects spilled at
// shutdown are reported in its inventory and readable again; an object removed while it was
// down is dropped by the worker at registration; a worker restarted on an empty dir loses its
// replicas in the metadata. It runs with the inventory in one registration message and in
// pages of 7 objects (100 objects: 15 pages).
func TestWorkerRestartReconciles(t *testing.T) {
	for _, tc := range []struct {
		name        string
		objects     int
		pageObjects int // worker.Config.Test.RegisterPageObjects; 0: the default (one page here)
	}{
		{"unpaged", 10, 0},
		{"pages-of-7", 100, 7},
	} {
		t.Run(tc.name, func(t *testing.T) { testWorkerRestartReconciles(t, tc.objects, tc.pageObjects) })
	}
}

func testWorkerRestartReconciles(t *testing.T, objects, pageObjects int) {
	c := startMasters(t, 1, nil)
	root := t.TempDir()
	paged := func(cfg *worker.Config) { cfg.Test.RegisterPageObjects = pageObjects }
	w := c.addWorker(root, paged)
	d := newDriver(t, c.masterAddrs())
	rng := rand.New(rand.NewPCG(3, 3))
	vals := map[string][]byte{}
	for i := range objects {
		k := fmt.Sprintf("k%d", i)
		if i < 10 {
			vals[k] = value(rng, 1000+i*50_000)
		} else {
			vals[k] = value(rng, 100+i)
		}
		if err := d.put(k, vals[k], 1, false); err != nil {
			t.Fatal(err)
		}
	}
	id := w.ID()
	ctx, cancel := context.WithTimeout(context.Background(), testWait)
	defer cancel()
	if err := w.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	c.workers[0] = nil
	removed := []string{"k9"}
	if objects > 10 {
		removed = append(removed, fmt.Sprintf("k%d", objects-1)) // in another page
	}
	for _, k := range removed {
		if err := d.call(&transfer.RemoveRequest{Key: k}, nil); err != nil {
			t.Fatal(err)
		}
		delete(vals, k)
	}
	pagesBefore := c.masters[0].TestHooks().RegisterPages()

	w = c.addWorker(root, func(cfg *worker.Config) { paged(cfg); cfg.WarmUp = true }) // same root and configured address: same id
	if w.ID() != id {
		t.Fatalf("restarted worker id %s, want %s", w.ID(), id)
	}
	eventually(t, "warm-up loads DRAM", func() bool { return w.TestHooks().Engine().Metrics().DRAM.Objects > 0 })
	for k, v := range vals {
		d.mustGet(k, v, 1)
	}
	for _, k := range removed {
		if w.TestHooks().Engine().Exists(k) {
			t.Fatalf("object %s removed while the worker was down is still held", k)
		}
	}
	// Paged: the restarted worker's inventory (98 objects at least: the removed ones may have
	// been dropped by the heartbeat that found the leader) went in pages of 7; unpaged: in one
	// message.
	wantPages := int64(0)
	if pageObjects > 0 {
		wantPages = int64((objects - len(removed) + pageObjects - 1) / pageObjects)
	}
	if got := c.masters[0].TestHooks().RegisterPages() - pagesBefore; (wantPages == 0) != (got == 0) || got < wantPages {
		t.Fatalf("the master accepted %d registration pages, want %d or more (0 when unpaged)", got, wantPages)
	}
	if st := w.TestHooks().Status(); st.NVMeObjects < int64(len(vals)) {
		t.Fatalf("worker status: %+v", st)
	}

	// Same id on an empty dir: its replicas are gone, and the metadata drops them.
	if err := w.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	c.workers[1] = nil
	c.addWorker(t.TempDir(), func(cfg *worker.Config) { paged(cfg); cfg.WorkerID = id })
	// The objects are younger than lostGrace: the first registration defers them, the second
	// (asked for at once) settles them.
	for k := range vals {
		eventually(t, "replica dropped after reconciliation", func() bool {
			_, err := d.lookup(k)
			return errors.Is(err, base.ErrObjectNotFound)
		})
	}
}

// TestStandalone runs the standalone helper, checks the admin endpoints, and restarts it on
// the same directories: the objects come back.
func TestStandalone(t *testing.T) {
	dir, root := t.TempDir(), t.TempDir()
	cfg := StandaloneConfig{DataDir: dir, RootFSDir: root, RPCAddress: "127.0.0.1:0", MetricsAddress: "127.0.0.1:0",
		WorkerMetricsAddress: "127.0.0.1:0", GlobalSegmentSize: 16 << 20, Logger: testLogger()}
	s, err := NewStandalone(cfg)
	if err != nil {
		t.Fatal(err)
	}
	d := newDriver(t, []string{s.Addr()})
	if err := d.put("hello", []byte("world"), 1, false); err != nil {
		t.Fatal(err)
	}
	d.mustGet("hello", []byte("world"), 1)
	get := func(addr, path string) string {
		t.Helper()
		resp, err := http.Get("http://" + addr + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != 200 {
			t.Fatalf("%s: %d %s", path, resp.StatusCode, b)
		}
		return string(b)
	}
	m := get(s.Master().MetricsAddr(), "/metrics")
	for _, want := range []string{"master_key_count 1", "master_put_start_requests_total 1", "master_put_end_requests_total 1",
		"master_worker_count 1", `segment_total_capacity_bytes{segment="standalone-worker"} 1.6777216e+07`} {
		if !strings.Contains(m, want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
	if st := get(s.Master().MetricsAddr(), "/api/v1/status"); !strings.Contains(st, `"leader": "m1"`) {
		t.Errorf("status: %s", st)
	}
	wm := get(s.Worker().MetricsAddr(), "/metrics")
	for _, want := range []string{"worker_tier_objects{tier=\"dram\"} 1", "worker_arena_capacity_bytes 1.6777216e+07"} {
		if !strings.Contains(wm, want) {
			t.Errorf("worker /metrics lacks %q", want)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), testWait)
	defer cancel()
	if err := s.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}

	s, err = NewStandalone(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := s.Shutdown(ctx); err != nil {
			t.Error(err)
		}
	}()
	d = newDriver(t, []string{s.Addr()})
	d.mustGet("hello", []byte("world"), 1)
}

// TestCacheEvictionDropsReplicas: a DRAM-only (cache) worker evicts objects when its arena is
// full; the master learns it at the worker's next registration and drops those replicas, so
// lookups never point at bytes that are gone. It runs with the inventory in one registration
// message and in pages of one object (the replicas lost are found across pages).
func TestCacheEvictionDropsReplicas(t *testing.T) {
	for _, pageObjects := range []int{0, 1} {
		t.Run(fmt.Sprintf("page-objects-%d", pageObjects), func(t *testing.T) { testCacheEvictionDropsReplicas(t, pageObjects) })
	}
}

func testCacheEvictionDropsReplicas(t *testing.T, pageObjects int) {
	c := startMasters(t, 1, nil)
	w := c.addWorker("", func(cfg *worker.Config) {
		cfg.GlobalSegmentSize = 4 << 20
		cfg.Test.ResyncInterval = 50 * time.Millisecond
		cfg.Test.RegisterPageObjects = pageObjects
	})
	d := newDriver(t, c.masterAddrs())
	rng := rand.New(rand.NewPCG(5, 5))
	vals := map[string][]byte{}
	for i := range 12 {
		k := fmt.Sprintf("c%02d", i)
		vals[k] = value(rng, 1<<20)
		if err := d.put(k, vals[k], 1, false); err != nil {
			t.Fatalf("put %s: %v", k, err)
		}
	}
	eventually(t, "the master drops evicted replicas", func() bool {
		for k := range vals {
			if _, err := d.lookup(k); err == nil && !w.TestHooks().Engine().Exists(k) {
				return false
			}
		}
		return true
	})
	held := 0
	for k, v := range vals {
		if _, err := d.lookup(k); err == nil {
			d.mustGet(k, v, 1)
			held++
		}
	}
	if held == 0 || held == len(vals) {
		t.Fatalf("%d of %d objects held: want some evicted and some kept", held, len(vals))
	}
	if got := c.masters[0].TestHooks().RegisterPages(); (pageObjects > 0 && held > 1) != (got > 0) {
		t.Fatalf("the master accepted %d registration pages with %d objects per page (0: unpaged) and %d held", got, pageObjects, held)
	}
}

// TestStatusReportsTiers: a worker whose DRAM arena holds a few of its objects spills the
// rest to NVMe, and its heartbeats carry bytes and objects per tier to the leader's status
// (the Status call and /api/v1/status): nvme_objects > 0 and, with no object in both tiers
// (spill mode, nothing read), dram_objects + nvme_objects is the number of objects.
func TestStatusReportsTiers(t *testing.T) {
	c := startMasters(t, 1, nil)
	w := c.addWorker(t.TempDir(), func(cfg *worker.Config) { cfg.GlobalSegmentSize = 4 << 20 })
	d := newDriver(t, c.masterAddrs())
	rng := rand.New(rand.NewPCG(7, 7))
	const n = 16 // 16 x 512 KiB: twice the arena
	for i := range n {
		if err := d.put(fmt.Sprintf("t%02d", i), value(rng, 512<<10), 1, false); err != nil {
			t.Fatalf("put %d: %v", i, err)
		}
	}
	// Wait for the spills to finish, then for a heartbeat that reports the worker's own
	// figures: after that nothing moves between the tiers (no reads, no puts).
	eventually(t, "spills finish", func() bool {
		m := w.TestHooks().Engine().Metrics()
		return m.Spilling.Objects == 0 && m.SpillQueueBytes == 0 && m.NVMe.Objects > 0
	})
	var ws master.WorkerStatus
	testutil.WaitFor(t, "a heartbeat that reports the worker's tiers", testWait, func() error {
		m := w.TestHooks().Engine().Metrics()
		st := d.status()
		if len(st.Workers) != 1 {
			t.Fatalf("workers in status: %+v", st.Workers)
		}
		ws = st.Workers[0]
		if ws.DRAMObjects == m.DRAM.Objects && ws.NVMeObjects == m.NVMe.Objects &&
			ws.NVMeUsedBytes == m.NVMe.Bytes && ws.DRAMUsedBytes == m.ArenaUsedBytes {
			return nil
		}
		return fmt.Errorf("status %+v, worker DRAM %+v (arena %d), NVMe %+v", ws, m.DRAM, m.ArenaUsedBytes, m.NVMe)
	})
	if ws.NVMeObjects == 0 || ws.DRAMObjects == 0 || ws.DRAMObjects+ws.NVMeObjects != n {
		t.Fatalf("status of worker: dram_objects %d + nvme_objects %d, want %d objects, some in each tier",
			ws.DRAMObjects, ws.NVMeObjects, n)
	}
	if ws.NVMeUsedBytes < ws.NVMeObjects*(512<<10) || ws.DRAMUsedBytes < ws.DRAMObjects*(512<<10) {
		t.Fatalf("status of worker: bytes do not cover the objects: %+v", ws)
	}
	if ws.DRAMCapacityBytes != 4<<20 || ws.NVMeCapacityBytes <= 0 {
		t.Fatalf("status of worker: capacities %+v", ws)
	}

	// The admin page serves the same document.
	resp, err := http.Get("http://" + c.masters[0].MetricsAddr() + "/api/v1/status")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var page master.Status
	if err := json.NewDecoder(resp.Body).Decode(&page); err != nil {
		t.Fatal(err)
	}
	if len(page.Workers) != 1 || page.Workers[0].NVMeObjects != ws.NVMeObjects || page.Workers[0].DRAMObjects != ws.DRAMObjects {
		t.Fatalf("/api/v1/status workers: %+v, want %+v", page.Workers, ws)
	}
}

// TestWorkerRestartGrace: a worker stopped gracefully (Shutdown: it spills DRAM to NVMe and
// announces that it is leaving) is not marked dead when it stays away longer than ClientTTL:
// the leader keeps it, and its replicas, for WorkerRestartGrace. Restarted on the same
// root_fs_dir, it re-registers and every object reads back.
func TestWorkerRestartGrace(t *testing.T) {
	const ttl = 300 * time.Millisecond
	dead := make(chan base.WorkerID, 4)
	c := startMasters(t, 1, func(cfg *master.Config) {
		cfg.ClientTTL = ttl
		cfg.WorkerRestartGrace = 30 * time.Second
		cfg.Test.OnWorkerDead = func(id base.WorkerID) { dead <- id }
	})
	root := t.TempDir()
	w := c.addWorker(root, func(cfg *worker.Config) { cfg.GlobalSegmentSize = 4 << 20 })
	id := w.ID()
	d := newDriver(t, c.masterAddrs())
	rng := rand.New(rand.NewPCG(9, 9))
	vals := map[string][]byte{}
	for i := range 12 { // 12 x 512 KiB: more than the arena, so some are spilled before Shutdown
		k := fmt.Sprintf("g%02d", i)
		vals[k] = value(rng, 512<<10)
		if err := d.put(k, vals[k], 1, false); err != nil {
			t.Fatalf("put %s: %v", k, err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), testWait)
	defer cancel()
	if err := w.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	stopped := time.Now()
	c.workers[0] = nil

	// Silent for well over ClientTTL: never marked dead (the leader's OnWorkerDead event),
	// still listed and active at each tenth of the TTL, and its objects still there.
	window := time.NewTimer(3*ttl - time.Since(stopped))
	defer window.Stop()
	tick := time.NewTicker(ttl / 10)
	defer tick.Stop()
	for quiet := true; quiet; {
		select {
		case got := <-dead:
			t.Fatalf("worker %s marked dead %v after a graceful shutdown", got, time.Since(stopped))
		case <-window.C:
			quiet = false
		case <-tick.C:
			st := d.status()
			if len(st.Workers) != 1 || st.Workers[0].ID != string(id) || st.Workers[0].State != "active" {
				t.Fatalf("%v after a graceful shutdown, workers in status: %+v", time.Since(stopped), st.Workers)
			}
		}
	}
	for k := range vals {
		if _, err := d.lookup(k); err != nil {
			t.Fatalf("lookup %s while the worker restarts: %v", k, err)
		}
	}

	w = c.addWorker(root, func(cfg *worker.Config) { cfg.GlobalSegmentSize = 4 << 20 })
	if w.ID() != id {
		t.Fatalf("restarted worker id %s, want %s", w.ID(), id)
	}
	for k, v := range vals {
		d.mustGet(k, v, 1)
	}
	select {
	case got := <-dead:
		t.Fatalf("worker %s marked dead", got)
	default:
	}
}

// TestWorkerRestartGraceExpires: a worker that announced leaving but does not come back is
// marked dead once WorkerRestartGrace has passed (its objects held nowhere else are removed),
// and while it is away no new put is placed on it.
func TestWorkerRestartGraceExpires(t *testing.T) {
	dead := make(chan base.WorkerID, 4)
	c := startMasters(t, 1, func(cfg *master.Config) {
		// 300 ms, as in TestWorkerDeadAfterTTL: at 100 ms (two 50 ms heartbeats) a loaded
		// machine under -race let the worker that stays up be marked dead now and then.
		cfg.ClientTTL = 300 * time.Millisecond
		cfg.WorkerRestartGrace = time.Second
		cfg.Test.OnWorkerDead = func(id base.WorkerID) { dead <- id }
	})
	c.addWorker("", nil)
	w2 := c.addWorker(t.TempDir(), nil)
	d := newDriver(t, c.masterAddrs())
	if err := d.put("two", []byte("two"), 2, false); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), testWait)
	defer cancel()
	if err := w2.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	c.workers[1] = nil
	st := d.status()
	if len(st.Workers) != 2 {
		t.Fatalf("workers in status: %+v", st.Workers)
	}
	for _, ws := range st.Workers {
		if leaving := ws.ID == string(w2.ID()); ws.State != "active" || leaving != (ws.RestartGraceUntil != "") {
			t.Fatalf("status during the grace: %+v", ws)
		}
	}
	// Only the first worker takes new puts: two replicas cannot be placed.
	if err := d.put("x", []byte("x"), 2, false); !errors.Is(err, base.ErrNoSpace) {
		t.Fatalf("2 replicas while one of 2 workers is restarting: %v", err)
	}
	select {
	case id := <-dead:
		if id != w2.ID() {
			t.Fatalf("marked dead: %s, want %s", id, w2.ID())
		}
	case <-ctx.Done():
		t.Fatal("worker not marked dead after its restart grace")
	}
	d.mustGet("two", []byte("two"), 1)
}
