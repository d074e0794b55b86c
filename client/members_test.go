package client

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/mooncake-go/mooncake/internal/base"
	"github.com/mooncake-go/mooncake/transfer"
)

// memberFake serves AddMaster and RemoveMaster on the fake cluster's leader (followers answer
// NOT_LEADER through fakeCluster), with a members table.
type memberFake struct {
	*fakeCluster
	members map[string]string // id -> raft address
	// loseRemoveReply makes the next RemoveMaster apply and then fail like a broken connection.
	loseRemoveReply bool
}

func (m *memberFake) Call(ctx context.Context, addr string, req, resp transfer.Message) error {
	m.mu.Lock()
	leader := m.fakeCluster.leader >= 0 && addr == m.masters[m.fakeCluster.leader]
	m.mu.Unlock()
	if !leader {
		return m.fakeCluster.Call(ctx, addr, req, resp)
	}
	switch r := req.(type) {
	case *transfer.AddMasterRequest:
		if a, ok := m.members[r.MasterID]; ok && a != r.RaftAddr {
			return base.NewCodeError(base.CodeObjectAlreadyExists, "member at another address")
		}
		m.members[r.MasterID] = r.RaftAddr
		return nil
	case *transfer.RemoveMasterRequest:
		if _, ok := m.members[r.MasterID]; !ok {
			return base.NewCodeError(base.CodeObjectNotFound, "not a member")
		}
		delete(m.members, r.MasterID)
		if m.loseRemoveReply {
			m.loseRemoveReply = false
			return errConnRefused
		}
		return nil
	}
	return m.fakeCluster.Call(ctx, addr, req, resp)
}

func TestMembershipCalls(t *testing.T) {
	f := &memberFake{fakeCluster: newFakeCluster(3, 0), members: map[string]string{"m1": "a:1", "m2": "b:1", "m3": "c:1"}}
	f.fakeCluster.setLeader(1)
	cfg := Config{MasterAddresses: f.masters, Timeout: 5 * time.Second, MaxBackoff: 20 * time.Millisecond}
	cfg.EnsureDefaults()
	c, err := connectWith(context.Background(), cfg, f)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx := context.Background()

	// The first master answers NOT_LEADER; the call lands on the leader.
	if err := c.AddMaster(ctx, "m4", "d:1", "d:2"); err != nil || f.members["m4"] != "d:1" {
		t.Fatalf("add: %v, members %v", err, f.members)
	}
	if err := c.AddMaster(ctx, "m4", "d:1", ""); err != nil {
		t.Fatalf("add again: %v", err)
	}
	if err := c.AddMaster(ctx, "m4", "e:1", ""); !errors.Is(err, base.ErrObjectAlreadyExists) {
		t.Fatalf("add at another address: %v", err)
	}
	if err := c.RemoveMaster(ctx, "m9"); !errors.Is(err, base.ErrObjectNotFound) {
		t.Fatalf("remove a non-member: %v", err)
	}
	// A removal whose answer is lost: the retry's OBJECT_NOT_FOUND means done.
	f.loseRemoveReply = true
	if err := c.RemoveMaster(ctx, "m3"); err != nil {
		t.Fatalf("remove with a lost answer: %v", err)
	}
	if _, ok := f.members["m3"]; ok {
		t.Fatal("m3 still a member")
	}
	if err := c.RemoveMaster(ctx, "m3"); !errors.Is(err, base.ErrObjectNotFound) {
		t.Fatalf("remove again: %v", err)
	}
}
