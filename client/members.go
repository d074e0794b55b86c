package client

import (
	"context"
	"errors"
	"fmt"

	"github.com/mooncake-go/mooncake/internal/base"
	"github.com/mooncake-go/mooncake/transfer"
)

// AddMaster adds a master to the cluster's raft configuration as a voter (the AddMaster call,
// served by the leader; redirects and elections are followed as for every master call). The
// new master must already be running with nothing bootstrapped (`mooncake master --join`):
// the leader refuses a raft address where nothing accepts connections. rpcAddr (may be "",
// better not) records its client address at once and lets the leader check that the master
// there has this id and no raft state of its own (base.ErrInvalidParams otherwise); without
// it the new master registers its own address when it first hears from the leader.
//
// It is safe to repeat: a master already a member at raftAddr is left as it is. A member id
// at another raft address, or a raft address held by another member, fails with an error
// wrapping base.ErrObjectAlreadyExists; bad ids and addresses with base.ErrInvalidParams.
func (c *Client) AddMaster(ctx context.Context, id, raftAddr, rpcAddr string) error {
	ctx, cancel := c.withTimeout(ctx)
	defer cancel()
	req := &transfer.AddMasterRequest{MasterID: id, RaftAddr: raftAddr, RPCAddr: rpcAddr}
	if err := c.masterCall(ctx, req, transfer.NewEmpty(transfer.OpAddMaster), nil); err != nil {
		return fmt.Errorf("add master %s: %w", id, err)
	}
	return nil
}

// RemoveMaster removes a master from the cluster's raft configuration (the RemoveMaster call,
// served by the leader). Removing the leader itself works: it hands leadership to another
// voter and redirects the call there. A master that is not a member fails with an error
// wrapping base.ErrObjectNotFound, unless an earlier attempt of this call failed in a way
// that leaves open whether it was applied (then the removal is taken as done). The last voter
// is never removed (base.ErrInvalidParams).
func (c *Client) RemoveMaster(ctx context.Context, id string) error {
	ctx, cancel := c.withTimeout(ctx)
	defer cancel()
	var st attemptState
	err := c.masterCall(ctx, &transfer.RemoveMasterRequest{MasterID: id}, transfer.NewEmpty(transfer.OpRemoveMaster), &st)
	if err != nil && st.ambiguous && errors.Is(err, base.ErrObjectNotFound) {
		return nil // an earlier attempt removed it before its answer was lost
	}
	if err != nil {
		return fmt.Errorf("remove master %s: %w", id, err)
	}
	return nil
}
