//go:build ignore

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
	"time"

	"github.com/mooncake-go/mooncake/internal/base"
	"github.com/mooncake-go/mooncake/raftmeta"
)

// Bounds of the leader's soft state. Each is a memory bound, not a tuning knob.
const (
	// maxDropsPerHeartbeat bounds the drop list in one heartbeat reply; the rest waits for
	// the next beat (a worker heartbeats every second).
	maxDropsPerHeartbeat = 4096
	// maxQueuedDrops bounds the drops queued for one worker. Past it the queue is cleared and
	// the worker is asked to re-register: its inventory reconciliation finds every orphan.
	maxQueuedDrops = 1 << 20
	// maxReservations bounds puts in flight (PutStart without PutEnd) on the leader.
	maxReservations = 1 << 20
	// applyTimeout bounds one raft commit made by the leader's own loops.
	applyTimeout = 10 * time.Second
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
	}

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
	// resync asks the worker to re-register with its full inventory (drop queue overflowed).
	resync bool
}

// WorkerUsage is what a worker reports in each heartbeat: bytes and objects per tier.
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
	if !m.node.IsLeader() {
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
	if old, ok := m.mu.reservations[a.Key]; ok && now.Before(old.deadline) {
		if !a.Upsert {
			return PutStartReply{}, fmt.Errorf("%w: key %q: a put of this key is in progress", base.ErrObjectAlreadyExists, a.Key)
		}
		// An upsert supersedes the put in flight: its workers drop what they got.
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
	if cur, ok := m.mu.reservations[key]; ok && cur == r {
		delete(m.mu.reservations, key)
	}
	for _, id := range r.workers {
		if ws := m.mu.workers[id]; ws != nil {
			ws.reserved -= r.size
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
}

// putEnd commits the objects of items in ONE raft entry. It returns one error per item.
func (m *Master) putEnd(ctx context.Context, items []PutEndItem, upsert bool) ([]error, error) {
	if !m.node.IsLeader() {
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
			upsert = upsert || r.upsert
		case m.leaderGraceLocked(now) && len(replicas) > 0:
			// A put the previous leader started (see leaderGraceLocked).
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
			Replicas: replicas, SoftPinUntil: soft, HardPin: it.HardPin})
		idx = append(idx, i)
	}
	m.mu.Unlock()
	cmd.Upsert = upsert
	if len(cmd.Items) == 0 {
		return errs, nil
	}
	res, err := m.node.Apply(ctx, cmd)
	if err != nil {
		// Outcome unknown or not proposed: keep the reservations; the client may retry.
		return nil, err
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

// putRevoke drops the reservation of key at version (all workers drop the pending bytes).
// Revoking a put that is not in flight is not an error: the worker timeout cleans up anyway.
func (m *Master) putRevoke(key string, version base.Version) error {
	if err := base.ValidateKey(key); err != nil {
		return err
	}
	if !m.node.IsLeader() {
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
	if !m.node.IsLeader() {
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
	if !m.node.IsLeader() {
		return 0, m.notLeader()
	}
	// NB: objects put between this scan and the commit are removed from the metadata without a
	// drop owed to their workers; the bytes stay until the worker re-registers (reconciliation)
	// or is restarted. The window is one raft round trip.
	var objs []raftmeta.Object
	m.node.Range("", func(o raftmeta.Object) bool {
		if re.MatchString(o.Key) {
			objs = append(objs, o)
		}
		return true
	})
	res, err := m.node.Apply(ctx, raftmeta.RemoveRegex{Pattern: pattern})
	if err != nil {
		return 0, err
	}
	if res.Err != nil {
		return 0, res.Err
	}
	m.queueDropsCommitted(objs)
	return res.Removed, nil
}

// removeAll removes every object in one raft commit.
func (m *Master) removeAll(ctx context.Context) (int, error) {
	if !m.node.IsLeader() {
		return 0, m.notLeader()
	}
	var objs []raftmeta.Object
	m.node.Range("", func(o raftmeta.Object) bool { objs = append(objs, o); return true })
	res, err := m.node.Apply(ctx, raftmeta.RemoveAll{})
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
// cursor of the next page ("" when done).
func (m *Master) list(prefix, cursor string, limit int) ([]ListEntry, string) {
	if limit <= 0 || limit > maxListLimit {
		limit = maxListLimit
	}
	var out []ListEntry
	next := ""
	m.node.Range(prefix, func(o raftmeta.Object) bool {
		if cursor != "" && o.Key <= cursor {
			return true
		}
		if len(out) == limit {
			next = out[len(out)-1].Key
			return false
		}
		out = append(out, ListEntry{Key: o.Key, Size: o.Size})
		return true
	})
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
}

// registerWorker commits the worker's segment and reconciles its inventory against the
// metadata. It returns the objects the worker holds that the master does not know: the worker
// drops them.
//
// Reconciliation (the master's raft state is the source of truth):
//   - a replica the metadata lists on this worker that the worker did not report (or reported
//     at another version) is dropped through one DropReplicas commit;
//   - an object the worker reports that the metadata lists on it at that version stays;
//   - an object the worker reports that the metadata does not list on it is dropped by the
//     worker, unless it is a put in flight to this worker (reservation at that version). We
//     never adopt unknown objects: the key may have been removed while the worker was away, and
//     adopting would resurrect it.
func (m *Master) registerWorker(ctx context.Context, a RegisterArgs) ([]raftmeta.KeyVersion, error) {
	if err := base.ValidateWorkerID(a.WorkerID); err != nil {
		return nil, err
	}
	if a.ClusterID != "" && a.ClusterID != m.cfg.ClusterID {
		return nil, fmt.Errorf("%w: worker %s is in cluster %q, this master in %q", base.ErrClusterMismatch, a.WorkerID, a.ClusterID, m.cfg.ClusterID)
	}
	if !m.node.IsLeader() {
		return nil, m.notLeader()
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
	ws.lastSeen = m.now()
	ws.drops, ws.resync = nil, false // the reconciliation below supersedes queued drops
	ws.usage.DRAMCapacity, ws.usage.NVMeCapacity = a.DRAMCapacity, a.NVMeCapacity
	m.mu.Unlock()

	have := make(map[string]base.Version, len(a.Inventory))
	for _, o := range a.Inventory {
		have[o.Key] = o.Version
	}
	var lost []raftmeta.KeyVersion
	kept := map[string]bool{}
	m.node.Range("", func(o raftmeta.Object) bool {
		if !slices.Contains(o.Replicas, a.WorkerID) {
			return true
		}
		if v, ok := have[o.Key]; ok && v == o.Version {
			kept[o.Key] = true
		} else {
			lost = append(lost, raftmeta.KeyVersion{Key: o.Key, Version: o.Version})
		}
		return true
	})
	for len(lost) > 0 {
		n := min(len(lost), raftmeta.MaxBatch)
		if _, err := m.node.Apply(ctx, raftmeta.DropReplicas{Worker: a.WorkerID, Items: lost[:n]}); err != nil {
			return nil, err
		}
		lost = lost[n:]
	}
	var drop []raftmeta.KeyVersion
	m.mu.Lock()
	for _, o := range a.Inventory {
		if kept[o.Key] {
			continue
		}
		if r := m.mu.reservations[o.Key]; r != nil && r.version == o.Version && slices.Contains(r.workers, a.WorkerID) {
			continue
		}
		drop = append(drop, raftmeta.KeyVersion{Key: o.Key, Version: o.Version})
	}
	m.mu.Unlock()
	m.log.Info("worker registered", "worker", a.WorkerID, "address", a.Address,
		"dram_capacity", base.Bytes(a.DRAMCapacity).String(), "nvme_capacity", base.Bytes(a.NVMeCapacity).String(),
		"inventory", len(a.Inventory), "kept", len(kept), "lost", len(a.Inventory)-len(kept)-len(drop), "dropped_unknown", len(drop))
	return drop, nil
}

// HeartbeatReply tells a worker what to drop and whether to re-register.
type HeartbeatReply struct {
	Drops      []raftmeta.KeyVersion
	Reregister bool
}

// heartbeat records a worker's liveness and usage and hands it the drops it is owed.
// A worker the leader does not know (new leader, or marked dead) gets ErrSegmentNotFound and
// must register again (with its inventory, which reconciles anything this leader missed).
func (m *Master) heartbeat(id base.WorkerID, usage WorkerUsage) (HeartbeatReply, error) {
	if !m.node.IsLeader() {
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
	ws.lastSeen = m.now()
	ws.usage = usage
	if ws.resync {
		ws.resync = false
		return HeartbeatReply{Reregister: true}, nil
	}
	n := min(len(ws.drops), maxDropsPerHeartbeat)
	reply := HeartbeatReply{Drops: slices.Clone(ws.drops[:n])}
	ws.drops = ws.drops[n:]
	if len(ws.drops) == 0 {
		ws.drops = nil
	}
	return reply, nil
}
