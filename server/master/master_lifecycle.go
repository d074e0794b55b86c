package master

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/mooncake-go/mooncake/internal/base"
	"github.com/mooncake-go/mooncake/internal/invariants"
	"github.com/mooncake-go/mooncake/raftmeta"
	"github.com/mooncake-go/mooncake/server/lifecycle"
	"github.com/mooncake-go/mooncake/transfer"
)

// The Master drives the lifecycle machine (m.mu.lc): it feeds it events under m.mu
// (lcEvent) and executes the effects they return outside the lock (execute), proposing raft
// commands, running copies and answering calls. The machine decides; this file is glue.

const (
	// copyTimeout bounds one Replicate call (a worker-to-worker copy of one object, up to
	// MaxValueSize; 64 MiB at 128 MiB/s is half a second).
	copyTimeout = 2 * time.Minute
)

// repairDriver runs the copy orders of the lifecycle machine: one goroutine per copy in
// flight (the machine bounds them, RepairConfig.Concurrency). Shutdown cancels ctx and waits.
type repairDriver struct {
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
	// sig is the segment counters at the last scan that planned nothing: a scan is repeated
	// only when they change (or the machine forces one). Leader loop only (ScanRepairs comes
	// from Tick).
	sig string
}

// lcEvent feeds the lifecycle machine one event under m.mu and returns its effects, which
// the caller executes (execute) once m.mu is released.
func (m *Master) lcEvent(event func(lc *lifecycle.Machine) []lifecycle.Effect) []lifecycle.Effect {
	m.mu.Lock()
	defer m.mu.Unlock()
	return event(m.mu.lc)
}

// execute runs the machine's effects in order. REQUIRES: m.mu is not held (proposals are
// committed here). Proposals are committed with ctx; it returns the answer they make for the
// call that caused them: a heartbeat's reply, and the error of the first proposal not
// committed or refused (Answer). Callers with no one to answer ignore it (failures are
// logged here).
func (m *Master) execute(ctx context.Context, effs []lifecycle.Effect) (HeartbeatReply, error) {
	var reply HeartbeatReply
	var answer error
	for _, e := range effs {
		var err error
		switch e := e.(type) {
		case lifecycle.Propose:
			_, err = m.propose(ctx, e.Cmd)
		case lifecycle.Copy:
			m.repair.wg.Add(1)
			go m.copyObject(e.Order)
		case lifecycle.Drop:
			reply.Drops = append(reply.Drops, e.Items...)
		case lifecycle.Reregister:
			reply.Reregister = true
		case lifecycle.Settled:
			reply.Settled = true
		case lifecycle.ScanRepairs:
			m.scanRepairs(e.Force)
		case lifecycle.Answer:
			err = e.Err
		case lifecycle.WorkerLost:
			if m.cfg.Test.OnWorkerDead != nil {
				m.cfg.Test.OnWorkerDead(e.ID)
			}
			why := "no heartbeat within client_ttl"
			if e.Grace {
				why = "not back within its restart grace after a graceful shutdown"
			}
			m.log.Warn("worker marked dead: "+why+"; its replicas are kept for re-adoption and repaired elsewhere",
				"worker", e.ID, "client_ttl", m.cfg.ClientTTL, "worker_restart_grace", m.cfg.WorkerRestartGrace,
				"replicas_lost", e.Replicas)
		case lifecycle.WorkerLeft:
			m.rmet.leaves.Add(1)
			m.log.Info("worker left: unmounted, no new puts; objects held only there are gone from the metadata",
				"worker", e.ID, "kept_for_return", e.Keep, "replicas", e.Replicas, "objects_removed", e.Removed)
		case lifecycle.WorkerLeaving:
			m.log.Info("worker leaving to restart; keeping its replicas for the restart grace", "worker", e.ID,
				"worker_restart_grace", m.cfg.WorkerRestartGrace, "until", e.Until.UTC().Format(time.RFC3339))
		case lifecycle.WorkerBack:
			m.log.Info("worker back after a graceful shutdown; its restart grace ends", "worker", e.ID, "away", e.Away)
		case lifecycle.WorkerUnreachable:
			m.rmet.disconnects.Add(1)
			m.log.Warn("worker's connection to the leader closed: no new puts; marked dead unless it attaches again",
				"worker", e.ID, "client_disconnect_grace", m.cfg.ClientDisconnectGrace)
		case lifecycle.PutExpired:
			m.met.mc.putDiscards.Add(1)
			m.log.Info("put timed out before PutEnd; workers drop it", "key", e.Key, "version", e.Version, "put_timeout", m.cfg.PutTimeout)
		case lifecycle.TaskEnded:
			m.rmet.taskEnded(e)
			if e.Status == base.TaskFailed {
				m.log.Info("copy task failed", "task", e.ID, "type", e.Type, "key", e.Key, "reason", e.Message)
			} else {
				m.log.Info("copy task done", "task", e.ID, "type", e.Type, "key", e.Key)
			}
		case lifecycle.SessionExpired:
			m.log.Info("dropped a worker registration never finished", "worker", e.ID, "pages", e.Pages,
				"objects", e.Objects, "idle", e.Idle)
		default:
			err = invariants.AssertionFailedf("server: unknown lifecycle effect %T", e)
		}
		if answer == nil {
			answer = err
		}
	}
	return reply, answer
}

// lifecycleTick is the leader loop's step: the machine moves workers along their deadlines
// (proposing MarkWorkerLost for the silent ones), hands out copies and, when the repair
// queue is idle, asks for a scan.
func (m *Master) lifecycleTick() {
	now := m.now()
	m.execute(context.Background(), m.lcEvent(func(lc *lifecycle.Machine) []lifecycle.Effect { return lc.Tick(now) }))
}

// commit commits one command (bounded by ctx and applyTimeout), reports the outcome to the
// machine and executes what that returns. Its error is the commit's, else the machine's
// answer (a refused LeaveWorker).
func (m *Master) commit(ctx context.Context, c raftmeta.Command) (raftmeta.Result, error) {
	actx, cancel := context.WithTimeout(ctx, applyTimeout)
	res, err := m.node.Apply(actx, c)
	cancel()
	now := m.now()
	effs := m.lcEvent(func(lc *lifecycle.Machine) []lifecycle.Effect {
		if err != nil {
			return lc.Failed(now, c)
		}
		return lc.Applied(now, c, res)
	})
	if _, aerr := m.execute(ctx, effs); err == nil {
		err = aerr
	}
	return res, err
}

// propose commits one command the machine asked for (commit) and logs a failure.
func (m *Master) propose(ctx context.Context, c raftmeta.Command) (raftmeta.Result, error) {
	res, err := m.commit(ctx, c)
	if err == nil {
		return res, nil
	}
	switch c := c.(type) {
	case raftmeta.MarkWorkerLost:
		m.log.Warn("mark worker dead failed; retrying next tick", "worker", c.ID, "err", err)
	case raftmeta.LeaveWorker:
		m.log.Warn("worker leave not committed; it is placed on again until it retries or dies", "worker", c.ID, "err", err)
	default:
		m.log.Warn("lifecycle proposal failed", "command", fmt.Sprintf("%T", c), "err", err)
	}
	return res, err
}

// copyObject runs one copy order: the source worker copies the object to the target
// (Replicate), then the machine turns the outcome into a MoveReplicas or a drop, and hands
// out the next copies once the copy's slot is free.
func (m *Master) copyObject(o lifecycle.CopyOrder) {
	defer m.repair.wg.Done()
	persistence := base.PersistenceDefault
	for _, s := range m.node.Segments() {
		if s.ID == o.To && s.NVMeCapacity > 0 {
			// A repair copy restores resilience: keep it on disk where the target has one.
			persistence = base.PersistenceDurable
		}
	}
	if m.cfg.Test.BeforeCopy != nil {
		m.cfg.Test.BeforeCopy(o)
	}
	ctx, cancel := context.WithTimeout(m.repair.ctx, copyTimeout)
	err := m.cli.Call(ctx, o.SrcAddr, &transfer.ReplicateRequest{Key: o.Key, Version: o.Version, To: o.To,
		ToAddr: o.ToAddr, Persistence: persistence}, nil)
	cancel()
	m.rmet.copy(o.Size, err)
	if err != nil {
		m.log.Debug("repair copy failed; the next scan plans it again", "key", o.Key, "from", o.Src, "to", o.To, "err", err)
	}
	now := m.now()
	m.execute(context.Background(), m.lcEvent(func(lc *lifecycle.Machine) []lifecycle.Effect { return lc.CopyDone(now, o, err) }))
}

// scanRepairs looks for objects below their replica count (a live replica and lost ones) or
// with a replica on a draining worker, and hands them to the machine's queue. It walks the
// objects only when some worker has lost replicas or some draining worker holds replicas,
// and, unless forced, not again while those counters stay as they were at a scan that found
// nothing to copy.
func (m *Master) scanRepairs(force bool) {
	if force {
		m.repair.sig = ""
	}
	segs := m.node.Segments()
	draining := map[base.WorkerID]bool{}
	sig, work := "", false
	for _, s := range segs {
		sig += fmt.Sprintf("%s:%d:%d:%d:%t;", s.ID, s.State, s.LostReplicas, s.Objects, s.Draining)
		if s.Draining {
			draining[s.ID] = true
		}
		// Lost replicas name dead workers, or returned ones that no longer had them.
		if s.LostReplicas > 0 || (s.Draining && s.Objects > 0) {
			work = true
		}
	}
	if work && sig == m.repair.sig {
		return
	}
	var cands []lifecycle.Candidate
	under, onDraining := 0, 0
	if work {
		m.node.Range("", func(o raftmeta.Object) bool {
			drain := slices.ContainsFunc(o.Replicas, func(id base.WorkerID) bool { return draining[id] })
			if len(o.Lost) > 0 {
				under++
			}
			if drain {
				onDraining++
			}
			if len(o.Replicas) > 0 && (len(o.Lost) > 0 || drain) {
				cands = append(cands, lifecycle.Candidate{Key: o.Key, Version: o.Version, Size: o.Size,
					Replicas: o.Replicas, Lost: o.Lost})
			}
			return true
		})
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if !work {
		m.mu.lc.Plan(nil, nil, nil, 0, 0) // nothing to plan: the counters go to zero
		return
	}
	targets, addrs := m.mu.lc.Targets(segs)
	m.repair.sig = ""
	if !m.mu.lc.Plan(cands, targets, addrs, under, onDraining) {
		m.repair.sig = sig
	}
}

// drainWorker starts draining a worker (no new placements; its replicas are moved to the
// others by the repair queue) or, with cancel, stops it. The flag is committed
// (SetWorkerDraining), so it survives failovers. Leader only.
func (m *Master) drainWorker(ctx context.Context, id base.WorkerID, cancel bool) error {
	if err := base.ValidateWorkerID(id); err != nil {
		return err
	}
	if !m.ensureLeader() {
		return m.notLeader()
	}
	if !slices.ContainsFunc(m.node.Segments(), func(s raftmeta.Segment) bool { return s.ID == id }) {
		return fmt.Errorf("%w: worker %s is not registered", base.ErrSegmentNotFound, id)
	}
	// The machine learns the outcome (commit): committed, the worker drains (or not) and the
	// next tick plans at once.
	res, err := m.commit(ctx, raftmeta.SetWorkerDraining{ID: id, Draining: !cancel})
	if err != nil {
		return err
	}
	if res.Err != nil {
		return res.Err
	}
	if cancel {
		m.log.Info("worker drain cancelled; it takes new puts again", "worker", id)
	} else {
		m.log.Info("worker draining: no new puts; its objects move to the other workers", "worker", id)
	}
	return nil
}

// repairGauges reads the repair gauges (at scrape time).
func (m *Master) repairGauges() repairGauges {
	st := m.node.Stats()
	m.mu.Lock()
	rs, tasks := m.mu.lc.RepairStats(), m.mu.lc.TaskCounts()
	m.mu.Unlock()
	return repairGauges{UnderReplicated: rs.UnderReplicated, DrainingReplicas: rs.Draining, Queued: rs.Queued,
		InFlight: rs.InFlight, LostReplicas: st.LostReplicas, InvisibleObjects: st.Invisible, Tasks: tasks}
}

// retireWorker forgets a dead (or left) worker for good (the RetireWorker call, an operator's
// decision that it will not return): UnregisterWorker drops the replicas the metadata kept
// for its return and removes the objects left with none. Leader only. A worker that is not
// dead is refused: drain it first, then stop it.
func (m *Master) retireWorker(ctx context.Context, id base.WorkerID) error {
	if err := base.ValidateWorkerID(id); err != nil {
		return err
	}
	if !m.ensureLeader() {
		return m.notLeader()
	}
	i := slices.IndexFunc(m.node.Segments(), func(s raftmeta.Segment) bool { return s.ID == id })
	if i < 0 {
		return fmt.Errorf("%w: worker %s is not registered", base.ErrSegmentNotFound, id)
	}
	if seg := m.node.Segments()[i]; seg.State != raftmeta.SegmentDead && seg.State != raftmeta.SegmentLeft {
		return fmt.Errorf("%w: worker %s is %s: only a dead worker (or one that left) is retired (drain it, stop it, wait for client_ttl)",
			base.ErrInvalidParams, id, seg.State)
	}
	res, err := m.commit(ctx, raftmeta.UnregisterWorker{ID: id}) // committed, the machine forgets it
	if err == nil {
		err = res.Err
	}
	if err != nil {
		return err
	}
	m.log.Info("worker retired: the replicas kept for its return are forgotten", "worker", id,
		"replicas_dropped", res.Dropped, "objects_removed", res.Removed)
	return nil
}
