package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"strings"
	"testing"
	"time"

	"github.com/mooncake-go/mooncake/internal/base"
	"github.com/mooncake-go/mooncake/internal/testutil"
	"github.com/mooncake-go/mooncake/server/master"
	"github.com/mooncake-go/mooncake/transfer"
)

// TestFollowersRegisterThemselves: three masters bootstrapped without peer RPC addresses (as
// `mooncake master --peers m1=...,m2=...,m3=...` with no --peer_rpc_addresses). The leader
// registers only itself; each follower registers its own address with the leader, so every
// master's Status (over the wire) soon lists all three with their RPC addresses, without any
// of them having led.
func TestFollowersRegisterThemselves(t *testing.T) {
	c := startMastersPeers(t, 3, nil, false)
	want := map[string]string{}
	for _, m := range c.masters {
		want[m.ID()] = m.Addr()
	}
	cli, err := transfer.NewClient(transfer.ClientOptions{Logger: testLogger()})
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()

	// statusMasters returns the masters listed by the Status of the master at addr.
	statusMasters := func(addr string) (map[string]string, error) {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		sr := &transfer.StatusResponse{}
		if err := cli.Call(ctx, addr, transfer.NewEmpty(transfer.OpStatus), sr); err != nil {
			return nil, err
		}
		var st master.Status
		if err := json.Unmarshal(sr.JSON, &st); err != nil {
			return nil, err
		}
		got := map[string]string{}
		for _, ms := range st.Masters {
			got[ms.ID] = ms.RPCAddress
		}
		return got, nil
	}
	// Bounded poll (cross-node replication): every master must converge on the full table.
	testutil.WaitFor(t, fmt.Sprintf("masters tables converge on %v", want), 30*time.Second, func() error {
		var diffs []string
		for _, m := range c.masters {
			got, err := statusMasters(m.Addr())
			if err != nil {
				diffs = append(diffs, fmt.Sprintf("%s: %v", m.ID(), err))
				continue
			}
			if !maps.Equal(got, want) {
				diffs = append(diffs, fmt.Sprintf("%s lists %v", m.ID(), got))
			}
		}
		if len(diffs) > 0 {
			return errors.New(strings.Join(diffs, "; "))
		}
		return nil
	})

	// The call itself: a follower refuses it with NOT_LEADER; the leader refuses an id outside
	// the raft configuration and an empty address, and accepts a re-registration (no change).
	var leader, follower *master.Master
	for _, m := range c.masters {
		if m.IsLeader() {
			leader = m
		} else {
			follower = m
		}
	}
	if leader == nil || follower == nil {
		t.Fatal("no leader or no follower")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var nl *transfer.NotLeaderError
	err = cli.Call(ctx, follower.Addr(), &transfer.RegisterMasterRequest{MasterID: follower.ID(), RPCAddr: follower.Addr()}, nil)
	if !errors.As(err, &nl) {
		t.Fatalf("RegisterMaster on a follower: %v, want NOT_LEADER", err)
	}
	err = cli.Call(ctx, leader.Addr(), &transfer.RegisterMasterRequest{MasterID: "m9", RPCAddr: "127.0.0.1:1"}, nil)
	if !errors.Is(err, base.ErrInvalidParams) {
		t.Fatalf("RegisterMaster of a non-member: %v, want INVALID_PARAMS", err)
	}
	err = cli.Call(ctx, leader.Addr(), &transfer.RegisterMasterRequest{MasterID: follower.ID()}, nil)
	if !errors.Is(err, base.ErrInvalidParams) {
		t.Fatalf("RegisterMaster with no address: %v, want INVALID_PARAMS", err)
	}
	before := leader.TestHooks().Node().AppliedIndex()
	err = cli.Call(ctx, leader.Addr(), &transfer.RegisterMasterRequest{MasterID: follower.ID(), RPCAddr: follower.Addr()}, nil)
	if err != nil {
		t.Fatalf("re-registration: %v", err)
	}
	if after := leader.TestHooks().Node().AppliedIndex(); after != before {
		t.Fatalf("re-registering an unchanged address committed entries (applied %d -> %d)", before, after)
	}
	if got, err := statusMasters(leader.Addr()); err != nil || !maps.Equal(got, want) {
		t.Fatalf("after the refused calls the leader lists %v (%v), want %v", got, err, want)
	}
}
