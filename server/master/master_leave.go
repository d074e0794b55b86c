package master

import (
	"context"
	"fmt"
	"slices"

	"github.com/mooncake-go/mooncake/internal/base"
	"github.com/mooncake-go/mooncake/raftmeta"
	"github.com/mooncake-go/mooncake/server/lifecycle"
)

// Workers that go away (lifecycle/leave.go decides; the Master executes):
//
//   - LeaveWorker: a worker leaving on purpose (an embedded worker's close) is unmounted
//     synchronously: no placements from the moment the call arrives, and the answer comes
//     after its LeaveWorker committed, so objects it alone held are gone from the metadata
//     when the worker's close returns.
//   - AttachWorker: a registered worker holds one call open on a connection of its own; the
//     call's context ends when that connection closes, which is the leader's first sign that
//     the worker's process is gone (unreachable at once, dead after ClientDisconnectGrace).

// leaveWorker serves LeaveWorker. A worker the metadata does not list (it left already, or
// was retired) is answered OK, so a resend is harmless. Leader only.
func (m *Master) leaveWorker(ctx context.Context, id base.WorkerID) error {
	if err := base.ValidateWorkerID(id); err != nil {
		return err
	}
	if !m.ensureLeader() {
		return m.notLeader()
	}
	if !slices.ContainsFunc(m.node.Segments(), func(s raftmeta.Segment) bool { return s.ID == id }) {
		return nil
	}
	now := m.now()
	// The answer waits for the LeaveWorker's commit: its error, or the machine's answer.
	_, err := m.execute(ctx, m.lcEvent(func(lc *lifecycle.Machine) []lifecycle.Effect { return lc.Leave(now, id) }))
	return err
}

// attachWorker serves AttachWorker: it holds the call open while this master leads and the
// worker's connection stays up. When the connection closes (ctx ends) the worker becomes
// unreachable: no new puts, dead after ClientDisconnectGrace unless it attaches again. It
// answers NOT_LEADER when leadership ends and ErrClosed when the master shuts down.
func (m *Master) attachWorker(ctx context.Context, id base.WorkerID) error {
	if err := base.ValidateWorkerID(id); err != nil {
		return err
	}
	if !m.ensureLeader() {
		return m.notLeader()
	}
	m.mu.Lock()
	conn, err := m.mu.lc.Attach(m.now(), id)
	gone := m.mu.leaderGone
	m.mu.Unlock()
	if err != nil {
		return err
	}
	select {
	case <-ctx.Done():
		now := m.now()
		m.execute(context.Background(), m.lcEvent(func(lc *lifecycle.Machine) []lifecycle.Effect { return lc.Detach(now, id, conn) }))
		return ctx.Err()
	case <-gone:
		return m.notLeader()
	case <-m.stop:
		return fmt.Errorf("%w: master shutting down", base.ErrClosed)
	}
}
