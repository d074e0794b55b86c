package lifecycle

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/mooncake-go/mooncake/internal/base"
	"github.com/mooncake-go/mooncake/raftmeta"
)

// RepairConfig bounds the copies repair and drain make. Zero fields take the defaults.
type RepairConfig struct {
	// Concurrency bounds copies in flight. Default 4: enough to keep a 10 Gb/s link busy
	// with MiB-sized objects, few enough that foreground requests keep most connections.
	Concurrency int
	// BytesPerSec bounds the copy rate on average (a token bucket with a one-second burst).
	// Default 128 MiB/s, about a tenth of a 10 Gb/s link.
	BytesPerSec int64
	// MaxQueued bounds the copies queued; the driver's next scan refills. Default 65536.
	MaxQueued int
	// MaxTasks bounds the copy and move tasks kept for query_task (tasks.go); past it the
	// oldest finished one is forgotten. Default 4096.
	MaxTasks int
	// ScanEvery is how often Tick asks for a repair scan (ScanRepairs) while the queue is
	// idle. A scan is O(objects) (the driver walks the metadata), so the driver also skips
	// one whose inputs have not changed. Default 2 s.
	ScanEvery time.Duration
}

func (c *RepairConfig) ensureDefaults() {
	if c.Concurrency == 0 {
		c.Concurrency = 4
	}
	if c.BytesPerSec == 0 {
		c.BytesPerSec = 128 << 20
	}
	if c.MaxQueued == 0 {
		c.MaxQueued = 1 << 16
	}
	if c.MaxTasks == 0 {
		c.MaxTasks = 4096
	}
	if c.ScanEvery == 0 {
		c.ScanEvery = 2 * time.Second
	}
}

// Candidate is one object the driver found needing a copy: below its replica count (Lost
// names workers whose replicas are lost) or with a replica on a draining worker.
type Candidate struct {
	Key      string
	Version  base.Version
	Size     int64
	Replicas []base.WorkerID // live
	Lost     []base.WorkerID
}

// Target is a worker a copy may go to, with its free bytes (the driver's estimate).
type Target struct {
	ID      base.WorkerID
	Address string
	Free    int64
}

// CopyOrder asks worker Src (at SrcAddr) to copy Key at Version to worker To (at ToAddr).
// When it is done, the copy on To replaces From's replica (MoveReplicas): From is the lost
// replica (repair) or the draining worker (drain; then From == Src), or a move task's
// source. A copy task's order (Add) has no From: the copy on To is one more replica
// (AddReplicas). Task names the order's task (zero for repair and drain).
type CopyOrder struct {
	Key             string
	Version         base.Version
	Size            int64
	From, Src, To   base.WorkerID
	SrcAddr, ToAddr string
	Drain           bool
	Add             bool
	Task            base.TaskID
}

// RepairStats are the repair and drain counters (status and metrics).
type RepairStats struct {
	Queued, InFlight int
	// UnderReplicated is the count of objects with lost replicas at the last Plan.
	UnderReplicated int
	// Draining is the count of replicas on draining workers at the last Plan.
	Draining int
	// Copied, Failed and CopiedBytes count finished copies this leadership.
	Copied, Failed int64
	CopiedBytes    int64
}

type repairState struct {
	queue []CopyOrder
	// queued counts the orders of each key queued or in flight. Invariant: at most one
	// order of a key is in flight (tick holds back the others), so two copies of one key
	// never race to commit.
	queued   map[string]int
	inflight map[orderKey]*CopyOrder
	targets  map[base.WorkerID]*Target
	tokens   float64
	// last is the time of the last tick (a commit's outcome carries no clock).
	last  time.Time
	stats RepairStats
	// tasks are the copy and move tasks (tasks.go), taskOrder their ids oldest first.
	tasks     map[base.TaskID]*Task
	taskOrder []base.TaskID
	// ended are the TaskEnded reports of tasks ended since the last tick, which returns
	// them. Every event that can end a task returns tick's effects.
	ended []Effect
}

func newRepairState() repairState {
	return repairState{queued: map[string]int{}, inflight: map[orderKey]*CopyOrder{}, targets: map[base.WorkerID]*Target{},
		tasks: map[base.TaskID]*Task{}}
}

// Plan queues a copy for each candidate not yet queued, choosing the source (a live replica,
// the draining worker itself for a drain) and the target (the placeable worker with the most
// free bytes holding no copy, live or lost). targets are the workers copies may go to, with
// their addresses; addrs names every active worker's address (sources). underReplicated and
// draining are the scan's counts for status. It reports whether any copy is queued or in
// flight afterwards (false: the scan found nothing to do).
func (m *Machine) Plan(cands []Candidate, targets []Target, addrs map[base.WorkerID]string, underReplicated, draining int) bool {
	r := &m.repair
	r.stats.UnderReplicated, r.stats.Draining = underReplicated, draining
	r.targets = map[base.WorkerID]*Target{}
	for _, t := range targets {
		if m.Placeable(t.ID) {
			tc := t
			r.targets[t.ID] = &tc
		}
	}
	for _, o := range r.inflight {
		if t := r.targets[o.To]; t != nil {
			t.Free -= o.Size
		}
	}
	for _, c := range cands {
		if len(r.queue) >= m.cfg.Repair.MaxQueued {
			break
		}
		if r.queued[c.Key] > 0 || len(c.Replicas) == 0 {
			continue
		}
		order, ok := m.order(c, addrs)
		if !ok {
			continue
		}
		r.queue = append(r.queue, order)
		r.queued[c.Key]++
	}
	return !m.repairIdle()
}

// Targets lists the workers of segs a copy may go to (the active ones this leadership
// knows) with their free bytes: DRAM and NVMe room beyond their use and reservations, and
// every active worker's address (copy sources), for Plan.
func (m *Machine) Targets(segs []raftmeta.Segment) ([]Target, map[base.WorkerID]string) {
	var targets []Target
	addrs := map[base.WorkerID]string{}
	for _, s := range segs {
		if s.State != raftmeta.SegmentActive {
			continue
		}
		addrs[s.ID] = s.Address
		w := m.workers[s.ID]
		if w == nil {
			continue
		}
		free := max(0, s.DRAMCapacity-w.Usage.DRAMUsed-w.Reserved) + max(0, s.NVMeCapacity-w.Usage.NVMeUsed)
		targets = append(targets, Target{ID: s.ID, Address: s.Address, Free: free})
	}
	return targets, addrs
}

// order builds the copy order of one candidate; ok is false when no source or target fits.
func (m *Machine) order(c Candidate, addrs map[base.WorkerID]string) (CopyOrder, bool) {
	o := CopyOrder{Key: c.Key, Version: c.Version, Size: c.Size}
	switch {
	case len(c.Lost) > 0:
		o.From = c.Lost[0]
		for _, id := range c.Replicas {
			if w := m.workers[id]; w != nil && w.State != Dead && addrs[id] != "" {
				o.Src = id
				break
			}
		}
	default:
		for _, id := range c.Replicas {
			if w := m.workers[id]; w != nil && w.Draining {
				o.From, o.Src, o.Drain = id, id, true
				break
			}
		}
	}
	if o.Src == "" {
		return o, false
	}
	o.SrcAddr = addrs[o.Src]
	var best *Target
	for _, id := range sortedTargets(m.repair.targets) {
		t := m.repair.targets[id]
		if slices.Contains(c.Replicas, id) || t.Free < c.Size {
			continue
		}
		if best == nil || t.Free > best.Free {
			best = t
		}
	}
	if best == nil {
		return o, false
	}
	best.Free -= c.Size
	o.To, o.ToAddr = best.ID, best.Address
	if !o.Drain && slices.Contains(c.Lost, o.To) {
		// A worker that came back without its replica gets it again: its own lost replica
		// is the one replaced. (A dead worker is never a target: targets are placeable.)
		o.From = o.To
	}
	return o, true
}

func sortedTargets(ts map[base.WorkerID]*Target) []base.WorkerID {
	ids := make([]base.WorkerID, 0, len(ts))
	for id := range ts {
		ids = append(ids, id)
	}
	slices.SortFunc(ids, func(a, b base.WorkerID) int { return strings.Compare(string(a), string(b)) })
	return ids
}

// tick refills the token bucket and hands out queued orders while a slot and tokens remain,
// holding back an order whose key has one in flight. An order whose target is no longer
// placeable is dropped (the next scan plans a repair again; a task's copy fails).
func (r *repairState) tick(now time.Time, m *Machine) []Effect {
	var out []Effect
	rate := float64(m.cfg.Repair.BytesPerSec)
	if !r.last.IsZero() && now.After(r.last) {
		r.tokens = min(rate, r.tokens+rate*now.Sub(r.last).Seconds())
	} else if r.last.IsZero() {
		r.tokens = rate
	}
	r.last = now
	busy := map[string]bool{}
	for k := range r.inflight {
		busy[k.key] = true
	}
	kept := r.queue[:0]
	for i, o := range r.queue {
		if len(r.inflight) >= m.cfg.Repair.Concurrency || r.tokens <= 0 {
			kept = append(kept, r.queue[i:]...)
			break
		}
		switch {
		case busy[o.Key]:
			kept = append(kept, o)
			continue
		case !m.Placeable(o.To):
			r.unqueue(o.Key)
			r.taskFinished(&o, fmt.Errorf("%w: target %s is no longer alive or is draining", base.ErrSegmentNotFound, o.To))
			continue
		}
		busy[o.Key] = true
		r.tokens -= float64(o.Size)
		r.inflight[orderKey{o.Key, o.To}] = &o
		r.taskStarted(&o, now)
		out = append(out, Copy{Order: o})
	}
	clear(r.queue[len(kept):])
	r.queue = kept
	if len(r.queue) == 0 {
		r.queue = nil
	}
	out = append(out, r.ended...)
	r.ended = nil
	return out
}

// CopyDone reports the end of a copy order at now. A copy that succeeded is committed by the
// MoveReplicas (AddReplicas for a copy task) it proposes (the driver reports the outcome with
// Applied or Failed, which frees the copy's slot); one that failed is forgotten (the next
// scan plans a repair again; a task's copy fails), the target is owed a drop of whatever it
// received, and the queue hands out the next copies at once.
func (m *Machine) CopyDone(now time.Time, o CopyOrder, err error) []Effect {
	r := &m.repair
	if err != nil {
		if p := r.inflight[orderKey{o.Key, o.To}]; p != nil {
			r.finish(m, p, err)
		}
		return r.tick(now, m)
	}
	if o.Add {
		return []Effect{Propose{raftmeta.AddReplicas{Worker: o.To,
			Items: []base.KeyVersion{{Key: o.Key, Version: o.Version}}}}}
	}
	return []Effect{Propose{raftmeta.MoveReplicas{Items: []raftmeta.ReplicaMove{
		{Key: o.Key, Version: o.Version, From: o.From, To: o.To}}}}}
}

// moved ends an in-flight order with its MoveReplicas outcome.
func (r *repairState) moved(m *Machine, it raftmeta.ReplicaMove, err error) {
	o := r.inflight[orderKey{it.Key, it.To}]
	if o == nil || o.Add || o.Version != it.Version {
		return
	}
	r.finish(m, o, err)
}

// RepairStats returns the repair and drain counters.
func (m *Machine) RepairStats() RepairStats {
	s := m.repair.stats
	s.Queued, s.InFlight = len(m.repair.queue), len(m.repair.inflight)
	return s
}

// repairIdle reports whether no copy is queued or in flight (Tick asks for a scan then).
func (m *Machine) repairIdle() bool { return len(m.repair.queue) == 0 && len(m.repair.inflight) == 0 }
