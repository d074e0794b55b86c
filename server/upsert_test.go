package server

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/mooncake-go/mooncake/internal/base"
	"github.com/mooncake-go/mooncake/server/master"
	"github.com/mooncake-go/mooncake/server/rpcsrv"
	"github.com/mooncake-go/mooncake/server/worker"
	"github.com/mooncake-go/mooncake/transfer"
)

// TestUpsertNeverCommittedKeepsOldVersion: an upsert whose bytes are written and committed on
// the worker but whose put never commits on the master (revoked here; a refused PutEnd or a
// put timeout end the same way) must not cost the version the master still lists. The worker
// keeps the replaced version readable, restores it when the master's drop of the failed put
// arrives, and frees it only when the master drops it after a newer version commits.
func TestUpsertNeverCommittedKeepsOldVersion(t *testing.T) {
	c := startMasters(t, 1, nil)
	w := c.addWorker("", nil)
	d := newDriver(t, c.masterAddrs())
	v1, v2, v3 := []byte("version one"), []byte("version two, never committed"), []byte("version three")

	// v2: written (and so committed on the worker), then revoked instead of PutEnd.
	ps, _ := writeUnsettledUpsert(t, d, v1, v2)
	d.mustGet("k", v1, 1) // served from the superseded version
	if err := d.call(&transfer.PutRevokeRequest{Key: "k", Version: ps.Version}, nil); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the worker restores v1 once the revoke's drop arrives", func() bool {
		m := w.TestHooks().Engine().Metrics()
		return m.Restored == 1 && m.Superseded.Objects == 0
	})
	d.mustGet("k", v1, 1)

	// v3 commits: the master drops v1, which frees the bytes the worker held for it.
	if err := d.put("k", v3, 1, true); err != nil {
		t.Fatal(err)
	}
	d.mustGet("k", v3, 1)
	eventually(t, "the master's drop of v1 frees it", func() bool {
		m := w.TestHooks().Engine().Metrics()
		return m.SupersededTotal == 2 && m.Superseded.Objects == 0 && m.ReservedBytes == 0
	})
}

// TestUpsertDropRacesCommit: the master's drop of an upsert's version lands on the worker
// while that version is being committed there (after its last byte, before the tier commit):
// the commit must not outlive the drop, or the key would keep a version the master will never
// list or drop again, over the one it does list.
func TestUpsertDropRacesCommit(t *testing.T) {
	c := startMasters(t, 1, nil)
	w := c.addWorker("", nil)
	d := newDriver(t, c.masterAddrs())
	v1, v2 := []byte("version one"), []byte("version two, dropped while committing")
	ps, _ := startUpsertOver(t, d, v1, v2)
	hook := func(key string, v base.Version) {
		if err := w.TestHooks().Drop(key, v); err != nil && !errors.Is(err, base.ErrInvalidVersion) {
			t.Errorf("drop in the commit window: %v", err)
		}
	}
	w.TestHooks().SetBeforeCommit(&hook)
	ctx, cancel := context.WithTimeout(context.Background(), testWait)
	defer cancel()
	err := d.cli.Write(ctx, ps.Replicas[0].Address, transfer.WriteRequest{Key: "k", Version: ps.Version, Checksum: base.Checksum(v2)}, v2)
	w.TestHooks().SetBeforeCommit(nil)
	if !errors.Is(err, base.ErrObjectNotFound) {
		t.Fatalf("write dropped while committing: %v, want ErrObjectNotFound", err)
	}
	if m := w.TestHooks().Engine().Metrics(); m.Restored != 1 || m.Superseded.Objects != 0 {
		t.Fatalf("restored %d, superseded %+v: want v1 current again", m.Restored, m.Superseded)
	}
	d.mustGet("k", v1, 1)
}

// TestLateWriteOfDroppedPut: a put dropped before any byte of it reached the worker (revoked
// here; superseded puts end the same way) is refused when its write comes late, instead of
// committing a version the master has already dropped over the one it lists.
func TestLateWriteOfDroppedPut(t *testing.T) {
	c := startMasters(t, 1, nil)
	w := c.addWorker("", nil)
	d := newDriver(t, c.masterAddrs())
	v1, v2 := []byte("version one"), []byte("version two, written late")
	ps, _ := startUpsertOver(t, d, v1, v2)
	if err := d.call(&transfer.PutRevokeRequest{Key: "k", Version: ps.Version}, nil); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the worker receives the drop of the revoked put", func() bool {
		return w.TestHooks().Dropped("k", ps.Version)
	})
	ctx, cancel := context.WithTimeout(context.Background(), testWait)
	defer cancel()
	err := d.cli.Write(ctx, ps.Replicas[0].Address, transfer.WriteRequest{Key: "k", Version: ps.Version, Checksum: base.Checksum(v2)}, v2)
	if !errors.Is(err, base.ErrObjectNotFound) {
		t.Fatalf("late write of a dropped put: %v, want ErrObjectNotFound", err)
	}
	if m := w.TestHooks().Engine().Metrics(); m.SupersededTotal != 0 || m.PendingWrites.Objects != 0 {
		t.Fatalf("the late write left state behind: %+v", m)
	}
	d.mustGet("k", v1, 1)
}

// TestRegistrationWhileUpsertUnsettled: a worker registers (twice: the second is the one a
// first deferral asks for) while it holds v1, which the master lists, and v2, an upsert not
// committed on the master yet. It reports both, so the master keeps v1 on it instead of
// taking v1 for lost (listed, reported at another version); v2 is spared as a put in flight.
func TestRegistrationWhileUpsertUnsettled(t *testing.T) {
	c := startMasters(t, 1, nil)
	w := c.addWorker("", nil)
	d := newDriver(t, c.masterAddrs())
	v1, v2 := []byte("version one"), []byte("version two, in flight")
	ps, _ := writeUnsettledUpsert(t, d, v1, v2)
	for range 2 {
		w.TestHooks().Reregister()
		select {
		case <-w.Registered():
		case <-time.After(testWait):
			t.Fatal("worker did not register again")
		}
	}
	d.mustGet("k", v1, 1)
	if err := d.call(&transfer.PutRevokeRequest{Key: "k", Version: ps.Version}, nil); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the revoke's drop makes v1 current again", func() bool {
		return w.TestHooks().Engine().Metrics().Restored == 1
	})
	d.mustGet("k", v1, 1)
}

// TestUpsertAcrossLeaderChange: an upsert's bytes reach the worker (committed there) and the
// leader that placed it goes away with its reservation: a 3-master leadership transfer, or a
// single-voter master restarted on its data (a new term, the soft state gone). The new leader
// accepts its PutEnd only within its grace (PutTimeout); once that has passed the put has
// failed for good. Throughout, v1 (acknowledged, listed) stays readable: the worker reports
// both versions when it registers with the new leader, which keeps v1 and, after its grace,
// drops v2, making v1 current again on the worker.
func TestUpsertAcrossLeaderChange(t *testing.T) {
	t.Run("failover", func(t *testing.T) {
		upsertAcrossLeaderChange(t, 3, func(ctx context.Context, c *testCluster) { c.transferLeadership(ctx) })
	})
	t.Run("restart", func(t *testing.T) {
		// The leader goes; the same node comes back on the same addresses and data.
		upsertAcrossLeaderChange(t, 1, func(ctx context.Context, c *testCluster) {
			mcfg := c.mcfgs[0]
			mcfg.RPCAddress, mcfg.RaftAddress = c.masters[0].Addr(), c.masters[0].TestHooks().Node().RaftAddr()
			if err := c.masters[0].Shutdown(ctx); err != nil {
				t.Fatal(err)
			}
			c.masters[0] = nil
			m, err := master.NewMaster(mcfg)
			if err != nil {
				t.Fatal(err)
			}
			c.masters[0], c.mcfgs[0] = m, mcfg
		})
	})
}

// upsertAcrossLeaderChange is TestUpsertAcrossLeaderChange on n masters, whose leader change
// is made by change.
func upsertAcrossLeaderChange(t *testing.T, n int, change func(context.Context, *testCluster)) {
	c := startMasters(t, n, func(cfg *master.Config) { cfg.PutTimeout = 500 * time.Millisecond })
	w := c.addWorker("", nil)
	d := newDriver(t, c.masterAddrs())
	v1, v2 := []byte("version one"), []byte("version two, placed by the old leader")
	ps, cfg := writeUnsettledUpsert(t, d, v1, v2)
	ctx, cancel := context.WithTimeout(context.Background(), testWait)
	defer cancel()
	regs := w.TestHooks().Registrations()
	change(ctx, c)
	eventually(t, "the worker registered with the new leader", func() bool { return w.TestHooks().Registrations() > regs })
	d.leader = ""
	d.mustGet("k", v1, 1)
	eventually(t, "the new leader drops v2 once its grace has passed", func() bool {
		return w.TestHooks().Engine().Metrics().Restored == 1
	})
	d.mustGet("k", v1, 1)
	err := d.call(&transfer.PutEndRequest{Object: base.Object{ObjectMeta: base.ObjectMeta{Key: "k",
		Version: ps.Version, Size: int64(len(v2)), Checksum: base.Checksum(v2)}, Replicas: []base.WorkerID{w.ID()}},
		Config: cfg}, nil)
	if !errors.Is(err, base.ErrInvalidVersion) {
		t.Fatalf("PutEnd of the old leader's put after the grace: %v, want ErrInvalidVersion", err)
	}
	d.mustGet("k", v1, 1)
	if m := w.TestHooks().Engine().Metrics(); m.Superseded.Objects != 0 || m.ReservedBytes != 0 {
		t.Fatalf("after the drop: superseded %+v, reserved %d", m.Superseded, m.ReservedBytes)
	}
}

// startUpsertOver puts v1 under "k" (acknowledged) and places v2 as an upsert of "k" (PutStart
// only). It returns v2's placement and put config.
func startUpsertOver(t *testing.T, d *driver, v1, v2 []byte) (*transfer.PutStartResponse, base.PutConfig) {
	t.Helper()
	if err := d.put("k", v1, 1, false); err != nil {
		t.Fatal(err)
	}
	ps := &transfer.PutStartResponse{}
	cfg := base.PutConfig{Replicas: 1, Upsert: true}
	if err := d.call(&transfer.PutStartRequest{Object: base.Object{ObjectMeta: base.ObjectMeta{Key: "k",
		Size: int64(len(v2))}}, Config: cfg},
		ps); err != nil {
		t.Fatal(err)
	}
	return ps, cfg
}

// writeUnsettledUpsert puts v1 under "k" (acknowledged), then places v2 as an upsert of "k"
// and writes its bytes to the worker (committed there) without the PutEnd. It returns v2's
// placement and put config.
func writeUnsettledUpsert(t *testing.T, d *driver, v1, v2 []byte) (*transfer.PutStartResponse, base.PutConfig) {
	t.Helper()
	ps, cfg := startUpsertOver(t, d, v1, v2)
	ctx, cancel := context.WithTimeout(context.Background(), testWait)
	defer cancel()
	if err := d.cli.Write(ctx, ps.Replicas[0].Address, transfer.WriteRequest{Key: "k", Version: ps.Version, Checksum: base.Checksum(v2)}, v2); err != nil {
		t.Fatal(err)
	}
	return ps, cfg
}

// TestUpsertHotKeysDropsFromLeader: upserts of a few hot keys, many arenas' worth, on a worker
// of a 3-master cluster, before and after a leadership change. The worker holds every
// replaced version until the leader's drop of it; it must fetch those drops from the leader
// as superseded versions pile up, not once a heartbeat (a second of them is more than the
// arena here), and keep doing so with the new leader. Every put succeeds; reads return the
// newest bytes; nothing superseded is left once the drops are in, and the leader's summed
// worker counters are not inflated by the extra heartbeats.
func TestUpsertHotKeysDropsFromLeader(t *testing.T) {
	const size = 2 << 20
	c := startMasters(t, 3, nil)
	w := c.addWorker("", func(cfg *worker.Config) { cfg.HeartbeatInterval = rpcsrv.DefaultHeartbeatInterval })
	d := newDriver(t, c.masterAddrs())
	round := func(phase int) {
		t.Helper()
		before := w.TestHooks().DropsFetchedEarly()
		var last [4][]byte
		for i := range 40 { // 40 x 2 MiB = 80 MiB, 2.5 arenas
			k := i % len(last)
			v := bytes.Repeat([]byte{byte(phase*64 + i)}, size)
			if err := d.put(fmt.Sprint("hot-", k), v, 1, true); err != nil {
				t.Fatalf("phase %d put %d: %v", phase, i, err)
			}
			last[k] = v
		}
		for k, v := range last {
			d.mustGet(fmt.Sprint("hot-", k), v, 1)
		}
		if w.TestHooks().DropsFetchedEarly() == before {
			t.Fatalf("phase %d: no drop fetched early from the leader", phase)
		}
	}
	round(0)
	ctx, cancel := context.WithTimeout(context.Background(), testWait)
	defer cancel()
	regs := w.TestHooks().Registrations()
	c.transferLeadership(ctx)
	eventually(t, "the worker registered with the new leader", func() bool { return w.TestHooks().Registrations() > regs })
	d.leader = ""
	round(1)
	eventually(t, "every superseded version dropped", func() bool { return w.TestHooks().Engine().Metrics().Superseded.Objects == 0 })
	// The early heartbeats carry no stats: the leader sums the increments of the periodic
	// ones, and an older snapshot arriving after a newer one would be counted again.
	eventually(t, "the leader's summed hits equal the worker's", func() bool {
		m := c.leaderOf()
		return m != nil && m.TestHooks().WorkerStatsTotals().HitsDRAM == w.TestHooks().Engine().Metrics().HitsDRAM
	})
}
