package server

import (
	"context"
	"sync/atomic"
	"testing"

	"github.com/mooncake-go/mooncake/raftmeta"
	"github.com/mooncake-go/mooncake/server/master"
)

// TestRaftNoSync: a master with RaftNoSync (--raft_fsync=false) commits puts, and keeps them
// across a clean restart on the same directory: its entries skip fsync, not the disk.
func TestRaftNoSync(t *testing.T) {
	var noSync atomic.Bool // what the master asked raftmeta for
	c := startMasters(t, 1, func(cfg *master.Config) {
		cfg.RaftNoSync = true
		fast := cfg.Test.Raft
		cfg.Test.Raft = func(rc *raftmeta.Config) {
			fast(rc)
			noSync.Store(rc.NoSync)
		}
	})
	if !noSync.Load() {
		t.Fatal("RaftNoSync did not reach the raft log store (raftmeta.Config.NoSync)")
	}
	c.addWorker("", nil)
	d := newDriver(t, c.masterAddrs())
	if err := d.put("nosync", []byte("value"), 1, false); err != nil {
		t.Fatal(err)
	}
	d.mustGet("nosync", []byte("value"), 1)

	ctx, cancel := context.WithTimeout(context.Background(), testWait)
	defer cancel()
	m := c.masters[0]
	cfg := c.mcfgs[0]
	cfg.RPCAddress, cfg.RaftAddress = m.Addr(), m.TestHooks().Node().RaftAddr() // as recorded in its raft state
	if err := m.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	c.masters[0] = nil
	m, err := master.NewMaster(cfg)
	if err != nil {
		t.Fatal(err)
	}
	c.masters[0] = m
	c.waitLeader() // after the restart
	lr, err := newDriver(t, c.masterAddrs()).lookup("nosync")
	if err != nil || lr.Size != int64(len("value")) {
		t.Fatalf("lookup after restart: %+v, %v", lr, err)
	}
}
