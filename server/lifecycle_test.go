package server

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/mooncake-go/mooncake/internal/base"
	"github.com/mooncake-go/mooncake/server/master"
	"github.com/mooncake-go/mooncake/server/worker"
	"github.com/mooncake-go/mooncake/transfer"
)

// putOn puts key on worker w alone (PreferredWorker), through the put protocol.
func (d *driver) putOn(key string, val []byte, w base.WorkerID) error {
	ps := &transfer.PutStartResponse{}
	if err := d.call(&transfer.PutStartRequest{Object: base.Object{ObjectMeta: base.ObjectMeta{Key: key,
		Size: int64(len(val))}},
		Config: base.PutConfig{Replicas: 1, PreferredWorker: w}}, ps); err != nil {
		return err
	}
	if ps.Replicas[0].WorkerID != w {
		return fmt.Errorf("placed on %s, not %s", ps.Replicas[0].WorkerID, w)
	}
	if err := d.cli.Write(context.Background(), ps.Replicas[0].Address, transfer.WriteRequest{Key: key, Version: ps.Version}, val); err != nil {
		return err
	}
	return d.call(&transfer.PutEndRequest{Object: base.Object{ObjectMeta: base.ObjectMeta{Key: key,
		Version: ps.Version, Size: int64(len(val)), Checksum: base.Checksum(val)}}}, nil)
}

// TestReadoptAcrossFailoverAndSnapshot: a worker dies (no leaving heartbeat, past
// ClientTTL); while it is away a key is removed and one overwritten, every master writes a
// snapshot (restoring one is raftmeta's testdata/fsm/lifecycle) and leadership moves to
// another master; the worker restarts on its root_fs_dir: the new leader re-adopts its
// inventory (objects it held alone read again, objects it shared are back to two replicas),
// the removed key stays removed and the overwritten one keeps its new value.
func TestReadoptAcrossFailoverAndSnapshot(t *testing.T) {
	dead := make(chan base.WorkerID, 4)
	c := startMasters(t, 3, func(cfg *master.Config) {
		cfg.ClientTTL = 400 * time.Millisecond
		cfg.Test.OnWorkerDead = func(id base.WorkerID) { dead <- id }
	})
	root := t.TempDir()
	crash := func(cfg *worker.Config) { cfg.WorkerID = "wa"; cfg.Test.NoLeavingBeat = true }
	wa := c.addWorker(root, crash)
	c.addWorker("", nil)
	d := newDriver(t, c.masterAddrs())
	rng := rand.New(rand.NewPCG(5, 5))
	alone, shared := map[string][]byte{}, map[string][]byte{}
	for i := range 20 {
		k := fmt.Sprintf("alone%d", i)
		alone[k] = value(rng, 1000+i*997)
		if err := d.putOn(k, alone[k], wa.ID()); err != nil {
			t.Fatal(err)
		}
		k = fmt.Sprintf("shared%d", i)
		shared[k] = value(rng, 500+i)
		if err := d.put(k, shared[k], 2, false); err != nil {
			t.Fatal(err)
		}
	}

	ctx, cancel := context.WithTimeout(context.Background(), testWait)
	defer cancel()
	if err := wa.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	c.workers[0] = nil
	select {
	case <-dead:
	case <-ctx.Done():
		t.Fatal("worker not marked dead")
	}
	if _, err := d.lookup("alone0"); !errors.Is(err, base.ErrObjectNotFound) {
		t.Fatalf("an object held only by the dead worker: %v, want not found", err)
	}
	if err := d.call(&transfer.RemoveRequest{Key: "alone1"}, nil); err != nil && !errors.Is(err, base.ErrObjectNotFound) {
		t.Fatal(err)
	}
	delete(alone, "alone1")
	alone["alone2"] = []byte("overwritten while wa was away")
	if err := d.put("alone2", alone["alone2"], 1, true); err != nil {
		t.Fatal(err)
	}
	if st := d.status(); st.LostReplicas != 38 || st.InvisibleObjects != 18 {
		t.Fatalf("status while away: %d lost replicas, %d invisible objects; want 38 and 18", st.LostReplicas, st.InvisibleObjects)
	}

	// Failover, with every FSM snapshotted (a restore from it must keep the lost replicas).
	for _, m := range c.masters {
		if err := m.TestHooks().Node().Snapshot(); err != nil {
			t.Fatal(err)
		}
	}
	c.transferLeadership(ctx)

	c.addWorker(root, crash)
	for k, v := range alone {
		d.mustGet(k, v, 1)
	}
	for k, v := range shared {
		d.mustGet(k, v, 2)
	}
	if _, err := d.lookup("alone1"); !errors.Is(err, base.ErrObjectNotFound) {
		t.Fatalf("a key removed while its worker was away came back: %v", err)
	}
	if st := d.status(); st.LostReplicas != 0 || st.InvisibleObjects != 0 {
		t.Fatalf("after the return: %d lost replicas, %d invisible objects; want none", st.LostReplicas, st.InvisibleObjects)
	}
}

// TestRepairAndDrainInProcess: with replica_num 2 on three workers, a crashed worker's
// objects are copied back to two replicas on the survivors; when it returns its surplus
// copies are dropped (two replicas each, none on it); draining a survivor moves its replicas
// to the others and cancelling the drain makes it placeable again.
func TestRepairAndDrainInProcess(t *testing.T) {
	c := startMasters(t, 1, func(cfg *master.Config) { cfg.ClientTTL = 400 * time.Millisecond })
	root := t.TempDir()
	crash := func(cfg *worker.Config) { cfg.WorkerID = "wa"; cfg.Test.NoLeavingBeat = true }
	wa := c.addWorker(root, crash)
	wb := c.addWorker(t.TempDir(), nil)
	c.addWorker(t.TempDir(), nil)
	d := newDriver(t, c.masterAddrs())
	rng := rand.New(rand.NewPCG(7, 7))
	vals := map[string][]byte{}
	for i := range 30 {
		k := fmt.Sprintf("r%d", i)
		vals[k] = value(rng, 200+i*300)
		if err := d.put(k, vals[k], 2, false); err != nil {
			t.Fatal(err)
		}
	}
	onWorker := func(id base.WorkerID) (n int) {
		for _, w := range d.status().Workers {
			if w.ID == string(id) && w.State == "active" {
				n = int(w.Objects)
			}
		}
		return n
	}
	replicasOK := func(avoid base.WorkerID) bool {
		for k := range vals {
			lr, err := d.lookup(k)
			if err != nil || len(lr.Replicas) != 2 {
				return false
			}
			for _, r := range lr.Replicas {
				if r.WorkerID == avoid {
					return false
				}
			}
		}
		return true
	}

	ctx, cancel := context.WithTimeout(context.Background(), testWait)
	defer cancel()
	if err := wa.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	c.workers[0] = nil
	eventually(t, "every object back to two replicas without wa", func() bool { return replicasOK("wa") })
	c.addWorker(root, crash)
	eventually(t, "wa's surplus copies trimmed", func() bool { return replicasOK("wa") && onWorker("wa") == 0 })
	for k, v := range vals {
		d.mustGet(k, v, 2)
	}
	if st := d.status(); st.Repair.Copied == 0 || st.LostReplicas != 0 {
		t.Fatalf("repair status %+v, lost replicas %d", st.Repair, st.LostReplicas)
	}

	// Drain wb: its replicas move to wa and the third worker.
	if err := d.call(&transfer.DrainWorkerRequest{WorkerID: wb.ID()}, nil); err != nil {
		t.Fatal(err)
	}
	eventually(t, "wb drained", func() bool { return onWorker(wb.ID()) == 0 && replicasOK(wb.ID()) })
	ps := &transfer.PutStartResponse{}
	if err := d.call(&transfer.PutStartRequest{Object: base.Object{ObjectMeta: base.ObjectMeta{Key: "new", Size: 1}},
		Config: base.PutConfig{Replicas: 1, PreferredWorker: wb.ID()}}, ps); err != nil {
		t.Fatal(err)
	}
	if ps.Replicas[0].WorkerID == wb.ID() {
		t.Fatal("a put was placed on a draining worker")
	}
	if err := d.call(&transfer.DrainWorkerRequest{WorkerID: wb.ID(), Cancel: true}, nil); err != nil {
		t.Fatal(err)
	}
	if err := d.call(&transfer.PutStartRequest{Object: base.Object{ObjectMeta: base.ObjectMeta{Key: "new2", Size: 1}},
		Config: base.PutConfig{Replicas: 1, PreferredWorker: wb.ID()}}, ps); err != nil {
		t.Fatal(err)
	}
	if ps.Replicas[0].WorkerID != wb.ID() {
		t.Fatalf("after the drain was cancelled, a preferred put went to %s", ps.Replicas[0].WorkerID)
	}
	if err := d.call(&transfer.DrainWorkerRequest{WorkerID: "nobody"}, nil); !errors.Is(err, base.ErrSegmentNotFound) {
		t.Fatalf("drain of an unknown worker: %v", err)
	}
	if err := d.call(&transfer.RetireWorkerRequest{WorkerID: wb.ID()}, nil); !errors.Is(err, base.ErrInvalidParams) {
		t.Fatalf("retire of a live worker: %v", err)
	}
}

// TestRepairAfterEmptyReturn: replica_num 2 on two workers (no repair target while one is
// away); the crashed worker comes back with an empty disk: its lost replicas stay lost while
// the other replica lives (nothing is forgotten that repair can restore), and repair copies
// every object back onto it, two replicas each again.
func TestRepairAfterEmptyReturn(t *testing.T) {
	c := startMasters(t, 1, func(cfg *master.Config) { cfg.ClientTTL = 400 * time.Millisecond })
	crash := func(cfg *worker.Config) { cfg.WorkerID = "wa"; cfg.Test.NoLeavingBeat = true }
	wa := c.addWorker(t.TempDir(), crash)
	c.addWorker(t.TempDir(), nil)
	d := newDriver(t, c.masterAddrs())
	rng := rand.New(rand.NewPCG(9, 9))
	vals := map[string][]byte{}
	for i := range 12 {
		k := fmt.Sprintf("e%d", i)
		vals[k] = value(rng, 100+i*700)
		if err := d.put(k, vals[k], 2, false); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), testWait)
	defer cancel()
	if err := wa.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	c.workers[0] = nil
	eventually(t, "wa dead, its replicas lost", func() bool { return d.status().LostReplicas == 12 })
	for k, v := range vals {
		d.mustGet(k, v, 1)
	}
	c.addWorker(t.TempDir(), crash) // same id, empty disk
	eventually(t, "every object back to two replicas", func() bool {
		for k := range vals {
			if lr, err := d.lookup(k); err != nil || len(lr.Replicas) != 2 {
				return false
			}
		}
		return d.status().LostReplicas == 0
	})
	for k, v := range vals {
		d.mustGet(k, v, 2)
	}
}
