package raftmeta

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"time"

	"github.com/hashicorp/raft"

	"github.com/mooncake-go/mooncake/internal/base"
)

// Writes through raft: Apply and the membership changes; VerifyLeader and WaitApplied for the
// reads that must see them; the waiting on raft futures, honouring ctx and Close, they share.

// notLeader is the error of a call that only the leader serves: it names the leader this node
// knows, for the caller to redirect to.
func (n *Node) notLeader() error {
	id, addr := n.Leader()
	return &NotLeaderError{LeaderID: id, LeaderRPCAddr: addr}
}

// waitFuture waits for f honouring ctx and Close. When ctx ends first the operation goes on
// inside raft and its outcome is unknown to the caller.
func (n *Node) waitFuture(ctx context.Context, f raft.Future) error {
	done := make(chan error, 1)
	n.waiting.mu.Lock()
	n.waiting.n++
	n.waiting.mu.Unlock()
	go func() {
		err := f.Error()
		n.waiting.mu.Lock()
		n.waiting.n--
		if n.waiting.n == 0 && n.waiting.drained != nil {
			close(n.waiting.drained)
			n.waiting.drained = nil
		}
		n.waiting.mu.Unlock()
		done <- err
	}()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		return fmt.Errorf("raftmeta: %w (the operation may still complete)", ctx.Err())
	case <-n.closed:
		// NB: raft answers every future it has taken, but one still queued in a buffered
		// channel at shutdown is never answered (see Node.waiting); not waiting for it here
		// keeps the caller from hanging.
		return fmt.Errorf("raftmeta: %w", base.ErrClosed)
	}
}

// timeoutOf turns a ctx deadline into raft's enqueue timeout (0: wait as long as it takes).
func timeoutOf(ctx context.Context) time.Duration {
	if dl, ok := ctx.Deadline(); ok {
		if d := time.Until(dl); d > 0 {
			return d
		}
		return time.Nanosecond
	}
	return 0
}

// mapRaftErr gives raft's errors our sentinels.
func (n *Node) mapRaftErr(err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, raft.ErrNotLeader), errors.Is(err, raft.ErrLeadershipTransferInProgress):
		return n.notLeader()
	case errors.Is(err, raft.ErrLeadershipLost):
		return fmt.Errorf("raftmeta: leadership lost before the entry committed; it may still commit: %w", base.ErrUnavailable)
	case errors.Is(err, raft.ErrRaftShutdown):
		return fmt.Errorf("raftmeta: %w", base.ErrClosed)
	case errors.Is(err, raft.ErrEnqueueTimeout):
		return fmt.Errorf("raftmeta: raft queue full: %w", base.ErrTimeout)
	}
	return fmt.Errorf("raftmeta: %w", err)
}

// Apply validates cmd, proposes it and waits until it is applied on this node (the leader).
// The returned error is about the proposal (base.ErrInvalidParams, *NotLeaderError wrapping
// base.ErrNotLeader, base.ErrUnavailable when leadership was lost with the outcome unknown,
// base.ErrClosed, base.ErrTooLarge over MaxCommandBytes, ctx errors); what the command did is
// in Result (Err and per-item errors).
// A PutEnd with Now == 0 gets this node's clock.
func (n *Node) Apply(ctx context.Context, cmd Command) (Result, error) {
	// Commands have value receivers, so pointers to them are Commands too; a nil one is not.
	if v := reflect.ValueOf(cmd); !v.IsValid() || (v.Kind() == reflect.Pointer && v.IsNil()) {
		return Result{}, invalidf("nil command")
	}
	if p, ok := cmd.(*PutEnd); ok {
		cmd = *p
	}
	if p, ok := cmd.(PutEnd); ok && p.Now == 0 {
		p.Now = time.Now().UnixNano()
		cmd = p
	}
	if p, ok := cmd.(*MarkWorkerLost); ok {
		cmd = *p
	}
	if p, ok := cmd.(MarkWorkerLost); ok && p.Now == 0 {
		p.Now = time.Now().UnixNano()
		cmd = p
	}
	if err := cmd.Validate(); err != nil {
		return Result{}, err
	}
	data := EncodeCommand(cmd)
	if len(data) > MaxCommandBytes {
		return Result{}, fmt.Errorf("raftmeta: command of %d bytes, the limit is %d; split the batch: %w",
			len(data), MaxCommandBytes, base.ErrTooLarge)
	}
	return n.propose(ctx, data)
}

func (n *Node) propose(ctx context.Context, data []byte) (Result, error) {
	if err := ctx.Err(); err != nil {
		return Result{}, err
	}
	select {
	case <-n.closed:
		return Result{}, fmt.Errorf("raftmeta: %w", base.ErrClosed)
	default:
	}
	start := time.Now()
	f := n.raft.Apply(data, timeoutOf(ctx))
	if err := n.waitFuture(ctx, f); err != nil {
		return Result{}, n.mapRaftErr(err)
	}
	n.obs.observeCommit(time.Since(start))
	res, ok := f.Response().(Result)
	if !ok {
		return Result{}, fmt.Errorf("raftmeta: unexpected FSM response %T: %w", f.Response(), base.ErrInternal)
	}
	return res, nil
}

// VerifyLeader confirms with a quorum that this node is still the leader and that its FSM has
// applied every entry committed before its term; after it returns nil, a read of local state
// is linearizable (it sees every write acknowledged before the call).
func (n *Node) VerifyLeader(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if n.raft.State() != raft.Leader {
		return n.notLeader()
	}
	if err := n.ensureBarrier(ctx); err != nil {
		return err
	}
	return n.mapRaftErr(n.waitFuture(ctx, n.raft.VerifyLeader()))
}

// ensureBarrier makes sure a Barrier completed in the current term (see barrierTerm).
func (n *Node) ensureBarrier(ctx context.Context) error {
	term := n.raft.CurrentTerm()
	if n.barrierTerm.Load() == term {
		return nil
	}
	if err := n.waitFuture(ctx, n.raft.Barrier(timeoutOf(ctx))); err != nil {
		return n.mapRaftErr(err)
	}
	// The barrier committed in term or later; if the term moved meanwhile the stored value
	// simply mismatches and the next call waits again.
	n.barrierTerm.Store(term)
	return nil
}

// WaitApplied waits until this node's FSM has applied index (a Result.Index), for
// read-your-writes on a follower.
func (n *Node) WaitApplied(ctx context.Context, index uint64) error {
	for {
		n.fsm.mu.RLock()
		applied, ch := n.fsm.applied, n.fsm.appliedCh
		n.fsm.mu.RUnlock()
		if applied >= index {
			return nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return fmt.Errorf("raftmeta: wait for index %d (applied %d): %w", index, applied, ctx.Err())
		case <-n.closed:
			return fmt.Errorf("raftmeta: %w", base.ErrClosed)
		}
	}
}

// AddVoter adds (or re-addresses) a voting member. Leader only.
func (n *Node) AddVoter(ctx context.Context, id, raftAddr string) error {
	if id == "" || raftAddr == "" {
		return invalidf("AddVoter needs an id and a raft address")
	}
	f := n.raft.AddVoter(raft.ServerID(id), raft.ServerAddress(raftAddr), 0, timeoutOf(ctx))
	return n.mapRaftErr(n.waitFuture(ctx, f))
}

// RemoveServer removes a member (it may be this node, the leader, which then steps down) and
// its entry in the masters table. Leader only.
func (n *Node) RemoveServer(ctx context.Context, id string) error {
	if id == "" {
		return invalidf("RemoveServer needs an id")
	}
	if _, err := n.Apply(ctx, RegisterMaster{ID: id}); err != nil {
		return err
	}
	f := n.raft.RemoveServer(raft.ServerID(id), 0, timeoutOf(ctx))
	return n.mapRaftErr(n.waitFuture(ctx, f))
}

// Servers returns the latest raft configuration as Peers (RPCAddr from the masters table).
func (n *Node) Servers() ([]Peer, error) {
	f := n.raft.GetConfiguration()
	if err := f.Error(); err != nil {
		return nil, n.mapRaftErr(err)
	}
	n.fsm.mu.RLock()
	defer n.fsm.mu.RUnlock()
	var out []Peer
	for _, s := range f.Configuration().Servers {
		out = append(out, Peer{ID: string(s.ID), RaftAddr: string(s.Address), RPCAddr: n.fsm.st.masters[string(s.ID)]})
	}
	return out, nil
}

// Snapshot takes a snapshot now (and compacts the log down to TrailingLogs).
func (n *Node) Snapshot() error {
	err := n.raft.Snapshot().Error()
	if errors.Is(err, raft.ErrNothingNewToSnapshot) {
		return nil
	}
	return n.mapRaftErr(err)
}

// LeadershipTransfer asks raft to hand leadership to another voter. Leader only.
func (n *Node) LeadershipTransfer(ctx context.Context) error {
	return n.mapRaftErr(n.waitFuture(ctx, n.raft.LeadershipTransfer()))
}
