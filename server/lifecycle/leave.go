package lifecycle

import (
	"errors"
	"fmt"
	"time"

	"github.com/mooncake-go/mooncake/internal/base"
	"github.com/mooncake-go/mooncake/raftmeta"
)

// Workers that go away: on purpose (Leave), or by losing their connection to the leader
// (Attach, Detach). ClientTTL still bounds a worker that hangs with its connection open.
//
// A worker keeps one connection to the leader open for its whole registration (the driver's
// Attach call: it answers only when the connection breaks or leadership ends). Its close is
// the fastest sign of a dead process the leader gets: the kernel closes a killed process's
// sockets at once. Tokens tell connections apart, so a Detach of a connection the worker has
// already replaced (it attached again first) changes nothing.

// Attach records that worker id opened its connection to the leader: an unreachable worker
// is reachable again (its state before the break, its deadline from its messages). It
// returns the connection's token, which the Detach of this connection names. A worker this
// leadership does not list as live (unknown, registering, returning, dead or left) gets
// base.ErrSegmentNotFound: it attaches once registered.
func (m *Machine) Attach(now time.Time, id base.WorkerID) (uint64, error) {
	w := m.workers[id]
	if !m.leader || w == nil {
		return 0, fmt.Errorf("%w: worker %s is not registered with this leader", base.ErrSegmentNotFound, id)
	}
	switch w.State {
	case Registering, Returning, Dead, Left:
		return 0, fmt.Errorf("%w: worker %s is %s: register first", base.ErrSegmentNotFound, id, w.State)
	}
	m.lastConn++
	w.conn, w.LastSeen = m.lastConn, now
	if w.State == Unreachable {
		w.DisconnectedAt = time.Time{}
		w.State = liveState(w)
	}
	return w.conn, nil
}

// Detach records that the connection with token conn of worker id broke at now. A live
// worker becomes unreachable: no new placements from now, and dead at now plus ConnGrace
// unless it attaches again; that is reported (WorkerUnreachable). Nothing happens when the
// worker attached again since (another token), announced leaving or left (its connection
// closes on purpose), or is not live.
func (m *Machine) Detach(now time.Time, id base.WorkerID, conn uint64) []Effect {
	w := m.workers[id]
	if w == nil || conn == 0 || w.conn != conn {
		return nil
	}
	w.conn = 0
	if !w.LeavingAt.IsZero() {
		// It announced leaving (a restart): its connection closes on purpose, and the restart
		// grace rules, also when a drain made it draining since.
		return nil
	}
	switch w.State {
	case Alive, Suspect, Draining:
		w.DisconnectedAt, w.State = now, Unreachable
		return []Effect{WorkerUnreachable{ID: id}}
	}
	return nil
}

// Leave starts worker id's departure on purpose (an embedded worker's close: Mooncake's
// UnmountSegment). From now it is not placed on and has no deadline; the driver commits the
// LeaveWorker proposed before it answers, so the worker's objects are gone from the
// metadata when its close returns. Keep is decided here: a worker with an NVMe tier keeps
// its replicas as lost ones for its return (its objects persist under root_fs_dir), one
// without is forgotten (its bytes die with its process). A worker unknown to this
// leadership is left with Keep, which forgets nothing. Any state may leave: a dead worker
// that leaves is no longer dead.
func (m *Machine) Leave(now time.Time, id base.WorkerID) []Effect {
	keep := true
	if w := m.workers[id]; w != nil {
		keep = w.Usage.NVMeCapacity > 0
		w.State, w.LeftAt, w.DisconnectedAt, w.conn = Left, now, time.Time{}, 0
		w.drops, w.resync, w.resyncAfter = nil, false, time.Time{}
	}
	return []Effect{Propose{raftmeta.LeaveWorker{ID: id, Keep: keep, Now: now.UnixNano()}}}
}

// leaveApplied ends a departure whose LeaveWorker committed: the bytes of puts placed on the
// worker are released (they cannot complete), and a worker left without Keep is forgotten.
// The departure is reported (WorkerLeft), also when the worker had left (or was retired)
// already; a LeaveWorker the metadata refused otherwise undoes Leave and is the answer to
// the leave (Answer).
func (m *Machine) leaveApplied(c raftmeta.LeaveWorker, res raftmeta.Result) []Effect {
	left := WorkerLeft{ID: c.ID, Keep: c.Keep, Replicas: res.Dropped, Removed: res.Removed}
	switch {
	case errors.Is(res.Err, base.ErrSegmentNotFound):
		delete(m.workers, c.ID) // it left (or was retired) already
		return []Effect{left}
	case res.Err != nil:
		m.leaveFailed(c)
		return []Effect{Answer{Err: res.Err}}
	}
	m.releaseWorkerReservations(c.ID)
	if !c.Keep {
		delete(m.workers, c.ID)
	}
	return []Effect{left}
}

// leaveFailed undoes Leave when its LeaveWorker was not committed: the worker is live again
// (with the deadline of its last message), so the caller may retry or let it die.
func (m *Machine) leaveFailed(c raftmeta.LeaveWorker) {
	if w := m.workers[c.ID]; w != nil && w.State == Left {
		w.LeftAt = time.Time{}
		w.State = liveState(w)
	}
}

// Attached reports whether the worker holds a connection to the leader (Attach, no Detach since).
func (w Worker) Attached() bool { return w.conn != 0 }
