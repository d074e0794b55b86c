package server

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mooncake-go/mooncake/internal/base"
	"github.com/mooncake-go/mooncake/server/master"
	"github.com/mooncake-go/mooncake/server/worker"
	"github.com/mooncake-go/mooncake/transfer"
)

// lifecycleOf returns worker id's lifecycle state on the leader's status ("" when it is not
// listed, or no master leads).
func lifecycleOf(c *testCluster, id base.WorkerID) string {
	for _, m := range c.masters {
		if m == nil || !m.IsLeader() {
			continue
		}
		for _, w := range m.TestHooks().Status().Workers {
			if w.ID == string(id) {
				return w.Lifecycle
			}
		}
	}
	return ""
}

// placements makes n single-replica PutStarts and revokes them; it returns the workers chosen.
func (d *driver) placements(prefix string, n int) map[base.WorkerID]int {
	d.t.Helper()
	got := map[base.WorkerID]int{}
	for i := range n {
		key := fmt.Sprintf("%s%d", prefix, i)
		ps := &transfer.PutStartResponse{}
		if err := d.call(&transfer.PutStartRequest{Object: base.Object{ObjectMeta: base.ObjectMeta{Key: key, Size: 100}},
			Config: base.PutConfig{Replicas: 1}}, ps); err != nil {
			d.t.Fatal(err)
		}
		got[ps.Replicas[0].WorkerID]++
		if err := d.call(&transfer.PutRevokeRequest{Key: key, Version: ps.Version}, nil); err != nil {
			d.t.Fatal(err)
		}
	}
	return got
}

// TestLeaveUnmountsAtOnce: an ephemeral worker (the C library's embedded one) that shuts down
// unmounts: when Shutdown returns, the objects it alone held are gone from the metadata
// (lookup and exists say not found at once), objects it shared lost only that replica, the
// leader lists it nowhere (never dead), no put is placed on it, and a new leader after a
// failover knows all of it.
func TestLeaveUnmountsAtOnce(t *testing.T) {
	dead := make(chan base.WorkerID, 4)
	c := startMasters(t, 3, func(cfg *master.Config) { cfg.Test.OnWorkerDead = func(id base.WorkerID) { dead <- id } })
	wa := c.addWorker("", func(cfg *worker.Config) { cfg.WorkerID = "embedded-a"; cfg.Ephemeral = true })
	wb := c.addWorker("", nil)
	d := newDriver(t, c.masterAddrs())
	rng := rand.New(rand.NewPCG(18, 1))
	for i := range 10 {
		if err := d.putOn(fmt.Sprintf("alone%d", i), value(rng, 1000+i), wa.ID()); err != nil {
			t.Fatal(err)
		}
	}
	shared := value(rng, 777)
	if err := d.put("shared", shared, 2, false); err != nil {
		t.Fatal(err)
	}

	c.stopWorker(0)
	// No waiting: the unmount committed before Shutdown returned.
	for i := range 10 {
		key := fmt.Sprintf("alone%d", i)
		if _, err := d.lookup(key); !errors.Is(err, base.ErrObjectNotFound) {
			t.Fatalf("lookup %s after the unmount: %v, want not found", key, err)
		}
		er := &transfer.ExistsResponse{}
		if err := d.call(&transfer.ExistsRequest{Key: key}, er); err != nil || er.Exists {
			t.Fatalf("exists %s after the unmount: %t, %v", key, er.Exists, err)
		}
	}
	d.mustGet("shared", shared, 1)
	if lc := lifecycleOf(c, wa.ID()); lc != "" {
		t.Fatalf("the unmounted worker is still listed (%q)", lc)
	}
	if got := d.placements("after", 20); got[wa.ID()] > 0 || got[wb.ID()] != 20 {
		t.Fatalf("placements after the unmount: %v", got)
	}
	// The unmount was a raft commit: a new leader knows it too.
	ctx, cancel := context.WithTimeout(context.Background(), testWait)
	defer cancel()
	c.transferLeadership(ctx)
	if _, err := d.lookup("alone0"); !errors.Is(err, base.ErrObjectNotFound) {
		t.Fatalf("lookup on the new leader: %v, want not found", err)
	}
	for _, w := range d.status().Workers {
		if w.ID == string(wa.ID()) {
			t.Fatalf("the new leader lists the unmounted worker (%s)", w.State)
		}
	}
	select {
	case id := <-dead:
		t.Fatalf("worker %s marked dead", id)
	default:
	}
}

// TestPutEndAfterLeave: a put placed on a worker that leaves between the write and the PutEnd
// is refused with SEGMENT_NOT_FOUND, the answer on which a client places the put again
// (client.recommit), not INVALID_VERSION ("no put in progress"), which fails the put: the
// leave released the put's reservation, and the worker is what went, not the put.
func TestPutEndAfterLeave(t *testing.T) {
	c := startMasters(t, 3, nil)
	wa := c.addWorker("", func(cfg *worker.Config) { cfg.WorkerID = "embedded-a"; cfg.Ephemeral = true })
	c.addWorker("", nil)
	d := newDriver(t, c.masterAddrs())
	ps := &transfer.PutStartResponse{}
	obj := base.Object{ObjectMeta: base.ObjectMeta{Key: "k", Size: 100}}
	if err := d.call(&transfer.PutStartRequest{Object: obj, Config: base.PutConfig{Replicas: 1, PreferredWorker: wa.ID()}}, ps); err != nil {
		t.Fatal(err)
	}
	if len(ps.Replicas) != 1 || ps.Replicas[0].WorkerID != wa.ID() {
		t.Fatalf("placed on %v, want %s", ps.Replicas, wa.ID())
	}
	c.stopWorker(0) // the leave commits before Shutdown returns
	obj.Version, obj.Replicas = ps.Version, []base.WorkerID{wa.ID()}
	err := d.call(&transfer.PutEndRequest{Object: obj}, nil)
	if !errors.Is(err, base.ErrSegmentNotFound) {
		t.Fatalf("PutEnd after the placed worker left: %v, want segment not found", err)
	}
}

// TestLeaveKeepsPersistedForReturn: an ephemeral worker with an NVMe tier leaves: its objects
// are gone from lookups at once, it is listed as left (not dead), and the same worker id
// coming back on the same root_fs_dir has them re-adopted.
func TestLeaveKeepsPersistedForReturn(t *testing.T) {
	c := startMasters(t, 3, nil)
	root := t.TempDir()
	mut := func(cfg *worker.Config) { cfg.WorkerID = "wa"; cfg.Ephemeral = true }
	wa := c.addWorker(root, mut)
	c.addWorker("", nil)
	d := newDriver(t, c.masterAddrs())
	val := value(rand.New(rand.NewPCG(18, 2)), 5000)
	if err := d.putOn("kept", val, wa.ID()); err != nil {
		t.Fatal(err)
	}
	c.stopWorker(0)
	if _, err := d.lookup("kept"); !errors.Is(err, base.ErrObjectNotFound) {
		t.Fatalf("lookup after the leave: %v, want not found", err)
	}
	var state, lc string
	for _, w := range d.status().Workers {
		if w.ID == "wa" {
			state, lc = w.State, w.Lifecycle
		}
	}
	if state != "left" || lc != "left" {
		t.Fatalf("after the leave: state %q lifecycle %q, want left, left", state, lc)
	}
	c.addWorker(root, func(cfg *worker.Config) { cfg.WorkerID = "wa" })
	eventually(t, "the returning worker's object re-adopted", func() bool {
		_, err := d.lookup("kept")
		return err == nil
	})
	d.mustGet("kept", val, 1)
}

// TestWorkerCrashUnreachableAtOnce: a worker whose process dies (no leaving heartbeat, no
// unmount: its attached connection just closes) gets no placement as soon as the leader sees
// the close, and is dead after client_disconnect_grace, long before client_ttl.
func TestWorkerCrashUnreachableAtOnce(t *testing.T) {
	dead := make(chan base.WorkerID, 4)
	c := startMasters(t, 3, func(cfg *master.Config) {
		cfg.ClientTTL = time.Hour // only the connection's close can make it dead within the test
		cfg.ClientDisconnectGrace = 300 * time.Millisecond
		cfg.Test.OnWorkerDead = func(id base.WorkerID) { dead <- id }
	})
	wa := c.addWorker("", func(cfg *worker.Config) { cfg.Test.NoLeavingBeat = true })
	wb := c.addWorker("", nil)
	d := newDriver(t, c.masterAddrs())
	eventually(t, "the worker attached", func() bool { return attached(c, wa.ID()) })
	if err := d.putOn("k", []byte("v"), wa.ID()); err != nil {
		t.Fatal(err)
	}
	c.stopWorker(0)
	eventually(t, "the worker unreachable", func() bool { return lifecycleOf(c, wa.ID()) == "unreachable" })
	if got := d.placements("crash", 20); got[wa.ID()] > 0 || got[wb.ID()] != 20 {
		t.Fatalf("placements after the crash: %v", got)
	}
	select {
	case id := <-dead:
		if id != wa.ID() {
			t.Fatalf("worker %s marked dead, want %s", id, wa.ID())
		}
	case <-time.After(testWait):
		t.Fatal("the crashed worker was not marked dead")
	}
	if _, err := d.lookup("k"); !errors.Is(err, base.ErrObjectNotFound) {
		t.Fatalf("lookup of the dead worker's object: %v, want not found", err)
	}
}

// TestWorkerReconnectWithinGrace: a worker whose attached connection breaks while its process
// lives is unreachable (no placements) until it attaches again; back within the grace it is
// alive, takes puts, and is not marked dead after the grace has passed.
func TestWorkerReconnectWithinGrace(t *testing.T) {
	dead := make(chan base.WorkerID, 4)
	const grace = 500 * time.Millisecond
	c := startMasters(t, 3, func(cfg *master.Config) {
		cfg.ClientTTL = time.Hour
		cfg.ClientDisconnectGrace = grace
		cfg.Test.OnWorkerDead = func(id base.WorkerID) { dead <- id }
	})
	// While hold is set the worker's attach loop, about to attach again, hands the test a
	// channel and waits until the test closes it (or the test ends: done).
	var hold atomic.Bool
	waiting := make(chan chan struct{}, 1)
	done := make(chan struct{})
	defer close(done) // before the cluster's cleanup, which waits for the attach loop
	wa := c.addWorker("", func(cfg *worker.Config) {
		cfg.Test.BeforeAttach = func() {
			if hold.Load() {
				ch := make(chan struct{})
				waiting <- ch
				select {
				case <-ch:
				case <-done:
				}
			}
		}
	})
	c.addWorker("", nil)
	d := newDriver(t, c.masterAddrs())
	eventually(t, "the worker attached", func() bool { return attached(c, wa.ID()) })

	hold.Store(true)
	wa.TestHooks().BreakAttachment() // the connection breaks; the process lives
	eventually(t, "the worker unreachable", func() bool { return lifecycleOf(c, wa.ID()) == "unreachable" })
	broke := time.Now()
	if got := d.placements("away", 10); got[wa.ID()] > 0 {
		t.Fatalf("placements while unreachable: %v", got)
	}
	var release chan struct{}
	select {
	case release = <-waiting:
	case <-time.After(testWait):
		t.Fatal("the worker did not try to attach again")
	}
	hold.Store(false)
	close(release)
	eventually(t, "the worker alive again", func() bool { return lifecycleOf(c, wa.ID()) == "alive" })
	noDeathWithin(t, "within twice the grace of the break", dead, 2*grace-time.Since(broke))
	if lc := lifecycleOf(c, wa.ID()); lc != "alive" {
		t.Fatalf("after the grace: %q, want alive", lc)
	}
	eventually(t, "a put placed on the worker again", func() bool { return d.placements("back", 10)[wa.ID()] > 0 })
}

// stopWorker shuts worker i down (gracefully, as its config says) and forgets it.
func (c *testCluster) stopWorker(i int) {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testWait)
	defer cancel()
	if err := c.workers[i].Shutdown(ctx); err != nil {
		c.t.Fatal(err)
	}
	c.workers[i] = nil
}

// attached reports whether the leader holds worker id's attached connection.
func attached(c *testCluster, id base.WorkerID) bool {
	for _, m := range c.masters {
		if m == nil || !m.IsLeader() {
			continue
		}
		w, ok := m.TestHooks().LifecycleWorker(id)
		return ok && w.Attached()
	}
	return false
}
