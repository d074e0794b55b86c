package lifecycle

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/mooncake-go/mooncake/internal/base"
	"github.com/mooncake-go/mooncake/raftmeta"
)

// State is a worker's lifecycle state on the leader.
type State uint8

const (
	// Registering: its first registration with this leader is in progress.
	Registering State = iota + 1
	// Alive: registered and heartbeating; placements go here.
	Alive
	// Suspect: alive but silent past two thirds of its deadline (shown in status; it is
	// still placed on until it is dead, so a slow heartbeat does not fail puts).
	Suspect
	// Leaving: announced a graceful shutdown to restart; no placements; dead after its
	// restart grace.
	Leaving
	// Dead: MarkWorkerLost is proposed or committed; its replicas are lost replicas.
	Dead
	// Returning: a dead worker registering again; its inventory is being re-adopted.
	Returning
	// Draining: alive, with its replicas being moved to other workers; no placements.
	Draining
	// Retired: unregistered; the machine forgets it at once (never listed).
	Retired
	// Unreachable: its connection to the leader broke (Detach); no placements; dead at the
	// connection grace unless it attaches again (leave.go).
	Unreachable
	// Left: it left on purpose (LeaveWorker proposed or committed with its replicas kept);
	// no placements, no deadline, never dead. One forgotten by its leave is not listed.
	Left
)

var stateNames = [...]string{"", "registering", "alive", "suspect", "leaving", "dead", "returning", "draining", "retired",
	"unreachable", "left"}

// ListedStates returns the states Workers can list a worker in, in declaration order: every
// state but Retired (a retired worker is forgotten at once). A new state is listed here by
// being declared, so the leader's per-state gauge (master_workers) follows this type.
func ListedStates() []State {
	out := make([]State, 0, len(stateNames)-2)
	for s := Registering; int(s) < len(stateNames); s++ {
		if s != Retired {
			out = append(out, s)
		}
	}
	return out
}

// String returns the state's status name ("alive", "dead", ...).
func (s State) String() string {
	if int(s) < len(stateNames) && s != 0 {
		return stateNames[s]
	}
	return fmt.Sprintf("state(%d)", uint8(s))
}

// Config are the machine's settings. Zero fields take the defaults named.
type Config struct {
	// ClientTTL: a worker silent this long is dead. Required.
	ClientTTL time.Duration
	// RestartGrace: a worker that announced leaving is dead this long after the
	// announcement, if that is later than ClientTTL after its last message. Zero: none.
	RestartGrace time.Duration
	// ConnGrace: a worker whose connection to the leader broke (Detach) is dead this long
	// after, if that is sooner than ClientTTL after its last message, unless it attaches
	// again. Zero: its deadline stays ClientTTL (it is still not placed on).
	ConnGrace time.Duration
	// MaxDropsPerHeartbeat bounds the drops in one heartbeat reply. Default 4096.
	MaxDropsPerHeartbeat int
	// MaxQueuedDrops bounds the drops queued for one worker; past it the queue is cleared
	// and the worker asked to re-register (its reconciliation finds every orphan). Default 1<<20.
	MaxQueuedDrops int
	// PutTimeout: a put not ended this long after PutStart is dropped. Required: the
	// master passes its put_timeout, whose one default is the config table's
	// (server/config); the lifecycle keeps none of its own.
	PutTimeout time.Duration
	// HighWatermark: a worker whose used plus reserved DRAM is past this fraction of its
	// capacity is weighed as full by placement. Required: the master passes its
	// eviction_high_watermark_ratio, whose one default is the config table's.
	HighWatermark float64
	// MaxReservations bounds the puts in flight. Default 1<<20.
	MaxReservations int
	// Sessions bound paged registrations. See SessionLimits.
	Sessions SessionLimits
	// Repair bounds copies for repair and drain. See RepairConfig.
	Repair RepairConfig
}

// EnsureDefaults fills zero fields.
func (c *Config) EnsureDefaults() {
	if c.MaxDropsPerHeartbeat == 0 {
		c.MaxDropsPerHeartbeat = 4096
	}
	if c.MaxQueuedDrops == 0 {
		c.MaxQueuedDrops = 1 << 20
	}
	if c.MaxReservations == 0 {
		c.MaxReservations = 1 << 20
	}
	c.Sessions.ensureDefaults()
	c.Repair.ensureDefaults()
}

// Usage is a worker's usage per tier: bytes used and objects from each heartbeat, capacities
// from its registration.
type Usage struct {
	DRAMUsed, DRAMCapacity int64
	DRAMObjects            int64
	NVMeUsed, NVMeCapacity int64
	NVMeObjects            int64
}

// Worker is the leader's view of one worker. The machine owns it; Workers returns copies.
type Worker struct {
	ID       base.WorkerID
	State    State
	LastSeen time.Time
	// LeavingAt is when the worker announced leaving (zero otherwise).
	LeavingAt time.Time
	// DisconnectedAt is when its connection to the leader broke (zero while attached, or
	// never attached). Invariant: zero while Alive, Suspect, Draining, Leaving or Left.
	DisconnectedAt time.Time
	// LeftAt is when it left on purpose (Leave; for a worker a new leader found left, when
	// that leadership began); zero otherwise, and again once it registers.
	LeftAt time.Time
	// Draining is the committed drain flag (SetWorkerDraining); it survives death.
	Draining bool
	Usage    Usage
	// Reserved bytes of puts placed here and not yet ended (the driver's reservations).
	Reserved int64
	// LastRegister is when this leader received the worker's last registration.
	LastRegister time.Time

	// drops owed to the worker, sent in heartbeat replies.
	drops []base.KeyVersion
	// resync asks the worker to re-register with its full inventory; resyncAfter asks for
	// it once that time has passed (zero: none).
	resync      bool
	resyncAfter time.Time
	// conn is the token of its attached connection (Attach), 0 when none.
	conn uint64
}

// Machine is the leader's worker soft state. It is not safe for concurrent use: the driver
// serializes every call (the Master holds its mu).
type Machine struct {
	cfg         Config
	leader      bool
	leaderSince time.Time
	workers     map[base.WorkerID]*Worker
	repair      repairState
	// resv: puts between PutStart and PutEnd, by key.
	// Invariant: every reservation's Size is counted in each of its workers' Reserved.
	resv map[string]*Reservation
	// tenantResv: the bytes of resv by the tenant of their keys (tenants.go); only tenants
	// with some. Invariant: the sums of resv's sizes.
	tenantResv map[string]int64
	// sessions: paged registrations in progress, by worker (sessions.go).
	sessions sessionState
	// lastConn numbers attached connections (Attach). It survives leaderships, so a Detach
	// of a connection from an earlier one never matches a newer connection.
	lastConn uint64
	// nextScan is when Tick may ask for the next repair scan (ScanRepairs) while the repair
	// queue is idle; rescan asks for one at the next idle tick, forced (a drain started or
	// was cancelled). Both survive leaderships, as the driver's scan state does.
	nextScan time.Time
	rescan   bool
}

// New returns a machine that is not leader.
func New(cfg Config) *Machine {
	cfg.EnsureDefaults()
	m := &Machine{cfg: cfg}
	m.reset()
	return m
}

// reset forgets every leadership's soft state.
func (m *Machine) reset() {
	m.workers = map[base.WorkerID]*Worker{}
	m.repair = newRepairState()
	m.resv = map[string]*Reservation{}
	m.tenantResv = map[string]int64{}
	m.sessions = newSessionState()
}

// Leader reports whether the machine holds a leadership's state, and since when.
func (m *Machine) Leader() (bool, time.Time) { return m.leader, m.leaderSince }

// BecomeLeader starts a leadership: every active segment gets a full deadline from now and
// is asked to re-register (its inventory reconciles what the previous leader owed it); a
// dead one stays dead. Until its first heartbeat a worker's DRAM use is estimated from the
// replicas the FSM lists on it, capped at its capacity, so a new leader does not place as if
// every worker were empty.
func (m *Machine) BecomeLeader(now time.Time, segs []raftmeta.Segment) {
	m.leader, m.leaderSince = true, now
	m.reset()
	for _, s := range segs {
		w := &Worker{ID: s.ID, LastSeen: now, Draining: s.Draining,
			Usage: Usage{DRAMUsed: min(s.Bytes, s.DRAMCapacity), DRAMCapacity: s.DRAMCapacity, NVMeCapacity: s.NVMeCapacity}}
		switch {
		case s.State == raftmeta.SegmentDead:
			w.State = Dead
		case s.State == raftmeta.SegmentLeft:
			w.State, w.LeftAt = Left, now
		case s.Draining:
			w.State, w.resync = Draining, true
		default:
			w.State, w.resync = Alive, true
		}
		m.workers[s.ID] = w
	}
}

// StepDown forgets the leadership's soft state.
func (m *Machine) StepDown() {
	m.leader, m.leaderSince = false, time.Time{}
	m.reset()
}

// liveState is the state of a live worker that is not suspect: unreachable when its
// connection broke, draining when the drain flag is set, leaving when it announced leaving,
// alive otherwise.
func liveState(w *Worker) State {
	switch {
	case !w.DisconnectedAt.IsZero():
		return Unreachable
	case !w.LeavingAt.IsZero():
		// Before Draining, as Heartbeat(leaving) orders them: a draining worker that announced
		// a restart is leaving (the restart grace rules its deadline), its drain flag kept.
		return Leaving
	case w.Draining:
		return Draining
	}
	return Alive
}

// deadline is when w is dead if it says nothing more.
func (m *Machine) deadline(w *Worker) time.Time {
	d := w.LastSeen.Add(m.cfg.ClientTTL)
	if !w.LeavingAt.IsZero() {
		if g := w.LeavingAt.Add(m.cfg.RestartGrace); g.After(d) {
			d = g
		}
	}
	if !w.DisconnectedAt.IsZero() && m.cfg.ConnGrace > 0 {
		if g := w.DisconnectedAt.Add(m.cfg.ConnGrace); g.Before(d) {
			d = g
		}
	}
	return d
}

// Deadline returns when worker id is declared dead if silent (zero for an unknown, dead or
// left one).
func (m *Machine) Deadline(id base.WorkerID) time.Time {
	w := m.workers[id]
	if w == nil || w.State == Dead || w.State == Left {
		return time.Time{}
	}
	return m.deadline(w)
}

// Tick moves workers along their deadlines and hands out repair copies: a worker silent past
// two thirds of its deadline becomes suspect; past it, MarkWorkerLost is proposed (once; the
// state becomes Dead at once, and Failed puts it back on a failed proposal). When the repair
// queue is idle it asks for a scan (ScanRepairs) every RepairConfig.ScanEvery, and at once
// after a drain started or was cancelled.
func (m *Machine) Tick(now time.Time) []Effect {
	var out []Effect
	for _, id := range m.sortedIDs() {
		w := m.workers[id]
		switch w.State {
		case Dead, Registering, Returning, Left:
			continue
		}
		dl := m.deadline(w)
		switch {
		case now.After(dl):
			w.State = Dead
			w.drops, w.resync, w.resyncAfter = nil, false, time.Time{}
			out = append(out, Propose{raftmeta.MarkWorkerLost{ID: id, Now: now.UnixNano()}})
		case w.State == Alive && now.After(dl.Add(-m.cfg.ClientTTL/3)):
			w.State = Suspect
		}
	}
	out = append(out, m.repair.tick(now, m)...)
	if m.rescan {
		m.nextScan = time.Time{}
	}
	if m.repairIdle() && !now.Before(m.nextScan) {
		m.nextScan = now.Add(m.cfg.Repair.ScanEvery)
		out = append(out, ScanRepairs{Force: m.rescan})
		m.rescan = false
	}
	return out
}

// Failed tells the machine a proposal it asked for was not committed: a MarkWorkerLost is
// retried on the next tick past the deadline (the worker goes back to alive meanwhile); a
// copy's MoveReplicas or AddReplicas fails the copy (its target is owed a drop) and frees its
// slot for the next copy.
func (m *Machine) Failed(now time.Time, c raftmeta.Command) []Effect {
	switch c := c.(type) {
	case raftmeta.MarkWorkerLost:
		if w := m.workers[c.ID]; w != nil && w.State == Dead {
			w.State = liveState(w)
		}
	case raftmeta.MoveReplicas:
		for _, it := range c.Items {
			m.repair.moved(m, it, fmt.Errorf("lifecycle: move not committed"))
		}
		return m.repair.tick(now, m)
	case raftmeta.AddReplicas:
		for _, it := range c.Items {
			m.repair.added(m, c.Worker, it, fmt.Errorf("lifecycle: copy not committed"))
		}
		return m.repair.tick(now, m)
	case raftmeta.LeaveWorker:
		m.leaveFailed(c)
	}
	return nil
}

// Applied tells the machine a command it cares about committed (and its per-item result).
// A committed MarkWorkerLost is reported (WorkerLost), a LeaveWorker too (WorkerLeft); the
// end of a copy's MoveReplicas or AddReplicas frees its slot for the next copy.
func (m *Machine) Applied(now time.Time, c raftmeta.Command, res raftmeta.Result) []Effect {
	switch c := c.(type) {
	case raftmeta.MarkWorkerLost:
		if res.Err == nil {
			m.releaseWorkerReservations(c.ID)
		}
		var grace bool
		if w := m.workers[c.ID]; w != nil {
			grace = !w.LeavingAt.IsZero()
		}
		return []Effect{WorkerLost{ID: c.ID, Grace: grace, Replicas: res.Dropped}}
	case raftmeta.SetWorkerDraining:
		if res.Err != nil {
			return nil
		}
		m.rescan = true // plan the drain (or stop planning it) at the next tick
		if w := m.workers[c.ID]; w != nil {
			w.Draining = c.Draining
			switch {
			case c.Draining && (w.State == Alive || w.State == Suspect):
				w.State = Draining
			case !c.Draining && w.State == Draining:
				w.State = Alive
			}
		}
	case raftmeta.UnregisterWorker:
		if res.Err == nil {
			delete(m.workers, c.ID)
		}
	case raftmeta.LeaveWorker:
		return m.leaveApplied(c, res)
	case raftmeta.MoveReplicas:
		for i, it := range c.Items {
			var err error
			if res.Items != nil {
				err = res.Items[i]
			}
			m.repair.moved(m, it, err)
		}
		return m.repair.tick(now, m)
	case raftmeta.AddReplicas:
		for i, it := range c.Items {
			var err error
			if res.Items != nil {
				err = res.Items[i]
			}
			m.repair.added(m, c.Worker, it, err)
		}
		return m.repair.tick(now, m)
	}
	return nil
}

// Heartbeat records a worker's liveness and usage and answers it: the drops it is owed
// (Drop), or a request to re-register (Reregister); Settled when nothing more is owed. A worker unknown to this leadership, or
// dead, gets ErrSegmentNotFound: it must register again. leaving announces a graceful
// shutdown (restart grace, no placements), reported first (WorkerLeaving).
func (m *Machine) Heartbeat(now time.Time, id base.WorkerID, u Usage, leaving bool) ([]Effect, error) {
	w := m.workers[id]
	if !m.leader || w == nil || w.State == Dead || w.State == Registering || w.State == Returning || w.State == Left {
		return nil, fmt.Errorf("%w: worker %s is not registered with this leader; register again", base.ErrSegmentNotFound, id)
	}
	w.LastSeen = now
	var out []Effect
	switch {
	case leaving:
		// Its connection closes next, on purpose: the restart grace rules, not ConnGrace.
		w.LeavingAt, w.State, w.DisconnectedAt = now, Leaving, time.Time{}
		out = append(out, WorkerLeaving{ID: id, Until: m.deadline(w)})
	case w.State == Suspect:
		w.State = Alive
	}
	// Heartbeats carry no capacities: keep the registration's.
	u.DRAMCapacity, u.NVMeCapacity = w.Usage.DRAMCapacity, w.Usage.NVMeCapacity
	w.Usage = u
	if !w.resyncAfter.IsZero() && now.After(w.resyncAfter) {
		w.resync, w.resyncAfter = true, time.Time{}
	}
	if w.resync {
		w.resync = false
		return append(out, Reregister{Worker: id}), nil
	}
	// NB: drops handed out here are forgotten; if the reply is lost the worker keeps those
	// bytes until its next registration reconciles them (orphans, never wrong answers).
	n := min(len(w.drops), m.cfg.MaxDropsPerHeartbeat)
	if n > 0 {
		out = append(out, Drop{Worker: id, Items: slices.Clone(w.drops[:n])})
	}
	w.drops = w.drops[n:]
	if len(w.drops) == 0 {
		w.drops = nil
		if w.resyncAfter.IsZero() {
			// Nothing owed after this answer. A lost answer is the worker's to notice (its
			// call failed): it stops vouching until it registers again.
			out = append(out, Settled{Worker: id})
		}
	}
	return out, nil
}

// touch records that a worker is alive without a heartbeat (a registration page arrived).
func (m *Machine) touch(now time.Time, id base.WorkerID) {
	if w := m.workers[id]; w != nil && w.State != Dead {
		w.LastSeen = now
	}
}

// RegisterBegin records that a registration of id started (its segment is being committed):
// an unknown worker is registering, a dead one returning; a live one keeps its state.
func (m *Machine) RegisterBegin(now time.Time, id base.WorkerID) {
	w := m.workers[id]
	switch {
	case w == nil:
		m.workers[id] = &Worker{ID: id, State: Registering, LastSeen: now}
	case w.State == Dead || w.State == Left:
		w.State, w.LastSeen, w.DisconnectedAt = Returning, now, time.Time{}
	default:
		w.LastSeen = now
	}
}

// RegisterFailed undoes RegisterBegin when the registration did not commit: a registering
// worker is forgotten, a returning one is dead again (it registers again; until then its
// heartbeats are refused), so no worker is left in a state without a deadline.
func (m *Machine) RegisterFailed(id base.WorkerID) {
	switch w := m.workers[id]; {
	case w == nil:
	case w.State == Registering:
		delete(m.workers, id)
	case w.State == Returning && !w.LeftAt.IsZero():
		w.State = Left
	case w.State == Returning:
		w.State = Dead
	}
}

// Registration is what Registered tells the driver's reconciliation of the worker's
// inventory.
type Registration struct {
	// Prev is the worker's previous registration with this leader (zero: none): objects
	// created before it are settled (the inventory must list them).
	Prev time.Time
	// InGrace: the registration was received within the leader's grace (inLeaderGrace), so
	// objects the metadata does not list may be the previous leader's puts in flight.
	InGrace bool
}

// Registered ends a registration received at recv (page 0's arrival when paged) with its
// capacities: the worker is alive (or draining) with a full deadline from now, its restart
// grace ends (reported, WorkerBack, when it had announced a restart), and drops and resync
// requests are cleared (its reconciliation supersedes them).
func (m *Machine) Registered(now, recv time.Time, id base.WorkerID, dramCap, nvmeCap int64) (Registration, []Effect) {
	w := m.workers[id]
	if w == nil {
		w = &Worker{ID: id}
		m.workers[id] = w
	}
	var out []Effect
	if !w.LeavingAt.IsZero() {
		out = append(out, WorkerBack{ID: id, Away: recv.Sub(w.LeavingAt)})
	}
	reg := Registration{Prev: w.LastRegister, InGrace: m.inLeaderGrace(recv)}
	w.State = Alive
	if w.Draining {
		w.State = Draining
	}
	w.LastSeen, w.LeavingAt, w.LastRegister, w.DisconnectedAt, w.LeftAt = now, time.Time{}, recv, time.Time{}, time.Time{}
	w.drops, w.resync, w.resyncAfter = nil, false, time.Time{}
	w.Usage.DRAMCapacity, w.Usage.NVMeCapacity = dramCap, nvmeCap
	return reg, out
}

// Reconciled ends the reconciliation of worker id's registration: overflow are drops that
// did not fit the registration's reply (owed through heartbeats); deferred counts replicas
// the worker did not report that may have been created after its inventory snapshot, spared
// the objects it reported that the metadata does not list but that may be puts in flight of
// the previous leader (the reconciliation's grace). The worker is asked to register again:
// at its next heartbeat when any replica was deferred (its next snapshot settles them), else
// once the leader's grace has passed when any object was spared.
func (m *Machine) Reconciled(id base.WorkerID, overflow []base.KeyVersion, deferred, spared int) {
	for _, kv := range overflow {
		m.QueueDrop(id, kv.Key, kv.Version)
	}
	switch {
	case deferred > 0:
		m.resync(id, time.Time{})
	case spared > 0:
		m.resync(id, m.leaderSince.Add(m.cfg.PutTimeout))
	}
}

// resync asks the worker to register again at its next heartbeat, or once after has passed
// when after is not zero.
func (m *Machine) resync(id base.WorkerID, after time.Time) {
	if w := m.workers[id]; w != nil {
		if after.IsZero() {
			w.resync = true
		} else {
			w.resyncAfter = after
		}
	}
}

// QueueDrop owes worker id a drop of key at version (sent in heartbeat replies). Past
// MaxQueuedDrops the queue is cleared and the worker asked to re-register instead.
func (m *Machine) QueueDrop(id base.WorkerID, key string, v base.Version) {
	w := m.workers[id]
	if w == nil || w.resync {
		return // unknown: its registration reconciles; resync: the re-registration will find it
	}
	if len(w.drops) >= m.cfg.MaxQueuedDrops {
		w.drops, w.resync = nil, true
		return
	}
	w.drops = append(w.drops, base.KeyVersion{Key: key, Version: v})
}

// Placeable reports whether new puts may go to worker id: it is alive or suspect (not
// registering, leaving, unreachable, left, dead, returning or draining), with state this
// leadership knows.
func (m *Machine) Placeable(id base.WorkerID) bool {
	w := m.workers[id]
	return w != nil && (w.State == Alive || w.State == Suspect)
}

// reserve adds n reserved bytes to worker id (negative n releases them).
func (m *Machine) reserve(id base.WorkerID, n int64) {
	if w := m.workers[id]; w != nil {
		w.Reserved += n
	}
}

// Worker returns a copy of worker id's view.
func (m *Machine) Worker(id base.WorkerID) (Worker, bool) {
	w := m.workers[id]
	if w == nil {
		return Worker{}, false
	}
	c := *w
	c.drops = nil
	return c, true
}

// Workers returns copies of every known worker, sorted by id.
func (m *Machine) Workers() []Worker {
	out := make([]Worker, 0, len(m.workers))
	for _, id := range m.sortedIDs() {
		w, _ := m.Worker(id)
		out = append(out, w)
	}
	return out
}

// DropsOwed returns how many drops worker id is owed.
func (m *Machine) DropsOwed(id base.WorkerID) int {
	if w := m.workers[id]; w != nil {
		return len(w.drops)
	}
	return 0
}

func (m *Machine) sortedIDs() []base.WorkerID {
	ids := make([]base.WorkerID, 0, len(m.workers))
	for id := range m.workers {
		ids = append(ids, id)
	}
	slices.SortFunc(ids, func(a, b base.WorkerID) int { return strings.Compare(string(a), string(b)) })
	return ids
}
