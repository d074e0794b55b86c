package server

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"strings"
	"testing"

	"github.com/mooncake-go/mooncake/internal/base"
	"github.com/mooncake-go/mooncake/raftmeta"
	"github.com/mooncake-go/mooncake/raftmeta/raftmetatest"
	"github.com/mooncake-go/mooncake/server/master"
	"github.com/mooncake-go/mooncake/transfer"
)

// leaderIndex returns the index of the master of c that leads now (-1 while none does).
func (c *testCluster) leaderIndex() int {
	for i, m := range c.masters {
		if m != nil && m.IsLeader() {
			return i
		}
	}
	return -1
}

// leaderOf returns the master of c that leads now (nil while none does).
func (c *testCluster) leaderOf() *master.Master {
	for _, m := range c.masters {
		if m != nil && m.IsLeader() {
			return m
		}
	}
	return nil
}

// statusMembers returns id -> master.MasterStatus from the leader's Status.
func statusMembers(d *driver) map[string]master.MasterStatus {
	d.t.Helper()
	out := map[string]master.MasterStatus{}
	for _, ms := range d.status().Masters {
		out[ms.ID] = ms
	}
	return out
}

// TestReplaceMaster: three masters and a worker; a fourth master starts with Join (no
// bootstrap: it has no configuration and waits; one started without Join is refused), the
// leader adds it with AddMaster and it
// catches up; one of the original three is removed with RemoveMaster and the cluster keeps
// committing; then the leader itself is removed (it hands leadership over and the driver
// follows the redirect), and finally the last voter is refused. Bad input, non-members and
// followers are refused with typed errors.
func TestReplaceMaster(t *testing.T) {
	c := startMasters(t, 3, nil)
	c.addWorker("", nil)
	d := newDriver(t, c.masterAddrs())
	for i := range 20 {
		if err := d.put(fmt.Sprintf("before/%02d", i), []byte("v"), 1, false); err != nil {
			t.Fatalf("put: %v", err)
		}
	}

	// A master started with Join bootstraps nothing: its configuration is empty.
	m4cfg := master.Config{ID: "m4", DataDir: t.TempDir(), RPCAddress: "127.0.0.1:0", RaftAddress: "127.0.0.1:0",
		Join: true, Logger: testLogger(), Test: master.TestKnobs{Raft: raftmetatest.FastTimeouts}}
	m4, err := master.NewMaster(m4cfg)
	if err != nil {
		t.Fatal(err)
	}
	c.masters, c.mcfgs = append(c.masters, m4), append(c.mcfgs, m4cfg)
	if servers, err := m4.TestHooks().Node().Servers(); err != nil || len(servers) != 0 {
		t.Fatalf("a joining master has configuration %v (%v), want none", servers, err)
	}
	bad := m4cfg
	bad.Peers = []raftmeta.Peer{{ID: "m4", RaftAddr: "127.0.0.1:7004"}}
	if err := bad.Validate(); !errors.Is(err, base.ErrInvalidParams) {
		t.Fatalf("Join with Peers: %v, want INVALID_PARAMS", err)
	}

	add := &transfer.AddMasterRequest{MasterID: "m4", RaftAddr: m4.TestHooks().Node().RaftAddr(), RPCAddr: m4.Addr()}
	ctx, cancel := context.WithTimeout(context.Background(), testWait)
	defer cancel()

	// A follower answers NOT_LEADER naming the leader, for both calls.
	leader := c.leaderOf()
	if leader == nil {
		if err := d.call(transfer.NewEmpty(transfer.OpPing), nil); err != nil {
			t.Fatal(err)
		}
		eventually(t, "a leader", func() bool { leader = c.leaderOf(); return leader != nil })
	}
	var follower *master.Master
	for _, m := range c.masters[:3] {
		if m != leader {
			follower = m
		}
	}
	for _, req := range []transfer.Message{add, &transfer.RemoveMasterRequest{MasterID: "m4"}} {
		var nl *transfer.NotLeaderError
		if err := d.cli.Call(ctx, follower.Addr(), req, nil); !errors.As(err, &nl) || nl.LeaderID != leader.ID() {
			t.Fatalf("%s on a follower: %v, want NOT_LEADER naming %s", req.Op(), err, leader.ID())
		}
	}

	// Bad input, a conflicting id or address, a raft address nobody listens on.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	deadAddr := ln.Addr().String()
	ln.Close()
	m1Raft := c.masters[0].TestHooks().Node().RaftAddr()
	for _, tc := range []struct {
		req  transfer.Message
		want error
	}{
		{&transfer.AddMasterRequest{MasterID: "m 4", RaftAddr: add.RaftAddr}, base.ErrInvalidParams},
		{&transfer.AddMasterRequest{MasterID: "", RaftAddr: add.RaftAddr}, base.ErrInvalidParams},
		{&transfer.AddMasterRequest{MasterID: "m4", RaftAddr: "nohost"}, base.ErrInvalidParams},
		{&transfer.AddMasterRequest{MasterID: "m4", RaftAddr: "127.0.0.1:0"}, base.ErrInvalidParams},
		{&transfer.AddMasterRequest{MasterID: "m4", RaftAddr: add.RaftAddr, RPCAddr: "127.0.0.1"}, base.ErrInvalidParams},
		{&transfer.AddMasterRequest{MasterID: "m1", RaftAddr: add.RaftAddr}, base.ErrObjectAlreadyExists},
		{&transfer.AddMasterRequest{MasterID: "m9", RaftAddr: m1Raft}, base.ErrObjectAlreadyExists},
		{&transfer.AddMasterRequest{MasterID: "m9", RaftAddr: deadAddr}, base.ErrInvalidParams},
		{&transfer.RemoveMasterRequest{MasterID: "m9"}, base.ErrObjectNotFound},
		{&transfer.RemoveMasterRequest{MasterID: "../m1"}, base.ErrInvalidParams},
	} {
		if err := d.call(tc.req, nil); !errors.Is(err, tc.want) {
			t.Fatalf("%s %+v: %v, want %v", tc.req.Op(), tc.req, err, tc.want)
		}
	}

	// The leader probes the new master at its RPC address: the id must match, and a master
	// that bootstrapped a cluster of its own (started without Join) is refused.
	if err := d.call(&transfer.AddMasterRequest{MasterID: "m9", RaftAddr: add.RaftAddr, RPCAddr: add.RPCAddr}, nil); !errors.Is(err, base.ErrInvalidParams) ||
		!strings.Contains(err.Error(), `is "m4", not "m9"`) {
		t.Fatalf("AddMaster naming another master's RPC address: %v", err)
	}
	m5cfg := master.Config{ID: "m5", DataDir: t.TempDir(), RPCAddress: "127.0.0.1:0", RaftAddress: "127.0.0.1:0",
		Logger: testLogger(), Test: master.TestKnobs{Raft: raftmetatest.FastTimeouts}}
	m5, err := master.NewMaster(m5cfg) // no Join, no Peers: a single-voter cluster of its own
	if err != nil {
		t.Fatal(err)
	}
	c.masters, c.mcfgs = append(c.masters, m5), append(c.mcfgs, m5cfg)
	err = d.call(&transfer.AddMasterRequest{MasterID: "m5", RaftAddr: m5.TestHooks().Node().RaftAddr(), RPCAddr: m5.Addr()}, nil)
	if !errors.Is(err, base.ErrInvalidParams) || !strings.Contains(err.Error(), "already has raft state") {
		t.Fatalf("AddMaster of a master with a cluster of its own: %v", err)
	}
	if err := m5.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	c.masters[len(c.masters)-1] = nil

	// Add m4: it catches up with the leader (same applied index and key count).
	if err := d.call(add, nil); err != nil {
		t.Fatalf("add m4: %v", err)
	}
	eventually(t, "m4 catches up", func() bool {
		l := c.leaderOf()
		return l != nil && m4.TestHooks().Node().AppliedIndex() == l.TestHooks().Node().AppliedIndex() && m4.TestHooks().Node().Stats().Keys == 20
	})
	// Adding it again changes nothing and commits nothing.
	if l := c.leaderOf(); l != nil {
		before := l.TestHooks().Node().AppliedIndex()
		if err := d.call(add, nil); err != nil {
			t.Fatalf("add m4 again: %v", err)
		}
		if after := l.TestHooks().Node().AppliedIndex(); l.IsLeader() && after != before {
			t.Fatalf("repeating AddMaster committed entries (applied %d -> %d)", before, after)
		}
	}
	if err := d.call(&transfer.AddMasterRequest{MasterID: "m4", RaftAddr: m1Raft}, nil); !errors.Is(err, base.ErrObjectAlreadyExists) {
		t.Fatalf("re-adding m4 at another member's address: %v", err)
	}
	ms := statusMembers(d)
	if len(ms) != 4 || ms["m4"].RaftAddress != add.RaftAddr || ms["m4"].RPCAddress != m4.Addr() || ms["m1"].RaftAddress != m1Raft {
		t.Fatalf("status masters after adding m4: %+v", ms)
	}

	// Remove a follower among the original three; the cluster keeps committing.
	var gone int
	for i, m := range c.masters[:3] {
		if !m.IsLeader() {
			gone = i
		}
	}
	goneID := c.mcfgs[gone].ID
	if err := d.call(&transfer.RemoveMasterRequest{MasterID: goneID}, nil); err != nil {
		t.Fatalf("remove %s: %v", goneID, err)
	}
	if err := c.masters[gone].Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	c.masters[gone] = nil
	d.masters, d.leader = c.masterAddrs(), ""
	for i := range 10 {
		if err := d.put(fmt.Sprintf("after-remove/%02d", i), []byte("v"), 1, false); err != nil {
			t.Fatalf("put after removing %s: %v", goneID, err)
		}
	}
	if err := d.call(&transfer.RemoveMasterRequest{MasterID: goneID}, nil); !errors.Is(err, base.ErrObjectNotFound) {
		t.Fatalf("removing %s again: %v, want OBJECT_NOT_FOUND", goneID, err)
	}
	if ms := statusMembers(d); len(ms) != 3 || ms[goneID].ID != "" {
		t.Fatalf("status masters after removing %s: %+v", goneID, ms)
	}

	// Remove the leader: it hands leadership over and answers NOT_LEADER; the driver follows
	// the redirect and the new leader removes it.
	old := c.leaderOf()
	if old == nil {
		eventually(t, "a leader", func() bool { old = c.leaderOf(); return old != nil })
	}
	if err := d.call(&transfer.RemoveMasterRequest{MasterID: old.ID()}, nil); err != nil {
		t.Fatalf("remove the leader %s: %v", old.ID(), err)
	}
	ms = statusMembers(d)
	if len(ms) != 2 || ms[old.ID()].ID != "" || ms["m4"].ID == "" {
		t.Fatalf("status masters after removing the leader %s: %+v", old.ID(), ms)
	}
	i := slices.Index(c.masters, old)
	if err := old.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	c.masters[i] = nil
	d.masters, d.leader = c.masterAddrs(), ""
	if err := d.put("after-leader-removal", []byte("v"), 1, false); err != nil {
		t.Fatalf("put after removing the leader: %v", err)
	}

	// Down to one voter; the last one is never removed.
	var last, other *master.Master
	for _, m := range c.masters {
		switch {
		case m == nil:
		case m.IsLeader():
			last = m
		default:
			other = m
		}
	}
	if last == nil || other == nil {
		t.Fatalf("want a leader and a follower, have %v and %v", last, other)
	}
	if err := d.call(&transfer.RemoveMasterRequest{MasterID: other.ID()}, nil); err != nil {
		t.Fatalf("remove %s: %v", other.ID(), err)
	}
	if err := d.call(&transfer.RemoveMasterRequest{MasterID: last.ID()}, nil); !errors.Is(err, base.ErrInvalidParams) {
		t.Fatalf("removing the last voter %s: %v, want INVALID_PARAMS", last.ID(), err)
	}
	if err := d.put("single-voter", []byte("v"), 1, false); err != nil {
		t.Fatalf("put on the single voter: %v", err)
	}
}
