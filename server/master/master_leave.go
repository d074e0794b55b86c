package master

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/mooncake-go/mooncake/internal/base"
	"github.com/mooncake-go/mooncake/raftmeta"
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
	m.mu.Lock()
	out := m.mu.lc.Leave(m.now(), id)
	m.mu.Unlock()
	for _, c := range out.Propose {
		res, err := m.commit(ctx, c)
		if err == nil && !errors.Is(res.Err, base.ErrSegmentNotFound) {
			err = res.Err
		}
		if err != nil {
			m.log.Warn("worker leave not committed; it is placed on again until it retries or dies", "worker", id, "err", err)
			return err
		}
		m.rmet.leaves.Add(1)
		lw, _ := c.(raftmeta.LeaveWorker)
		m.log.Info("worker left: unmounted, no new puts; objects held only there are gone from the metadata",
			"worker", id, "kept_for_return", lw.Keep, "replicas", res.Dropped, "objects_removed", res.Removed)
	}
	return nil
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
		m.mu.Lock()
		lost := m.mu.lc.Detach(m.now(), id, conn)
		m.mu.Unlock()
		if lost {
			m.rmet.disconnects.Add(1)
			m.log.Warn("worker's connection to the leader closed: no new puts; marked dead unless it attaches again",
				"worker", id, "client_disconnect_grace", m.cfg.ClientDisconnectGrace)
		}
		return ctx.Err()
	case <-gone:
		return m.notLeader()
	case <-m.stop:
		return fmt.Errorf("%w: master shutting down", base.ErrClosed)
	}
}
