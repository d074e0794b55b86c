package master

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mooncake-go/mooncake/internal/base"
	"github.com/mooncake-go/mooncake/raftmeta"
	"github.com/mooncake-go/mooncake/server/lifecycle"
	"github.com/mooncake-go/mooncake/transfer"
)

// The Master drives the lifecycle machine (m.mu.lc): it feeds it events under m.mu and
// executes its outputs outside the lock, proposing raft commands and running copies.

const (
	// repairScanEvery is how often the leader looks for objects to repair or drain while
	// the queue is idle. A scan is O(objects) (raftmeta Range), so it is also skipped while
	// nothing that could change its result has changed (repairDriver.sig).
	repairScanEvery = 2 * time.Second
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
	// nextScan and sig are the leader loop's: when the next scan may run, and the segment
	// counters at the last scan that planned nothing (a scan is repeated only when they
	// change). Leader loop only.
	nextScan time.Time
	sig      string
	// kick asks for a scan at the next tick (a drain started or was cancelled).
	kick atomic.Bool
}

// lifecycleTick is the leader loop's step: the machine moves workers along their deadlines
// (proposing MarkWorkerLost for the silent ones) and hands out copies; when the repair queue
// is idle the leader scans for more work.
func (m *Master) lifecycleTick() {
	now := m.now()
	m.mu.Lock()
	out := m.mu.lc.Tick(now)
	idle := m.mu.lc.RepairIdle()
	m.mu.Unlock()
	m.execute(out)
	if kick := m.repair.kick.Swap(false); kick {
		m.repair.sig = ""
		m.repair.nextScan = time.Time{}
	}
	if idle && !now.Before(m.repair.nextScan) {
		m.repair.nextScan = now.Add(repairScanEvery)
		m.scanRepairs()
	}
}

// execute proposes the machine's commands in order and starts its copies.
func (m *Master) execute(out lifecycle.Output) {
	for _, c := range out.Propose {
		m.propose(c)
	}
	for _, o := range out.Copies {
		m.repair.wg.Add(1)
		go m.copyObject(o)
	}
}

// commit commits one command the machine asked for (bounded by ctx and applyTimeout) and
// reports the outcome back to it.
func (m *Master) commit(ctx context.Context, c raftmeta.Command) (raftmeta.Result, error) {
	ctx, cancel := context.WithTimeout(ctx, applyTimeout)
	res, err := m.node.Apply(ctx, c)
	cancel()
	m.mu.Lock()
	defer m.mu.Unlock()
	if err != nil {
		m.mu.lc.Failed(c)
	} else {
		m.mu.lc.Applied(c, res)
	}
	return res, err
}

// propose commits one command the machine asked for (commit) and logs the outcome.
func (m *Master) propose(c raftmeta.Command) {
	res, err := m.commit(context.Background(), c)
	m.mu.Lock()
	lost, isLost := c.(raftmeta.MarkWorkerLost)
	var grace bool
	if isLost && err == nil {
		// (Applied released the bytes of the puts placed on it: they cannot complete.)
		w, _ := m.mu.lc.Worker(lost.ID)
		grace = !w.LeavingAt.IsZero()
	}
	m.mu.Unlock()
	switch {
	case isLost && err != nil:
		m.log.Warn("mark worker dead failed; retrying next tick", "worker", lost.ID, "err", err)
	case isLost:
		if m.cfg.Test.OnWorkerDead != nil {
			m.cfg.Test.OnWorkerDead(lost.ID)
		}
		why := "no heartbeat within client_ttl"
		if grace {
			why = "not back within its restart grace after a graceful shutdown"
		}
		m.log.Warn("worker marked dead: "+why+"; its replicas are kept for re-adoption and repaired elsewhere",
			"worker", lost.ID, "client_ttl", m.cfg.ClientTTL, "worker_restart_grace", m.cfg.WorkerRestartGrace,
			"replicas_lost", res.Dropped)
	case err != nil:
		m.log.Warn("lifecycle proposal failed", "command", fmt.Sprintf("%T", c), "err", err)
	}
}

// copyObject runs one copy order: the source worker copies the object to the target
// (Replicate), then the machine turns the outcome into a MoveReplicas or a drop.
func (m *Master) copyObject(o lifecycle.CopyOrder) {
	defer m.repair.wg.Done()
	persistence := base.PersistenceDefault
	for _, s := range m.node.Segments() {
		if s.ID == o.To && s.NVMeCapacity > 0 {
			// A repair copy restores resilience: keep it on disk where the target has one.
			persistence = base.PersistenceDurable
		}
	}
	ctx, cancel := context.WithTimeout(m.repair.ctx, copyTimeout)
	err := m.cli.Call(ctx, o.SrcAddr, &transfer.ReplicateRequest{Key: o.Key, Version: o.Version, To: o.To,
		ToAddr: o.ToAddr, Persistence: persistence}, nil)
	cancel()
	m.rmet.copy(o.Size, err)
	if err != nil {
		m.log.Debug("repair copy failed; the next scan plans it again", "key", o.Key, "from", o.Src, "to", o.To, "err", err)
	}
	m.mu.Lock()
	out := m.mu.lc.CopyDone(o, err)
	m.mu.Unlock()
	m.execute(out)
	// The copy's slot is free once its MoveReplicas is decided: start the next one now
	// rather than at the next tick.
	m.mu.Lock()
	out = m.mu.lc.Dispatch(m.now())
	m.mu.Unlock()
	m.execute(out)
}

// scanRepairs looks for objects below their replica count (a live replica and lost ones) or
// with a replica on a draining worker, and hands them to the machine's queue. It walks the
// objects only when some worker has lost replicas or some draining worker holds replicas, and not again while those counters stay as they were at a scan that found
// nothing to copy.
func (m *Master) scanRepairs() {
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
	if !work || sig == m.repair.sig {
		if !work {
			m.mu.Lock()
			m.mu.lc.Plan(nil, nil, nil, 0, 0)
			m.mu.Unlock()
		}
		return
	}
	var cands []lifecycle.Candidate
	under, onDraining := 0, 0
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
	targets, addrs := m.repairTargets(segs)
	m.mu.Lock()
	m.mu.lc.Plan(cands, targets, addrs, under, onDraining)
	planned := !m.mu.lc.RepairIdle()
	m.mu.Unlock()
	m.repair.sig = ""
	if !planned {
		m.repair.sig = sig
	}
}

// repairTargets lists the active workers with their free bytes (DRAM and NVMe room beyond
// their use and reservations) and every active worker's address.
func (m *Master) repairTargets(segs []raftmeta.Segment) ([]lifecycle.Target, map[base.WorkerID]string) {
	var targets []lifecycle.Target
	addrs := map[base.WorkerID]string{}
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, s := range segs {
		if s.State != raftmeta.SegmentActive {
			continue
		}
		addrs[s.ID] = s.Address
		w, ok := m.mu.lc.Worker(s.ID)
		if !ok {
			continue
		}
		free := max(0, s.DRAMCapacity-w.Usage.DRAMUsed-w.Reserved) + max(0, s.NVMeCapacity-w.Usage.NVMeUsed)
		targets = append(targets, lifecycle.Target{ID: s.ID, Address: s.Address, Free: free})
	}
	return targets, addrs
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
	cmd := raftmeta.SetWorkerDraining{ID: id, Draining: !cancel}
	actx, done := context.WithTimeout(ctx, applyTimeout)
	defer done()
	res, err := m.node.Apply(actx, cmd)
	if err != nil {
		return err
	}
	if res.Err != nil {
		return res.Err
	}
	m.mu.Lock()
	m.mu.lc.Applied(cmd, res)
	m.mu.Unlock()
	m.repair.kick.Store(true) // plan at the next tick
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
	rs := m.mu.lc.RepairStats()
	m.mu.Unlock()
	return repairGauges{UnderReplicated: rs.UnderReplicated, DrainingReplicas: rs.Draining, Queued: rs.Queued,
		InFlight: rs.InFlight, LostReplicas: st.LostReplicas, InvisibleObjects: st.Invisible}
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
	cmd := raftmeta.UnregisterWorker{ID: id}
	actx, done := context.WithTimeout(ctx, applyTimeout)
	defer done()
	res, err := m.node.Apply(actx, cmd)
	if err == nil {
		err = res.Err
	}
	if err != nil {
		return err
	}
	m.mu.Lock()
	m.mu.lc.Applied(cmd, res)
	m.mu.Unlock()
	m.log.Info("worker retired: the replicas kept for its return are forgotten", "worker", id,
		"replicas_dropped", res.Dropped, "objects_removed", res.Removed)
	return nil
}
