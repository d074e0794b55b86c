package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"regexp"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/raft"

	"github.com/mooncake-go/mooncake/internal/base"
	"github.com/mooncake-go/mooncake/raftmeta"
	"github.com/mooncake-go/mooncake/transfer"
)

// Bounds of the leader's soft state. Each is a memory bound, not a tuning knob.
const (
	// maxDropsPerHeartbeat bounds the drop list in one heartbeat reply; the rest waits for
	// the next beat (a worker heartbeats every second).
	maxDropsPerHeartbeat = 4096
	// maxQueuedDrops bounds the drops queued for one worker. Past it the queue is cleared and
	// the worker is asked to re-register: its inventory reconciliation finds every orphan.
	maxQueuedDrops = 1 << 20
	// registerSessionTTL drops a paged registration whose next page has not arrived within it
	// (a worker that died or gave up mid-way); the worker starts over from page 0.
	registerSessionTTL = 2 * time.Minute
	// maxRegisterReplyDrops and maxRegisterReplyDropBytes bound the drop list of one
	// registration reply (about 5 MiB with 64-byte keys; the byte bound rules with long keys)
	// so the reply always fits the body limit. The rest is queued for the worker's heartbeats
	// (queueDropLocked; past maxQueuedDrops the worker is asked to register again).
	maxRegisterReplyDrops     = 1 << 16
	maxRegisterReplyDropBytes = 16 << 20
	// reconcileLockBatch is how many inventory entries registration's reconciliation checks
	// per hold of m.mu.
	reconcileLockBatch = 4096
	// registerObjectOverhead estimates the leader's heap per accumulated inventory entry
	// beyond its key bytes (base.ObjectMeta is 40 bytes: string header, version, size,
	// checksum), for the byte bounds of registerLimits.
	registerObjectOverhead = 48
	// maxReservations bounds puts in flight (PutStart without PutEnd) on the leader.
	maxReservations = 1 << 20
	// applyTimeout bounds one raft commit made by the leader's own loops.
	applyTimeout = 10 * time.Second
	// registerMasterTimeout bounds a follower's RegisterMaster call to the leader (one per
	// leader-loop tick until its address is in the masters table).
	registerMasterTimeout = 2 * time.Second
)

// Master is one master: a raftmeta.Node holding the metadata, a transfer server answering
// the master calls, the leader's soft state (reservations, worker liveness and usage, drops
// owed to workers), and the admin HTTP server.
type Master struct {
	cfg  MasterConfig
	log  *slog.Logger
	node *raftmeta.Node
	rpc  rpcServer
	adm  *adminServer
	met  *masterMetrics
	// cli calls the leader from a follower (RegisterMaster; used only by the leader loop) and
	// workers for memory reports (memory_master.go); closed by Shutdown after the loop stopped.
	cli *transfer.Client
	// regRefusedBy is the RPC address of a leader that refused RegisterMaster with
	// INVALID_PARAMS (one that predates the call closes the connection and logs a warning
	// each time): registerSelf does not call it again until another master leads. Leader
	// loop only.
	regRefusedBy string

	// now is the clock; time.Now except in tests.
	now func() time.Time

	// mu guards the leader's soft state below. Lock order: mu is never held across a raft
	// Apply or an RPC; callers copy what they need, unlock, then apply.
	mu struct {
		sync.Mutex
		// leader is true while this node leads and its soft state is valid.
		leader bool
		// leaderSince is when this node last became leader (zero when it is not).
		leaderSince time.Time
		// workers: soft state of every worker that registered or heartbeated during this
		// leadership, by id.
		workers map[base.WorkerID]*workerSoft
		// reservations: puts between PutStart and PutEnd, by key.
		// Invariant: every reservation's bytes are counted in its workers' reserved.
		reservations map[string]*reservation
		// rng draws placements.
		rng *rand.Rand
		// regSessions: paged registrations in progress (pages received, final page not yet),
		// by worker id; at most one per worker (a new session replaces the old one).
		// Invariant: regBytes is the sum of the sessions' bytes.
		regSessions map[base.WorkerID]*regSession
		regBytes    int64
	}
	// regLimits bounds regSessions; fixed at NewMaster.
	regLimits registerLimits
	// regPages counts the pages of paged registrations this master accepted (tests read it).
	regPages atomic.Int64

	stop     chan struct{} // closed by Shutdown: stops the leader loop
	loopDone chan struct{} // closed when the leader loop returns
	shutOnce sync.Once
	shutErr  error
}

// workerSoft is the leader's view of one worker between raft commits.
type workerSoft struct {
	lastSeen time.Time
	usage    WorkerUsage
	// reserved bytes handed out by PutStart and not yet ended.
	reserved int64
	// drops owed to the worker, sent in heartbeat replies.
	drops []raftmeta.KeyVersion
	// resync asks the worker to re-register with its full inventory (drop queue overflowed,
	// new leader, unsettled reconciliation).
	resync bool
	// resyncAfter asks for a re-registration once this time has passed (zero: none).
	resyncAfter time.Time
	// lastRegister is when this leader received the worker's last registration.
	lastRegister time.Time
	// leavingAt is when the worker announced a graceful shutdown (a heartbeat with Leaving);
	// zero otherwise. It extends the worker's silence allowance to WorkerRestartGrace (see
	// silenceDeadline) and keeps new puts off the worker; its next registration clears it.
	leavingAt time.Time
}

// regSession is one paged registration in progress on the leader (leader soft state: a new
// leader knows none, and the worker starts over). See registerPage.
type regSession struct {
	id uint64
	// next is the page number expected next. Invariant: next == len(pages).
	next uint32
	// began is when page 0 arrived: the registration's reconciliation counts from it (see
	// registerWorker: objects created after it are never taken as lost).
	began time.Time
	// last is when the latest page arrived; the session expires registerSessionTTL after it.
	last time.Time
	// pages are the inventory pages received so far, as decoded (no copy is made).
	pages [][]base.ObjectMeta
	// objects and bytes count the entries in pages and their estimated heap.
	objects int
	bytes   int64
}

// registerLimits bound the inventory a leader accumulates from paged registrations. Past
// a bound the page is refused and the session dropped; the defaults are far above a real
// worker (a million objects with 64-byte keys is about 110 MiB) and exist so that a buggy or
// hostile sender cannot exhaust the leader's memory.
type registerLimits struct {
	// perWorkerObjects bounds one session's objects. Default 1<<26 (67 million).
	perWorkerObjects int
	// perWorkerBytes bounds one session's estimated heap. Default 8 GiB.
	perWorkerBytes int64
	// totalBytes bounds every session's estimated heap together. Default 16 GiB.
	totalBytes int64
}

func defaultRegisterLimits() registerLimits {
	return registerLimits{perWorkerObjects: 1 << 26, perWorkerBytes: 8 << 30, totalBytes: 16 << 30}
}

// inventoryBytes is the leader's estimated heap for inv (registerObjectOverhead per entry).
func inventoryBytes(inv []base.ObjectMeta) int64 {
	n := int64(len(inv)) * registerObjectOverhead
	for i := range inv {
		n += int64(len(inv[i].Key))
	}
	return n
}

// silenceDeadline is when the leader marks ws dead if it hears nothing more: ClientTTL after
// its last message, or, when the worker announced that it is leaving to restart,
// WorkerRestartGrace after that announcement if that is later. REQUIRES: m.mu.
func (m *Master) silenceDeadlineLocked(ws *workerSoft) time.Time {
	d := ws.lastSeen.Add(m.cfg.ClientTTL)
	if !ws.leavingAt.IsZero() {
		if g := ws.leavingAt.Add(m.cfg.WorkerRestartGrace); g.After(d) {
			d = g
		}
	}
	return d
}

// WorkerUsage is a worker's usage per tier: bytes used and objects from each heartbeat
// (DRAMUsed is the arena's bytes in use; an object with a copy in both tiers counts in both
// DRAMObjects and NVMeObjects), capacities from its registration.
type WorkerUsage struct {
	DRAMUsed, DRAMCapacity int64
	DRAMObjects            int64
	NVMeUsed, NVMeCapacity int64
	NVMeObjects            int64
}

// reservation is one put between PutStart and PutEnd: leader soft state, never committed.
type reservation struct {
	version  base.Version
	size     int64
	workers  []base.WorkerID
	deadline time.Time
	upsert   bool
}

// leaderGrace is how long after winning an election the leader waits for PutEnds of puts the
// previous leader started: it cannot know them, so it accepts a PutEnd without a reservation
// within this window (the record names active workers and raftmeta checks them).
func (m *Master) leaderGraceLocked(now time.Time) bool {
	return m.mu.leader && now.Sub(m.mu.leaderSince) < m.cfg.PutTimeout
}

// Replica names one worker holding a replica and where to reach it.
type Replica struct {
	WorkerID base.WorkerID
	Address  string
}

// PutStartArgs is one PutStart request.
type PutStartArgs struct {
	Key             string
	Size            int64
	Replicas        int // default 1
	PreferredWorker base.WorkerID
	Upsert          bool
}

// PutStartReply is the placement of one put.
type PutStartReply struct {
	Version  base.Version
	Replicas []Replica
}

// ensureLeader reports whether this node leads, and if so makes sure the leader soft state is
// set up: the leader loop does it when LeaderCh fires, but a call may arrive first.
func (m *Master) ensureLeader() bool {
	if !m.node.IsLeader() {
		return false
	}
	m.setLeader(true)
	return true
}

// notLeader returns the NOT_LEADER error naming the current leader.
func (m *Master) notLeader() error {
	id, addr := m.node.Leader()
	return &raftmeta.NotLeaderError{LeaderID: id, LeaderRPCAddr: addr}
}

func (m *Master) validateObject(key string, size int64) error {
	if err := base.ValidateKey(key); err != nil {
		return err
	}
	if size <= 0 {
		return fmt.Errorf("%w: size %d: a value must be at least 1 byte", base.ErrInvalidParams, size)
	}
	if size > m.cfg.MaxValueSize {
		return fmt.Errorf("%w: value of %s is over the limit of %s", base.ErrTooLarge, base.Bytes(size), base.Bytes(m.cfg.MaxValueSize))
	}
	return nil
}

// putStart validates and places one put and reserves its bytes. Leader only.
func (m *Master) putStart(a PutStartArgs) (PutStartReply, error) {
	if err := m.validateObject(a.Key, a.Size); err != nil {
		return PutStartReply{}, err
	}
	if a.Replicas == 0 {
		a.Replicas = 1
	}
	if a.Replicas < 0 || a.Replicas > raftmeta.MaxReplicas {
		return PutStartReply{}, fmt.Errorf("%w: replica count %d: want 1 to %d", base.ErrInvalidParams, a.Replicas, raftmeta.MaxReplicas)
	}
	if !m.ensureLeader() {
		return PutStartReply{}, m.notLeader()
	}
	if !a.Upsert {
		if _, ok := m.node.Lookup(a.Key); ok {
			return PutStartReply{}, fmt.Errorf("%w: key %q", base.ErrObjectAlreadyExists, a.Key)
		}
	}
	version, err := m.node.NewVersion()
	if err != nil {
		return PutStartReply{}, err
	}
	segs := m.activeSegments()
	now := m.now()

	m.mu.Lock()
	defer m.mu.Unlock()
	if !m.mu.leader {
		return PutStartReply{}, fmt.Errorf("%w: leadership is starting, retry", base.ErrUnavailable)
	}
	if old, ok := m.mu.reservations[a.Key]; ok {
		if !a.Upsert && now.Before(old.deadline) {
			return PutStartReply{}, fmt.Errorf("%w: key %q: a put of this key is in progress", base.ErrObjectAlreadyExists, a.Key)
		}
		// An upsert (or any put after the old one timed out) supersedes the put in flight:
		// its workers drop what they got.
		m.dropReservationLocked(a.Key, old)
	}
	if len(m.mu.reservations) >= maxReservations {
		return PutStartReply{}, fmt.Errorf("%w: %d puts in flight", base.ErrUnavailable, len(m.mu.reservations))
	}
	cands := make([]placementCandidate, 0, len(segs))
	addr := map[base.WorkerID]string{}
	for _, s := range segs {
		ws := m.mu.workers[s.ID]
		if ws == nil {
			continue // not heard from during this leadership: not known to be alive
		}
		if !ws.leavingAt.IsZero() {
			continue // shutting down to restart: it refuses writes until it registers again
		}
		used := ws.usage.DRAMUsed
		free := s.DRAMCapacity - used - ws.reserved
		// Over the high watermark: the worker is evicting; weigh it as full.
		if s.DRAMCapacity > 0 && float64(used+ws.reserved) > m.cfg.EvictionHighWatermarkRatio*float64(s.DRAMCapacity) {
			free = 0
		}
		cands = append(cands, placementCandidate{ID: s.ID, Capacity: s.DRAMCapacity, Free: free})
		addr[s.ID] = s.Address
	}
	ids, err := place(cands, a.Replicas, a.Size, a.PreferredWorker, m.mu.rng)
	if err != nil {
		return PutStartReply{}, err
	}
	r := &reservation{version: version, size: a.Size, workers: ids, deadline: now.Add(m.cfg.PutTimeout), upsert: a.Upsert}
	m.mu.reservations[a.Key] = r
	reply := PutStartReply{Version: version, Replicas: make([]Replica, len(ids))}
	for i, id := range ids {
		m.mu.workers[id].reserved += a.Size
		reply.Replicas[i] = Replica{WorkerID: id, Address: addr[id]}
	}
	return reply, nil
}

// dropReservationLocked forgets r and owes its workers a drop of what they received.
// REQUIRES: m.mu.
func (m *Master) dropReservationLocked(key string, r *reservation) {
	m.releaseReservationLocked(key, r)
	for _, id := range r.workers {
		if ws := m.mu.workers[id]; ws != nil {
			m.queueDropLocked(ws, key, r.version)
		}
	}
}

// releaseReservationLocked forgets r after its PutEnd (the bytes are now the object's).
// REQUIRES: m.mu.
func (m *Master) releaseReservationLocked(key string, r *reservation) {
	if cur, ok := m.mu.reservations[key]; ok && cur == r {
		delete(m.mu.reservations, key)
	}
	for _, id := range r.workers {
		if ws := m.mu.workers[id]; ws != nil {
			ws.reserved -= r.size
		}
	}
}

// queueDropLocked owes ws a drop of key at version. REQUIRES: m.mu.
func (m *Master) queueDropLocked(ws *workerSoft, key string, v base.Version) {
	if ws.resync {
		return // the re-registration will find it
	}
	if len(ws.drops) >= maxQueuedDrops {
		ws.drops, ws.resync = nil, true
		return
	}
	ws.drops = append(ws.drops, raftmeta.KeyVersion{Key: key, Version: v})
}

// queueDrops owes each worker holding o a drop of o's version.
func (m *Master) queueDrops(objs []raftmeta.Object) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, o := range objs {
		for _, id := range o.Replicas {
			if ws := m.mu.workers[id]; ws != nil {
				m.queueDropLocked(ws, o.Key, o.Version)
			}
		}
	}
}

// activeSegments returns the registered workers in SegmentActive.
func (m *Master) activeSegments() []raftmeta.Segment {
	segs := m.node.Segments()
	out := segs[:0]
	for _, s := range segs {
		if s.State == raftmeta.SegmentActive {
			out = append(out, s)
		}
	}
	return out
}

// PutEndItem is one object of a PutEnd: the placement's version and the replicas written.
type PutEndItem struct {
	Key      string
	Version  base.Version
	Size     int64
	Checksum uint64
	// Replicas the client wrote; empty means every placed replica.
	Replicas     []base.WorkerID
	SoftPinUntil time.Time
	HardPin      bool
	// Tokens and Model: the KV-cache tokens the object holds (memory.go).
	Tokens int64
	Model  string
}

// putEnd commits the objects of items in ONE raft entry. It returns one error per item.
func (m *Master) putEnd(ctx context.Context, items []PutEndItem, upsert bool) ([]error, error) {
	if !m.ensureLeader() {
		return nil, m.notLeader()
	}
	errs := make([]error, len(items))
	cmd := raftmeta.PutEnd{Upsert: upsert, Items: make([]raftmeta.PutItem, 0, len(items))}
	idx := make([]int, 0, len(items)) // cmd item -> items index
	resv := make([]*reservation, len(items))
	now := m.now()
	m.mu.Lock()
	for i, it := range items {
		if err := m.validateObject(it.Key, it.Size); err != nil {
			errs[i] = err
			continue
		}
		r := m.mu.reservations[it.Key]
		replicas := it.Replicas
		switch {
		case r != nil && r.version == it.Version:
			if it.Size != r.size {
				errs[i] = fmt.Errorf("%w: key %q: PutEnd size %d differs from PutStart size %d", base.ErrInvalidParams, it.Key, it.Size, r.size)
				continue
			}
			if len(replicas) == 0 {
				replicas = r.workers
			}
			for _, w := range replicas {
				if !slices.Contains(r.workers, w) {
					errs[i] = fmt.Errorf("%w: key %q: worker %s was not placed for this put", base.ErrInvalidParams, it.Key, w)
					break
				}
			}
			if errs[i] != nil {
				continue
			}
			resv[i] = r
			if len(items) == 1 && r.upsert {
				// One raft entry has one Upsert flag: a single PutEnd inherits its PutStart's.
				// In a batch each item's flag is the PutEnd's (the handler splits batches by it).
				upsert = true
			}
		case m.leaderGraceLocked(now) && len(replicas) > 0:
			// A put the previous leader started (see leaderGraceLocked).
		case m.alreadyCommitted(it):
			// A retried PutEnd whose first attempt committed (the reply was lost): success.
			continue
		default:
			errs[i] = fmt.Errorf("%w: key %q version %d: no put in progress (it timed out after %v, was revoked or superseded)",
				base.ErrInvalidVersion, it.Key, it.Version, m.cfg.PutTimeout)
			continue
		}
		var soft int64
		if !it.SoftPinUntil.IsZero() {
			soft = it.SoftPinUntil.UnixNano()
		}
		cmd.Items = append(cmd.Items, raftmeta.PutItem{Key: it.Key, Size: it.Size, Version: it.Version, Checksum: it.Checksum,
			Replicas: replicas, SoftPinUntil: soft, HardPin: it.HardPin, Tokens: it.Tokens, Model: it.Model})
		idx = append(idx, i)
	}
	m.mu.Unlock()
	cmd.Upsert = upsert
	if len(cmd.Items) == 0 {
		return errs, nil
	}
	// An upsert replaces the stored version: its replicas are owed a drop once the new record
	// commits (a worker that holds both replaced the old one at Commit; the drop is a no-op).
	var replaced []raftmeta.Object
	if upsert {
		for _, it := range cmd.Items {
			if o, ok := m.node.Lookup(it.Key); ok && o.Version != it.Version {
				replaced = append(replaced, o)
			}
		}
	}
	res, err := m.node.Apply(ctx, cmd)
	if err != nil {
		// Outcome unknown or not proposed: keep the reservations; the client may retry.
		return nil, err
	}
	if len(replaced) > 0 {
		m.queueDropsCommitted(replaced)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	for j, i := range idx {
		var itemErr error
		if res.Items != nil {
			itemErr = res.Items[j]
		} else if len(idx) == 1 {
			itemErr = res.Err
		}
		errs[i] = itemErr
		r := resv[i]
		if r == nil {
			continue
		}
		if itemErr == nil {
			m.releaseReservationLocked(items[i].Key, r)
		} else {
			// Refused for good (duplicate, workers gone): the bytes are nobody's.
			m.dropReservationLocked(items[i].Key, r)
		}
	}
	return errs, nil
}

// alreadyCommitted reports whether the metadata holds the item's key at its version and checksum.
func (m *Master) alreadyCommitted(it PutEndItem) bool {
	o, ok := m.node.Lookup(it.Key)
	return ok && o.Version == it.Version && o.Checksum == it.Checksum && o.Size == it.Size
}

// putRevoke drops the reservation of key at version (all workers drop the pending bytes).
// Revoking a put that is not in flight is not an error: the worker timeout cleans up anyway.
func (m *Master) putRevoke(key string, version base.Version) error {
	if err := base.ValidateKey(key); err != nil {
		return err
	}
	if !m.ensureLeader() {
		return m.notLeader()
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if r, ok := m.mu.reservations[key]; ok && (version == 0 || r.version == version) {
		m.dropReservationLocked(key, r)
	}
	return nil
}

// LookupReply is one object's metadata and replicas.
type LookupReply struct {
	Version  base.Version
	Size     int64
	Checksum uint64
	Replicas []Replica
}

// readCheck makes a read linearizable on the leader, allows a stale read on a follower when
// the caller accepts it, and redirects otherwise.
func (m *Master) readCheck(ctx context.Context, allowStale bool) error {
	if m.node.IsLeader() {
		if err := m.node.VerifyLeader(ctx); err != nil {
			if allowStale && !errors.Is(err, base.ErrClosed) {
				return nil
			}
			return err
		}
		return nil
	}
	if allowStale {
		return nil
	}
	return m.notLeader()
}

// lookupLocal resolves keys from the local FSM (after readCheck).
func (m *Master) lookupLocal(keys []string) ([]LookupReply, []error) {
	addrs := map[base.WorkerID]string{}
	for _, s := range m.node.Segments() {
		if s.State == raftmeta.SegmentActive {
			addrs[s.ID] = s.Address
		}
	}
	out := make([]LookupReply, len(keys))
	errs := make([]error, len(keys))
	for i, k := range keys {
		if err := base.ValidateKey(k); err != nil {
			errs[i] = err
			continue
		}
		o, ok := m.node.Lookup(k)
		if !ok {
			errs[i] = fmt.Errorf("%w: key %q", base.ErrObjectNotFound, k)
			continue
		}
		r := LookupReply{Version: o.Version, Size: o.Size, Checksum: o.Checksum}
		for _, id := range o.Replicas {
			if a, ok := addrs[id]; ok {
				r.Replicas = append(r.Replicas, Replica{WorkerID: id, Address: a})
			}
		}
		if len(r.Replicas) == 0 {
			errs[i] = fmt.Errorf("%w: key %q: no replica on an active worker", base.ErrObjectNotFound, k)
			continue
		}
		out[i] = r
	}
	return out, errs
}

// remove removes keys in one raft commit and owes their workers the drops.
func (m *Master) remove(ctx context.Context, keys []string) ([]error, error) {
	if !m.ensureLeader() {
		return nil, m.notLeader()
	}
	errs := make([]error, len(keys))
	var valid []string
	var idx []int
	var objs []raftmeta.Object
	for i, k := range keys {
		if err := base.ValidateKey(k); err != nil {
			errs[i] = err
			continue
		}
		if o, ok := m.node.Lookup(k); ok {
			objs = append(objs, o)
		}
		valid = append(valid, k)
		idx = append(idx, i)
	}
	if len(valid) == 0 {
		return errs, nil
	}
	res, err := m.node.Apply(ctx, raftmeta.Remove{Keys: valid})
	if err != nil {
		return nil, err
	}
	for j, i := range idx {
		if res.Items != nil {
			errs[i] = res.Items[j]
		} else if len(idx) == 1 {
			errs[i] = res.Err
		}
	}
	m.queueDropsCommitted(objs)
	return errs, nil
}

// queueDropsCommitted queues drops of objs, except those whose key now holds the same version
// (a remove that failed for that item keeps the object).
func (m *Master) queueDropsCommitted(objs []raftmeta.Object) {
	gone := objs[:0]
	for _, o := range objs {
		if cur, ok := m.node.Lookup(o.Key); ok && cur.Version == o.Version {
			continue
		}
		gone = append(gone, o)
	}
	m.queueDrops(gone)
}

// removeByRegex removes every key matching pattern in one raft commit.
func (m *Master) removeByRegex(ctx context.Context, pattern string) (int, error) {
	re, err := regexp.Compile(pattern)
	if err != nil {
		return 0, fmt.Errorf("%w: regex %q: %v", base.ErrInvalidParams, pattern, err)
	}
	return m.removeMatching(ctx, raftmeta.RemoveRegex{Pattern: pattern}, re.MatchString)
}

// removeAll removes every object in one raft commit.
func (m *Master) removeAll(ctx context.Context) (int, error) {
	return m.removeMatching(ctx, raftmeta.RemoveAll{}, func(string) bool { return true })
}

// removeMatching commits cmd, a removal of every key match accepts, and owes the workers of
// the objects it removed their drops. It returns how many objects the commit removed.
func (m *Master) removeMatching(ctx context.Context, cmd raftmeta.Command, match func(key string) bool) (int, error) {
	if !m.ensureLeader() {
		return 0, m.notLeader()
	}
	// NB: objects put between this scan and the commit are removed from the metadata without a
	// drop owed to their workers; the bytes stay until the worker re-registers (reconciliation)
	// or is restarted. The window is one raft round trip.
	var objs []raftmeta.Object
	m.node.Range("", func(o raftmeta.Object) bool {
		if match(o.Key) {
			objs = append(objs, o)
		}
		return true
	})
	res, err := m.node.Apply(ctx, cmd)
	if err != nil {
		return 0, err
	}
	if res.Err != nil {
		return 0, res.Err
	}
	m.queueDropsCommitted(objs)
	return res.Removed, nil
}

// ListEntry is one key of a List reply.
type ListEntry struct {
	Key  string
	Size int64
}

// maxListLimit bounds one List page.
const maxListLimit = 10000

// list returns up to limit keys with prefix, in key order, after cursor (exclusive), and the
// cursor of the next page ("" when done). raftmeta's List keeps only the page (one more key
// tells whether another page follows): O(limit) memory, where a Range would sort every key
// under prefix for each page.
func (m *Master) list(prefix, cursor string, limit int) ([]ListEntry, string) {
	if limit <= 0 || limit > maxListLimit {
		limit = maxListLimit
	}
	objs := m.node.List(prefix, cursor, limit+1)
	next := ""
	if len(objs) > limit {
		objs = objs[:limit]
		next = objs[limit-1].Key
	}
	out := make([]ListEntry, len(objs))
	for i, o := range objs {
		out[i] = ListEntry{Key: o.Key, Size: o.Size}
	}
	return out, next
}

// RegisterArgs is one worker registration.
type RegisterArgs struct {
	WorkerID     base.WorkerID
	Address      string
	ClusterID    string
	DRAMCapacity int64
	NVMeCapacity int64
	Inventory    []base.ObjectMeta

	// earlier are the inventory pages received before Inventory (the final page) of a paged
	// registration; nil for a whole one. began is when its page 0 arrived (zero: now).
	earlier [][]base.ObjectMeta
	began   time.Time
}

// pages returns every inventory page of a: the earlier ones, then Inventory.
func (a *RegisterArgs) pages() [][]base.ObjectMeta {
	return append(a.earlier[:len(a.earlier):len(a.earlier)], a.Inventory)
}

// lostGrace bounds how long a registration may take from the worker's inventory snapshot to
// its reconciliation on the leader (registerTimeout on the worker side). See registerWorker.
const lostGrace = registerTimeout

// registerWorker commits the worker's segment and reconciles its inventory against the
// metadata. It returns the objects the worker holds that the master does not know: the worker
// drops them.
//
// Reconciliation (the master's raft state is the source of truth):
//   - an object the worker reports that the metadata lists on it at that version stays;
//   - a replica the metadata lists on this worker that the worker did not report (or reported
//     at another version) is dropped through DropReplicas commits, if the object was created
//     before this worker's previous registration at this leader, or more than lostGrace ago.
//     A younger one may have been written after the worker took its inventory snapshot (the
//     snapshot races with puts); it is left alone and the worker is asked to register again,
//     which settles it: that second snapshot is taken after the object was created.
//   - an object the worker reports that the metadata does not list on it is dropped by the
//     worker, unless it is a put in flight to this worker (a reservation at that version, or
//     an object committed since the metadata was scanned), or this leader is younger than
//     PutTimeout (the previous leader's puts in flight are unknown to it: the worker is asked
//     to register again once that window has passed). We never adopt unknown objects: the key
//     may have been removed while the worker was away, and adopting would resurrect it.
//
// A paged registration (registerPage) runs this at its final page over every page, with the
// receipt time of page 0 standing for the registration's: the worker took its inventory
// snapshot before sending page 0, so an object created after page 0 arrived is never taken
// as lost (it is deferred), whatever time the later pages took.
func (m *Master) registerWorker(ctx context.Context, a RegisterArgs) ([]raftmeta.KeyVersion, error) {
	if err := m.checkRegistration(a); err != nil {
		return nil, err
	}
	recv := m.now()
	if !a.began.IsZero() {
		recv = a.began
	}
	pages := a.pages()
	ninv := 0
	for _, p := range pages {
		ninv += len(p)
	}
	res, err := m.node.Apply(ctx, raftmeta.RegisterWorker{ID: a.WorkerID, Address: a.Address, DRAMCapacity: a.DRAMCapacity, NVMeCapacity: a.NVMeCapacity})
	if err != nil {
		return nil, err
	}
	if res.Err != nil {
		return nil, res.Err
	}
	// The worker is alive from now on: heartbeats start the TTL clock.
	m.mu.Lock()
	ws := m.mu.workers[a.WorkerID]
	if ws == nil {
		ws = &workerSoft{}
		m.mu.workers[a.WorkerID] = ws
	}
	prev := ws.lastRegister
	ws.lastSeen = m.now() // not page 0's arrival (recv, when paged): the worker is alive now
	if !ws.leavingAt.IsZero() {
		m.log.Info("worker back after a graceful shutdown; its restart grace ends", "worker", a.WorkerID,
			"away", recv.Sub(ws.leavingAt))
		ws.leavingAt = time.Time{}
	}
	ws.drops, ws.resync, ws.resyncAfter = nil, false, time.Time{} // the reconciliation below supersedes them
	ws.usage.DRAMCapacity, ws.usage.NVMeCapacity = a.DRAMCapacity, a.NVMeCapacity
	inGrace := m.leaderGraceLocked(recv)
	leaderSince := m.mu.leaderSince
	m.mu.Unlock()

	have := make(map[string]base.Version, ninv)
	for _, p := range pages {
		for _, o := range p {
			have[o.Key] = o.Version
		}
	}
	settled := recv.Add(-lostGrace).UnixNano()
	if !prev.IsZero() {
		settled = max(settled, prev.UnixNano())
	}
	var lost []raftmeta.KeyVersion
	deferred, kept := 0, 0
	// A kept object's key leaves have: every inventory key is in have until then, so below
	// "not in have" means kept (no second map of up to millions of keys).
	m.node.Range("", func(o raftmeta.Object) bool {
		if !slices.Contains(o.Replicas, a.WorkerID) {
			return true
		}
		switch v, ok := have[o.Key]; {
		case ok && v == o.Version:
			delete(have, o.Key)
			kept++
		case o.Created < settled:
			lost = append(lost, raftmeta.KeyVersion{Key: o.Key, Version: o.Version})
		default:
			deferred++
		}
		return true
	})
	nlost := len(lost)
	for len(lost) > 0 {
		n := min(len(lost), raftmeta.MaxBatch)
		if _, err := m.node.Apply(ctx, raftmeta.DropReplicas{Worker: a.WorkerID, Items: lost[:n]}); err != nil {
			return nil, err
		}
		lost = lost[n:]
	}
	var drop []raftmeta.KeyVersion
	spared := 0
	m.mu.Lock()
	for _, p := range pages {
		for i, o := range p {
			if i%reconcileLockBatch == reconcileLockBatch-1 {
				// Let puts and heartbeats in: each entry's check below needs m.mu only for
				// itself (its reservation, then the FSM), so a million entries need not hold
				// the lock for the whole scan.
				m.mu.Unlock()
				m.mu.Lock()
			}
			if _, ok := have[o.Key]; !ok {
				continue // kept
			}
			if r := m.mu.reservations[o.Key]; r != nil && r.version == o.Version && slices.Contains(r.workers, a.WorkerID) {
				continue
			}
			// NB: PutEnd commits before it releases the reservation, so an object whose
			// reservation is gone is in the FSM by now if its put succeeded.
			if cur, ok := m.node.Lookup(o.Key); ok && cur.Version == o.Version && slices.Contains(cur.Replicas, a.WorkerID) {
				continue
			}
			// In a new leader's grace, spare unknown objects that may be puts the previous
			// leader started, but not copies older than the version the metadata holds for the
			// key (an in-flight put always has a newer version: versions grow across terms).
			if inGrace {
				if cur, ok := m.node.Lookup(o.Key); !ok || cur.Version < o.Version {
					spared++
					continue
				}
			}
			drop = append(drop, raftmeta.KeyVersion{Key: o.Key, Version: o.Version})
		}
	}
	// The reply must fit one body: the drops past its bound are owed through heartbeats.
	ndrop := len(drop)
	if cut := replyDropCut(drop); cut < len(drop) {
		for _, kv := range drop[cut:] {
			m.queueDropLocked(ws, kv.Key, kv.Version)
		}
		drop = drop[:cut]
	}
	ws.lastRegister = recv
	switch {
	case deferred > 0:
		ws.resync = true
	case spared > 0:
		ws.resyncAfter = leaderSince.Add(m.cfg.PutTimeout)
	}
	m.mu.Unlock()
	m.log.Info("worker registered", "worker", a.WorkerID, "address", a.Address,
		"dram_capacity", base.Bytes(a.DRAMCapacity).String(), "nvme_capacity", base.Bytes(a.NVMeCapacity).String(),
		"inventory", ninv, "pages", len(pages), "kept", kept, "replicas_lost", nlost, "lost_unsettled", deferred,
		"dropped_unknown", ndrop, "drops_queued", ndrop-len(drop), "unknown_spared", spared)
	return drop, nil
}

// checkRegistration refuses a registration (or one page of it) with a bad worker id, from
// another cluster, or sent to a master that does not lead.
func (m *Master) checkRegistration(a RegisterArgs) error {
	if err := base.ValidateWorkerID(a.WorkerID); err != nil {
		return err
	}
	if a.ClusterID != "" && a.ClusterID != m.cfg.ClusterID {
		return fmt.Errorf("%w: worker %s is in cluster %q, this master in %q", base.ErrClusterMismatch, a.WorkerID, a.ClusterID, m.cfg.ClusterID)
	}
	if !m.ensureLeader() {
		return m.notLeader()
	}
	return nil
}

// replyDropCut returns how many of drop fit one registration reply (maxRegisterReplyDrops
// and maxRegisterReplyDropBytes of encoded KeyVersions).
func replyDropCut(drop []raftmeta.KeyVersion) int {
	n := min(len(drop), maxRegisterReplyDrops)
	var b int
	for i := range n {
		b += 4 + len(drop[i].Key) + 8
		if b > maxRegisterReplyDropBytes {
			return i
		}
	}
	return n
}

// registerPage takes one page of a paged registration (a RegisterWorker request with a
// non-zero session). Pages with more set are accumulated in the leader's soft state, keyed
// by worker; the final page (more false) runs registerWorker over every page and returns its
// drops. The duties, in order:
//  1. Only the leader accumulates (NOT_LEADER otherwise); a new leader knows no session.
//  2. Page 0 starts a session and replaces any older one of the worker (its attempt was
//     abandoned: the worker starts each attempt over with a new session).
//  3. Any other page must carry the session's id and the next page number, and arrive within
//     registerSessionTTL of the previous page; otherwise it is refused with UNAVAILABLE and
//     the session dropped, and the worker starts over from page 0 with a new session.
//  4. A page that would take the session or all sessions past registerLimits is refused
//     with UNAVAILABLE (too large) and the session dropped.
func (m *Master) registerPage(ctx context.Context, a RegisterArgs, session uint64, page uint32, more bool) ([]raftmeta.KeyVersion, error) {
	if session == 0 {
		return m.registerWorker(ctx, a)
	}
	if m.cfg.testBeforeRegisterPage != nil {
		m.cfg.testBeforeRegisterPage(m, a.WorkerID, session, page)
	}
	if err := m.checkRegistration(a); err != nil {
		return nil, err
	}
	now := m.now()
	size := inventoryBytes(a.Inventory)
	m.mu.Lock()
	s := m.mu.regSessions[a.WorkerID]
	var refuse string
	switch {
	case page == 0:
		if s != nil {
			m.dropRegSessionLocked(a.WorkerID)
		}
		s = &regSession{id: session, began: now}
	case s == nil:
		refuse = "no registration in progress (this leader never saw page 0, or the session expired or was replaced)"
	case s.id != session:
		refuse = fmt.Sprintf("another registration (session %016x) replaced this one", s.id)
	case s.next != page:
		refuse = fmt.Sprintf("page out of order: expected page %d", s.next)
	case now.Sub(s.last) > registerSessionTTL:
		refuse = fmt.Sprintf("the session expired (no page for %s)", registerSessionTTL)
	}
	if refuse == "" && more {
		lim := m.regLimits
		switch {
		case s.objects+len(a.Inventory) > lim.perWorkerObjects || s.bytes+size > lim.perWorkerBytes:
			refuse = fmt.Sprintf("%v: the inventory exceeds the leader's bound for one worker (%d objects, %s)",
				base.ErrTooLarge, lim.perWorkerObjects, base.Bytes(lim.perWorkerBytes))
		case m.mu.regBytes+size > lim.totalBytes:
			refuse = fmt.Sprintf("%v: registrations in progress hold %s, the leader's bound is %s; retry later",
				base.ErrTooLarge, base.Bytes(m.mu.regBytes), base.Bytes(lim.totalBytes))
		}
	}
	if refuse != "" {
		if m.mu.regSessions[a.WorkerID] != nil && (page == 0 || s.id == session) {
			m.dropRegSessionLocked(a.WorkerID)
		}
		m.mu.Unlock()
		return nil, fmt.Errorf("%w: worker %s registration session %016x page %d refused: %s; register again from page 0",
			base.ErrUnavailable, a.WorkerID, session, page, refuse)
	}
	if ws := m.mu.workers[a.WorkerID]; ws != nil {
		ws.lastSeen = now // a worker sending pages is alive, though it does not heartbeat meanwhile
	}
	m.regPages.Add(1)
	if more {
		s.pages = append(s.pages, a.Inventory)
		s.next++
		s.last = now
		s.objects += len(a.Inventory)
		s.bytes += size
		m.mu.regBytes += size
		m.mu.regSessions[a.WorkerID] = s
		m.mu.Unlock()
		return nil, nil
	}
	if m.mu.regSessions[a.WorkerID] == s {
		m.dropRegSessionLocked(a.WorkerID)
	}
	m.mu.Unlock()
	a.earlier, a.began = s.pages, s.began
	return m.registerWorker(ctx, a)
}

// dropRegSessionLocked forgets the worker's paged registration in progress. REQUIRES: m.mu.
func (m *Master) dropRegSessionLocked(id base.WorkerID) {
	if s := m.mu.regSessions[id]; s != nil {
		m.mu.regBytes -= s.bytes
		delete(m.mu.regSessions, id)
	}
}

// expireRegSessions drops the paged registrations idle for registerSessionTTL (leader loop).
func (m *Master) expireRegSessions() {
	now := m.now()
	m.mu.Lock()
	defer m.mu.Unlock()
	for id, s := range m.mu.regSessions {
		if now.Sub(s.last) > registerSessionTTL {
			m.log.Info("dropped a worker registration never finished", "worker", id, "pages", len(s.pages),
				"objects", s.objects, "idle", now.Sub(s.last))
			m.dropRegSessionLocked(id)
		}
	}
}

// HeartbeatReply tells a worker what to drop and whether to re-register.
type HeartbeatReply struct {
	Drops      []raftmeta.KeyVersion
	Reregister bool
}

// heartbeat records a worker's liveness and usage and hands it the drops it is owed.
// A worker the leader does not know (new leader, or marked dead) gets ErrSegmentNotFound and
// must register again (with its inventory, which reconciles anything this leader missed).
//
// leaving is the worker's announcement that it is shutting down to restart (the final
// heartbeat of a graceful shutdown): from now the leader waits WorkerRestartGrace (not
// ClientTTL) before it marks the worker dead, and places no new puts on it.
func (m *Master) heartbeat(id base.WorkerID, usage WorkerUsage, leaving bool) (HeartbeatReply, error) {
	if !m.ensureLeader() {
		return HeartbeatReply{}, m.notLeader()
	}
	active := false
	for _, s := range m.node.Segments() {
		if s.ID == id {
			active = s.State == raftmeta.SegmentActive
		}
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	ws := m.mu.workers[id]
	if !m.mu.leader || !active || ws == nil {
		return HeartbeatReply{}, fmt.Errorf("%w: worker %s is not registered with this leader; register again", base.ErrSegmentNotFound, id)
	}
	now := m.now()
	ws.lastSeen = now
	if leaving {
		ws.leavingAt = now
		m.log.Info("worker leaving to restart; keeping its replicas for the restart grace", "worker", id,
			"worker_restart_grace", m.cfg.WorkerRestartGrace, "until", m.silenceDeadlineLocked(ws).UTC().Format(time.RFC3339))
	}
	// Heartbeats carry no capacities: keep the registration's.
	usage.DRAMCapacity, usage.NVMeCapacity = ws.usage.DRAMCapacity, ws.usage.NVMeCapacity
	ws.usage = usage
	if !ws.resyncAfter.IsZero() && now.After(ws.resyncAfter) {
		ws.resync, ws.resyncAfter = true, time.Time{}
	}
	if ws.resync {
		ws.resync = false
		return HeartbeatReply{Reregister: true}, nil
	}
	// NB: drops handed out here are forgotten; if the reply is lost the worker keeps those
	// bytes until its next registration reconciles them (orphans, never wrong answers: the
	// metadata no longer points at them).
	n := min(len(ws.drops), maxDropsPerHeartbeat)
	reply := HeartbeatReply{Drops: slices.Clone(ws.drops[:n])}
	ws.drops = ws.drops[n:]
	if len(ws.drops) == 0 {
		ws.drops = nil
	}
	return reply, nil
}

// NewMaster starts a master: it listens on cfg.RPCAddress, opens (or bootstraps) raft under
// cfg.DataDir, serves the master calls, and starts the leader loop and the admin HTTP server.
// With no Peers the master bootstraps a single-voter cluster of itself (standalone); with
// Join it bootstraps nothing and waits to be added by a leader.
func NewMaster(cfg MasterConfig) (*Master, error) {
	cfg.EnsureDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	log := cfg.Logger.With("component", "master", "id", cfg.ID)
	log.Info("master starting", cfg.logAttrs()...)
	m := &Master{cfg: cfg, log: log, now: time.Now, stop: make(chan struct{}), loopDone: make(chan struct{})}
	m.mu.workers = map[base.WorkerID]*workerSoft{}
	m.mu.reservations = map[string]*reservation{}
	m.mu.regSessions = map[base.WorkerID]*regSession{}
	m.regLimits = defaultRegisterLimits()
	if cfg.testRegisterLimits != nil {
		cfg.testRegisterLimits(&m.regLimits)
	}
	m.mu.rng = rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 0x6d6f6f6e63616b65))
	m.met = newMasterMetrics(m.stats)
	m.met.mc = newMooncakeMasterMetrics(m)
	m.met.reg.MustRegister(modelCollector{m})

	tr, err := transfer.NewTransport(DefaultProtocol)
	if err != nil {
		return nil, err
	}
	ln, err := tr.Listen(cfg.RPCAddress)
	if err != nil {
		return nil, fmt.Errorf("server: master listen on %s: %w", cfg.RPCAddress, err)
	}
	rpcAddr := ln.Addr().String()
	rc := raftmeta.Config{ID: cfg.ID, RaftAddr: cfg.RaftAddress, RPCAddr: rpcAddr, DataDir: cfg.DataDir, Peers: cfg.Peers, Logger: cfg.Logger}
	if cfg.testRaft != nil {
		cfg.testRaft(&rc)
	}
	node, err := raftmeta.Open(rc)
	if err != nil {
		ln.Close()
		return nil, err
	}
	m.node = node
	if len(cfg.Peers) == 0 && !cfg.noBootstrap && !cfg.Join {
		// A single-voter cluster of this master. Bootstrap fails harmlessly when the data dir
		// already holds raft state (a restart).
		err := node.Bootstrap([]raftmeta.Peer{{ID: cfg.ID, RaftAddr: node.RaftAddr(), RPCAddr: rpcAddr}})
		if err != nil && !errors.Is(err, raft.ErrCantBootstrap) {
			ln.Close()
			node.Close()
			return nil, err
		}
	}
	srv, err := transfer.NewServer(&masterHandler{m: m}, transfer.ServerOptions{ClusterID: cfg.ClusterID, Logger: cfg.Logger})
	if err != nil {
		ln.Close()
		node.Close()
		return nil, err
	}
	m.cli, err = transfer.NewClient(transfer.ClientOptions{ClusterID: cfg.ClusterID, Logger: cfg.Logger, ConnsPerPeer: 1})
	if err != nil {
		ln.Close()
		node.Close()
		return nil, err
	}
	m.rpc = rpcServer{srv: srv, ln: ln, done: make(chan struct{})}
	go m.rpc.serve()
	m.adm, err = startAdmin(cfg.MetricsAddress, adminHandlers{
		reg:       m.met.reg,
		health:    m.health,
		ready:     m.ready,
		status:    func() (any, error) { return m.status(), nil },
		dashboard: true,
		routes:    m.adminRoutes,
		healthKV:  m.healthFields,
	}, log)
	if err != nil {
		_ = m.rpc.shutdown(context.Background())
		m.cli.Close()
		node.Close()
		return nil, fmt.Errorf("server: metrics listen on %s: %w", cfg.MetricsAddress, err)
	}
	go m.leaderLoop()
	log.Info("master started", "rpc_address", rpcAddr, "raft_address", node.RaftAddr(), "metrics_address", m.adm.Addr())
	return m, nil
}

// Addr returns the bound RPC address.
func (m *Master) Addr() string { return m.rpc.ln.Addr().String() }

// MetricsAddr returns the bound metrics address, "" when there is none.
func (m *Master) MetricsAddr() string { return m.adm.Addr() }

// ID returns the master's raft id.
func (m *Master) ID() string { return m.cfg.ID }

// IsLeader reports whether this master is the raft leader.
func (m *Master) IsLeader() bool { return m.node.IsLeader() }

// Shutdown stops the master. The rough workflow:
//
//  1. stop the leader loop (no more liveness checks, expiries or summary lines), then close
//     its client to the leader (registerSelf's);
//  2. stop accepting RPC connections and drain the calls in flight (until ctx ends, then
//     close the connections);
//  3. stop the admin HTTP server;
//  4. if this master leads, hand leadership to another voter (bounded by ctx), so the
//     cluster has a leader again at once instead of after an election timeout;
//  5. close raft (the log and snapshots stay in DataDir for the next start).
//
// It is safe to call more than once; later calls return the first result.
func (m *Master) Shutdown(ctx context.Context) error {
	m.shutOnce.Do(func() {
		close(m.stop)
		<-m.loopDone
		var errs []error
		if err := m.cli.Close(); err != nil {
			errs = append(errs, fmt.Errorf("leader client: %w", err))
		}
		if err := m.rpc.shutdown(ctx); err != nil {
			errs = append(errs, fmt.Errorf("rpc: %w", err))
		}
		if err := m.adm.close(ctx); err != nil {
			errs = append(errs, fmt.Errorf("admin http: %w", err))
		}
		if m.node.IsLeader() {
			if servers, err := m.node.Servers(); err == nil && len(servers) > 1 {
				if err := m.node.LeadershipTransfer(ctx); err != nil {
					m.log.Warn("leadership transfer before shutdown failed", "err", err)
				}
			}
		}
		if err := m.node.Close(); err != nil {
			errs = append(errs, fmt.Errorf("raft: %w", err))
		}
		m.shutErr = errors.Join(errs...)
		m.log.Info("master stopped", "err", m.shutErr)
	})
	return m.shutErr
}

// health is /health: healthy when this master knows a leader.
func (m *Master) health() error {
	if id, _ := m.node.Leader(); id == "" {
		return fmt.Errorf("%w: no raft leader known", base.ErrUnavailable)
	}
	return nil
}

// leaderLoop is the master's one background goroutine (docs/threads.md). It owns the
// transitions of the leader soft state, worker liveness (MarkWorkerDead), reservation expiry,
// the periodic summary line and, on a follower, registering this master's RPC address with
// the leader (registerSelf).
func (m *Master) leaderLoop() {
	defer close(m.loopDone)
	tickEvery := min(time.Second, max(m.cfg.ClientTTL/4, 10*time.Millisecond), max(m.cfg.PutTimeout/4, 10*time.Millisecond))
	tick := time.NewTicker(tickEvery)
	defer tick.Stop()
	summary := time.NewTicker(m.cfg.SummaryInterval)
	defer summary.Stop()
	for {
		select {
		case <-m.stop:
			return
		case leader := <-m.node.LeaderCh():
			m.setLeader(leader)
		case <-tick.C:
			if !m.node.IsLeader() {
				m.setLeader(false)
				m.registerSelf()
				continue
			}
			m.setLeader(true)
			m.checkLiveness()
			m.expireReservations()
			m.expireRegSessions()
		case <-summary.C:
			m.logSummary()
		}
	}
}

// registerSelf, on a follower, asks the leader to record this master's RPC address in the
// masters table (RegisterMaster) while the table, as replicated here, lacks it: raftmeta only
// registers a leader's own address (and peers configured with one), so without this a master
// that never led would be missing from every status. It makes at most one call per tick,
// bounded by registerMasterTimeout; it does nothing while no leader (or no leader address) is
// known, and stops once the entry has reached this node. Failures (an election in progress, a
// leader that predates the call) are retried next tick and logged at debug only.
func (m *Master) registerSelf() {
	self := m.Addr()
	for _, ms := range m.node.Masters() {
		if ms.ID == m.cfg.ID && ms.RPCAddr == self {
			return
		}
	}
	lid, laddr := m.node.Leader()
	if lid == "" || laddr == "" || lid == m.cfg.ID || laddr == m.regRefusedBy {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), registerMasterTimeout)
	defer cancel()
	err := m.cli.Call(ctx, laddr, &transfer.RegisterMasterRequest{MasterID: m.cfg.ID, RPCAddr: self}, nil)
	if errors.Is(err, base.ErrInvalidParams) {
		m.regRefusedBy = laddr
		m.log.Info("the leader refused RegisterMaster (it may predate the call); not asking it again until another master leads",
			"leader", lid, "leader_addr", laddr, "err", err)
		return
	}
	if err != nil {
		m.log.Debug("register master address with the leader failed; retrying next tick",
			"leader", lid, "leader_addr", laddr, "rpc_address", self, "err", err)
		return
	}
	m.log.Info("registered master address with the leader", "leader", lid, "rpc_address", self)
}

// registerMaster records a master's RPC address in the masters table on the leader. The id
// must be a member of the raft configuration and the address non-empty (removal is what
// membership changes do). It commits nothing when the table already holds that address, so
// a follower's retries are cheap.
func (m *Master) registerMaster(ctx context.Context, id, rpcAddr string) error {
	cmd := raftmeta.RegisterMaster{ID: id, RPCAddr: rpcAddr}
	if rpcAddr == "" {
		return fmt.Errorf("%w: RegisterMaster needs an rpc address", base.ErrInvalidParams)
	}
	if err := cmd.Validate(); err != nil {
		return err
	}
	if !m.ensureLeader() {
		return m.notLeader()
	}
	servers, err := m.node.Servers()
	if err != nil {
		return err
	}
	if !slices.ContainsFunc(servers, func(p raftmeta.Peer) bool { return p.ID == id }) {
		return fmt.Errorf("%w: master %q is not a member of the raft configuration", base.ErrInvalidParams, id)
	}
	for _, ms := range m.node.Masters() {
		if ms.ID == id && ms.RPCAddr == rpcAddr {
			return nil
		}
	}
	actx, cancel := context.WithTimeout(ctx, applyTimeout)
	defer cancel()
	_, err = m.node.Apply(actx, cmd)
	return err
}

// setLeader moves the soft state into or out of leadership. On becoming leader every active
// worker gets a full ClientTTL from now to heartbeat, and is asked to re-register (resync) so
// its inventory reconciles anything the previous leader owed it. Restart graces are soft
// state too: a worker that announced leaving to the previous leader gets ClientTTL from this
// election like every other.
func (m *Master) setLeader(leader bool) {
	m.mu.Lock()
	if m.mu.leader == leader {
		m.mu.Unlock()
		return
	}
	m.mu.Unlock()
	segs := m.activeSegments()
	now := m.now()
	m.mu.Lock()
	defer m.mu.Unlock()
	m.mu.leader = leader
	m.mu.workers = map[base.WorkerID]*workerSoft{}
	m.mu.reservations = map[string]*reservation{}
	m.mu.regSessions = map[base.WorkerID]*regSession{} // paged registrations start over with the new leader
	m.mu.regBytes = 0
	if !leader {
		m.mu.leaderSince = time.Time{}
		m.log.Info("no longer leader")
		return
	}
	m.mu.leaderSince = now
	for _, s := range segs {
		// Until its first heartbeat to this leader, a worker's DRAM use is estimated from the
		// replicas the FSM lists on it (capped at its capacity; NVMe-resident ones count too,
		// so the estimate errs on the full side): a new leader must not place puts as if
		// every worker were empty.
		m.mu.workers[s.ID] = &workerSoft{lastSeen: now, resync: true,
			usage: WorkerUsage{DRAMUsed: min(s.Bytes, s.DRAMCapacity), DRAMCapacity: s.DRAMCapacity, NVMeCapacity: s.NVMeCapacity}}
	}
	m.log.Info("became leader", "workers", len(segs))
}

// checkLiveness marks workers silent for ClientTTL dead through raft (their replicas are
// dropped; objects left with none are removed). A worker that announced a graceful shutdown
// gets WorkerRestartGrace from that announcement instead (silenceDeadlineLocked).
func (m *Master) checkLiveness() {
	now := m.now()
	var dead []base.WorkerID
	leaving := map[base.WorkerID]bool{}
	m.mu.Lock()
	for id, ws := range m.mu.workers {
		if now.After(m.silenceDeadlineLocked(ws)) {
			dead = append(dead, id)
			leaving[id] = !ws.leavingAt.IsZero()
		}
	}
	m.mu.Unlock()
	for _, id := range dead {
		ctx, cancel := context.WithTimeout(context.Background(), applyTimeout)
		res, err := m.node.Apply(ctx, raftmeta.MarkWorkerDead{ID: id})
		cancel()
		if err != nil {
			m.log.Warn("mark worker dead failed; retrying next tick", "worker", id, "err", err)
			continue
		}
		m.mu.Lock()
		if ws := m.mu.workers[id]; ws != nil && now.After(m.silenceDeadlineLocked(ws)) {
			for key, r := range m.mu.reservations {
				if slices.Contains(r.workers, id) {
					m.releaseReservationLocked(key, r)
				}
			}
			delete(m.mu.workers, id)
		}
		m.mu.Unlock()
		if m.cfg.onWorkerDead != nil {
			m.cfg.onWorkerDead(id)
		}
		if leaving[id] {
			m.log.Warn("worker marked dead: not back within its restart grace after a graceful shutdown", "worker", id,
				"worker_restart_grace", m.cfg.WorkerRestartGrace, "replicas_dropped", res.Dropped, "objects_removed", res.Removed)
			continue
		}
		m.log.Warn("worker marked dead: no heartbeat", "worker", id, "client_ttl", m.cfg.ClientTTL,
			"replicas_dropped", res.Dropped, "objects_removed", res.Removed)
	}
}

// expireReservations drops puts that did not reach PutEnd within PutTimeout.
func (m *Master) expireReservations() {
	now := m.now()
	m.mu.Lock()
	defer m.mu.Unlock()
	for key, r := range m.mu.reservations {
		if now.After(r.deadline) {
			m.log.Info("put timed out before PutEnd; workers drop it", "key", key, "version", r.version, "put_timeout", m.cfg.PutTimeout)
			m.dropReservationLocked(key, r)
		}
	}
}

// stats is the snapshot the metrics and the summary line read.
func (m *Master) stats() masterStats {
	st := m.node.Stats()
	s := masterStats{Keys: st.Keys, SoftPinnedKeys: st.SoftPinned}
	// Estimated FSM bytes: keys plus a fixed record size (raftmeta's target is under 200 bytes
	// per object beyond the key; 96 covers the record, map entry and replica ids of a
	// two-replica object).
	s.MetadataBytes = st.KeyBytes + st.Keys*96
	s.Models = m.node.Models()
	for _, seg := range m.node.Segments() {
		if seg.State != raftmeta.SegmentActive {
			continue
		}
		s.Workers++
		s.CapacityBytes += seg.DRAMCapacity
		s.AllocatedBytes += seg.Bytes
		s.Segments = append(s.Segments, segmentStat{ID: seg.ID, Allocated: seg.Bytes, Capacity: seg.DRAMCapacity})
	}
	return s
}

// Status is the JSON of /api/v1/status and of the Status call.
type Status struct {
	ClusterID      string         `json:"cluster_id"`
	Self           string         `json:"self"`
	Leader         string         `json:"leader"` // the leader's master id, "" if unknown
	LeaderAddress  string         `json:"leader_address"`
	Masters        []MasterStatus `json:"masters"`
	Workers        []WorkerStatus `json:"workers"`
	Keys           int64          `json:"keys"`
	SoftPinnedKeys int64          `json:"soft_pinned_keys"`
	Bytes          int64          `json:"bytes"`          // sum of object sizes, one copy each
	ReplicaBytes   int64          `json:"replica_bytes"`  // sum over replicas
	CapacityBytes  int64          `json:"capacity_bytes"` // DRAM of active workers
	PutsInFlight   int            `json:"puts_in_flight"` // leader only
	UsageReported  bool           `json:"usage_reported"` // false on followers: per-worker usage is leader soft state
	// EvictionHighWatermarkRatio and EvictionRatio are this master's settings (placement avoids
	// workers past the high watermark; workers evict themselves).
	EvictionHighWatermarkRatio float64 `json:"eviction_high_watermark_ratio"`
	EvictionRatio              float64 `json:"eviction_ratio"`
	// Models: registered models and the tokens objects retain, from the metadata (the full
	// report with the workers' bytes is /api/v1/memory).
	Models       []ModelMemory `json:"models,omitempty"`
	RaftState    string        `json:"raft_state"`
	RaftTerm     uint64        `json:"raft_term"`
	AppliedIndex uint64        `json:"applied_index"`
	// RootFSDir is handed to workers that set none of their own (MasterConfig.RootFSDir).
	RootFSDir string `json:"root_fs_dir,omitempty"`
}

// MasterStatus is one member of the raft configuration in Status.
type MasterStatus struct {
	ID         string `json:"id"`
	RPCAddress string `json:"rpc_address"` // "" until the master registered it
	// RaftAddress is the member's raft address in the configuration this master holds.
	RaftAddress string `json:"raft_address"`
	Leader      bool   `json:"leader"`
}

// WorkerStatus is one worker in Status: FSM facts plus the leader's last heartbeat.
type WorkerStatus struct {
	ID                string `json:"id"`
	Address           string `json:"address"`
	State             string `json:"state"`         // active, dead
	Objects           int64  `json:"objects"`       // replicas the metadata places here
	ReplicaBytes      int64  `json:"replica_bytes"` // their bytes
	DRAMUsedBytes     int64  `json:"dram_used_bytes"`
	DRAMCapacityBytes int64  `json:"dram_capacity_bytes"`
	DRAMObjects       int64  `json:"dram_objects"`
	NVMeUsedBytes     int64  `json:"nvme_used_bytes"`
	NVMeCapacityBytes int64  `json:"nvme_capacity_bytes"`
	NVMeObjects       int64  `json:"nvme_objects"`
	LastHeartbeat     string `json:"last_heartbeat,omitempty"` // RFC 3339, leader only
	// RestartGraceUntil is set while the worker is away after a graceful shutdown: the leader
	// marks it dead at this time (RFC 3339) unless it registers again first. Leader only.
	RestartGraceUntil string `json:"restart_grace_until,omitempty"`
}

func (m *Master) status() Status {
	st := m.node.Stats()
	lid, laddr := m.node.Leader()
	s := Status{ClusterID: m.cfg.ClusterID, Self: m.cfg.ID, Leader: lid, LeaderAddress: laddr,
		Keys: st.Keys, SoftPinnedKeys: st.SoftPinned, Bytes: st.Bytes, RaftState: st.State, RaftTerm: st.Term,
		AppliedIndex: st.AppliedIndex, Masters: []MasterStatus{}, Workers: []WorkerStatus{},
		EvictionHighWatermarkRatio: m.cfg.EvictionHighWatermarkRatio, EvictionRatio: m.cfg.EvictionRatio, RootFSDir: m.cfg.RootFSDir}
	s.Masters = masterStatuses(m.node, lid)
	s.Models = statusModels(m.node.Models())
	m.mu.Lock()
	defer m.mu.Unlock()
	s.UsageReported = m.mu.leader
	s.PutsInFlight = len(m.mu.reservations)
	for _, seg := range m.node.Segments() {
		w := WorkerStatus{ID: string(seg.ID), Address: seg.Address, State: seg.State.String(), Objects: seg.Objects,
			ReplicaBytes: seg.Bytes, DRAMCapacityBytes: seg.DRAMCapacity, NVMeCapacityBytes: seg.NVMeCapacity}
		s.ReplicaBytes += seg.Bytes
		if seg.State == raftmeta.SegmentActive {
			s.CapacityBytes += seg.DRAMCapacity
		}
		if ws := m.mu.workers[seg.ID]; ws != nil && seg.State == raftmeta.SegmentActive {
			u := ws.usage
			w.DRAMUsedBytes, w.DRAMObjects, w.NVMeUsedBytes, w.NVMeObjects = u.DRAMUsed, u.DRAMObjects, u.NVMeUsed, u.NVMeObjects
			if u.DRAMCapacity > 0 {
				w.DRAMCapacityBytes = u.DRAMCapacity
			}
			if u.NVMeCapacity > 0 {
				w.NVMeCapacityBytes = u.NVMeCapacity
			}
			w.LastHeartbeat = ws.lastSeen.UTC().Format(time.RFC3339Nano)
			if !ws.leavingAt.IsZero() {
				w.RestartGraceUntil = m.silenceDeadlineLocked(ws).UTC().Format(time.RFC3339Nano)
			}
		}
		s.Workers = append(s.Workers, w)
	}
	return s
}
