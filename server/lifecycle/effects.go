package lifecycle

import (
	"time"

	"github.com/mooncake-go/mooncake/internal/base"
	"github.com/mooncake-go/mooncake/raftmeta"
)

// Effect is one thing an event asks the driver to do. Every event whose outcome needs the driver
// to act returns them, in the order the driver must run them; the decisions are all made
// here, so the driver is glue that executes effects (and the scripts in testdata/ print them).
// The set is closed: only the types below implement Effect. The driver's duties, by type:
//
//  1. Propose: commit Cmd to raft and report the outcome with Applied (committed, with its
//     result) or Failed (not committed), then run the effects those return.
//  2. Copy: have worker Order.Src copy the object to Order.To, then report with CopyDone.
//  3. Drop, Reregister and Settled: answer the worker's heartbeat with them (they are
//     returned by Heartbeat only).
//  4. ScanRepairs: walk the metadata for objects to repair or drain and hand them to Plan.
//  5. Answer: answer the call that caused the event (a leave waiting for its commit) with Err.
//  6. WorkerLost, WorkerLeft, WorkerLeaving, WorkerBack, WorkerUnreachable, PutExpired,
//     SessionExpired and TaskEnded: reports of a decision taken, for the log and the metrics
//     (nothing to report back).
//
// Drops owed to a worker (a put that failed, a copy that was not kept) are not effects of
// the event that owes them: they wait in the machine and go out as Drop effects of the
// worker's next heartbeat, in bounded batches.
type Effect interface{ effect() }

// Propose asks the driver to commit Cmd (MarkWorkerLost, LeaveWorker, MoveReplicas,
// AddReplicas) and to report the outcome (Applied or Failed).
type Propose struct{ Cmd raftmeta.Command }

// Copy asks the driver to run one copy order (worker to worker) and to report its end
// (CopyDone).
type Copy struct{ Order CopyOrder }

// Drop is part of a heartbeat's answer: Worker must drop Items (pending writes that will
// never commit, copies that were not kept, versions removed or replaced).
type Drop struct {
	Worker base.WorkerID
	Items  []base.KeyVersion
}

// Reregister is part of a heartbeat's answer: Worker must register again with its full
// inventory (its reconciliation settles what the leader could not).
type Reregister struct{ Worker base.WorkerID }

// Settled is part of a heartbeat's answer, last: the leader owes Worker nothing once the
// answer's drops are applied (none left queued, no re-registration asked for or pending). A
// worker vouches for reads from kept lookups only while such answers keep coming
// (docs/protocol.md, "Reads from a kept lookup").
type Settled struct{ Worker base.WorkerID }

// ScanRepairs asks the driver to scan the metadata for objects below their replica count or
// on a draining worker and to Plan them. Force: a drain started or was cancelled, so the scan
// must run even when the counters it keys on look unchanged.
type ScanRepairs struct{ Force bool }

// Answer is the answer to the call waiting for the event's commit (LeaveWorker): the
// metadata refused the command with Err. A commit that did not happen at all answers with
// its own error (the driver has it); a success needs no Answer.
type Answer struct{ Err error }

// WorkerLost reports that the MarkWorkerLost of worker ID committed: it is dead, Replicas of
// its replicas are lost (kept for its return). Grace: it had announced a restart and did not
// come back within its restart grace (else it was silent past ClientTTL or its connection
// grace).
type WorkerLost struct {
	ID       base.WorkerID
	Grace    bool
	Replicas int
}

// WorkerLeft reports that the LeaveWorker of worker ID committed (or that it had left
// already): it is unmounted. Keep: its replicas are kept for its return (NVMe tier);
// Replicas and Removed count the replicas made lost (or dropped) and objects removed.
type WorkerLeft struct {
	ID                base.WorkerID
	Keep              bool
	Replicas, Removed int
}

// WorkerLeaving reports that worker ID announced a restart: no placements, and dead at
// Until unless it registers again.
type WorkerLeaving struct {
	ID    base.WorkerID
	Until time.Time
}

// WorkerBack reports that worker ID, which had announced a restart, registered again Away
// after the announcement: its restart grace ends.
type WorkerBack struct {
	ID   base.WorkerID
	Away time.Duration
}

// WorkerUnreachable reports that worker ID's connection to the leader broke: no placements,
// and dead ConnGrace later unless it attaches again.
type WorkerUnreachable struct{ ID base.WorkerID }

// PutExpired reports a put that did not reach PutEnd within PutTimeout: its reservation is
// gone and its workers are owed drops.
type PutExpired struct {
	Key     string
	Version base.Version
}

// SessionExpired reports a paged registration dropped after the session TTL without a page.
type SessionExpired struct {
	ID      base.WorkerID
	Pages   int
	Objects int
	Idle    time.Duration
}

// TaskEnded reports that copy or move task ID ended (its last order finished): Status is
// base.TaskSuccess or base.TaskFailed, Message the first failure's reason. Each task ends
// once; a task dropped with its leadership never ends.
type TaskEnded struct {
	ID      base.TaskID
	Type    base.TaskType
	Key     string
	Status  base.TaskStatus
	Message string
}

func (Propose) effect()           {}
func (Copy) effect()              {}
func (Drop) effect()              {}
func (Reregister) effect()        {}
func (Settled) effect()           {}
func (ScanRepairs) effect()       {}
func (Answer) effect()            {}
func (WorkerLost) effect()        {}
func (WorkerLeft) effect()        {}
func (WorkerLeaving) effect()     {}
func (WorkerBack) effect()        {}
func (WorkerUnreachable) effect() {}
func (PutExpired) effect()        {}
func (SessionExpired) effect()    {}
func (TaskEnded) effect()         {}
