package master

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/mooncake-go/mooncake/internal/base"
	"github.com/mooncake-go/mooncake/raftmeta"
	"github.com/mooncake-go/mooncake/server/lifecycle"
	"github.com/mooncake-go/mooncake/server/rpcsrv"
)

// inventoryBytes is the leader's estimated heap for inv (registerObjectOverhead per entry).
func inventoryBytes(inv []base.ObjectMeta) int64 {
	n := int64(len(inv)) * registerObjectOverhead
	for i := range inv {
		n += int64(len(inv[i].Key))
	}
	return n
}

// WorkerUsage is a worker's usage per tier: bytes used and objects from each heartbeat
// (DRAMUsed is the arena's bytes in use; an object with a copy in both tiers counts in both
// DRAMObjects and NVMeObjects), capacities from its registration.
type WorkerUsage = lifecycle.Usage

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
// its reconciliation on the leader (rpcsrv.RegisterTimeout on the worker side). See registerWorker.
const lostGrace = rpcsrv.RegisterTimeout

// registerWorker commits the worker's segment and reconciles its inventory against the
// metadata. It returns the objects the worker holds that the master does not know: the worker
// drops them.
//
// Reconciliation (the master's raft state is the source of truth):
//   - an object the worker reports that the metadata lists on it at that version stays;
//   - a lost replica of this worker (kept by MarkWorkerLost while it was dead) is re-adopted
//     when the worker reports that very version (AdoptReplicas), and forgotten otherwise
//     (DropReplicas): a removed key has no record, an overwritten one another version, and a
//     repaired one no longer names this worker, so none of them comes back;
//   - a replica the metadata lists on this worker that the worker did not report (or reported
//     at another version) is dropped through DropReplicas commits, if the object was created
//     before this worker's previous registration at this leader, or more than lostGrace ago.
//     A younger one may have been written after the worker took its inventory snapshot (the
//     snapshot races with puts); it is left alone and the worker is asked to register again,
//     which settles it: that second snapshot is taken after the object was created.
//   - a key the worker reports at several versions (it keeps the versions an upsert replaced
//     until the master drops them: tier/supersede.go) is matched at the version the metadata
//     lists; each other version is an object the metadata does not list, as below;
//   - an object the worker reports that the metadata does not list on it is dropped by the
//     worker, unless it is a put in flight to this worker (a reservation at that version, or
//     an object committed since the metadata was scanned), or this leader is younger than
//     PutTimeout (the previous leader's puts in flight are unknown to it: the worker is asked
//     to register again once that window has passed). We never adopt objects that are not lost
//     replicas of this worker: the key may have been removed while the worker was away, and
//     adopting would resurrect it.
//
// A paged registration (registerPage) runs this at its final page over every page, with the
// receipt time of page 0 standing for the registration's: the worker took its inventory
// snapshot before sending page 0, so an object created after page 0 arrived is never taken
// as lost (it is deferred), whatever time the later pages took.
func (m *Master) registerWorker(ctx context.Context, a RegisterArgs) ([]base.KeyVersion, error) {
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
	reg, err := m.commitRegistration(ctx, a, recv)
	if err != nil {
		return nil, err
	}
	have, multi := m.inventoryVersions(pages, ninv)
	settled := recv.Add(-lostGrace).UnixNano()
	if !reg.Prev.IsZero() {
		settled = max(settled, reg.Prev.UnixNano())
	}
	rc := m.reconcileListed(a.WorkerID, have, settled)
	nlost := len(rc.lost)
	adopted, err := m.adopt(ctx, a.WorkerID, rc.adopt, have)
	if err != nil {
		return nil, err
	}
	for lost := rc.lost; len(lost) > 0; {
		n := min(len(lost), raftmeta.MaxBatch)
		if _, err := m.node.Apply(ctx, raftmeta.DropReplicas{Worker: a.WorkerID, Items: lost[:n]}); err != nil {
			return nil, err
		}
		lost = lost[n:]
	}
	m.mu.Lock()
	drop, spared := m.unknownLocked(a.WorkerID, pages, have, multi, reg.InGrace)
	// The reply must fit one body: the drops past its bound are owed through heartbeats.
	ndrop := len(drop)
	cut := replyDropCut(drop)
	m.mu.lc.Reconciled(a.WorkerID, drop[cut:], rc.deferred, spared)
	drop = drop[:cut]
	m.mu.Unlock()
	m.log.Info("worker registered", "worker", a.WorkerID, "address", a.Address,
		"dram_capacity", base.Bytes(a.DRAMCapacity).String(), "nvme_capacity", base.Bytes(a.NVMeCapacity).String(),
		"inventory", ninv, "pages", len(pages), "kept", rc.kept, "readopted", adopted, "left_for_repair", rc.repair,
		"replicas_lost", nlost, "lost_unsettled", rc.deferred,
		"dropped_unknown", ndrop, "drops_queued", ndrop-len(drop), "unknown_spared", spared)
	return drop, nil
}

// commitRegistration commits the worker's segment (RegisterWorker) and moves it through the
// lifecycle machine: registering (or returning, when dead), then alive from now on (not from
// page 0's arrival, recv, when paged), its drops owed and resync requests cleared (the
// reconciliation supersedes them). It returns what the machine tells the reconciliation: the
// worker's previous registration with this leader, and whether recv falls in the leader's
// grace.
func (m *Master) commitRegistration(ctx context.Context, a RegisterArgs, recv time.Time) (lifecycle.Registration, error) {
	m.mu.Lock()
	m.mu.lc.RegisterBegin(m.now(), a.WorkerID)
	m.mu.Unlock()
	res, err := m.node.Apply(ctx, raftmeta.RegisterWorker{ID: a.WorkerID, Address: a.Address, DRAMCapacity: a.DRAMCapacity, NVMeCapacity: a.NVMeCapacity})
	if err == nil {
		err = res.Err
	}
	if err != nil {
		m.mu.Lock()
		m.mu.lc.RegisterFailed(a.WorkerID)
		m.mu.Unlock()
		return lifecycle.Registration{}, err
	}
	now := m.now()
	var reg lifecycle.Registration
	effs := m.lcEvent(func(lc *lifecycle.Machine) []lifecycle.Effect {
		var effs []lifecycle.Effect
		reg, effs = lc.Registered(now, recv, a.WorkerID, a.DRAMCapacity, a.NVMeCapacity)
		return effs
	})
	m.execute(ctx, effs)
	return reg, nil
}

// listedReconciliation is what reconcileListed found: replicas to re-adopt, replicas the
// worker no longer has (lost: dropped through DropReplicas), and counts.
type listedReconciliation struct {
	adopt, lost    []base.KeyVersion
	kept, deferred int
	// repair counts lost replicas the worker no longer has, kept for repair.
	repair int
}

// reconcileListed walks the objects that list worker id (live or lost) against its
// inventory have. A kept object's key leaves have: every inventory key is in have until
// then, so afterwards "not in have" means kept (no second map of up to millions of keys).
func (m *Master) reconcileListed(id base.WorkerID, have map[string]base.Version, settled int64) listedReconciliation {
	var rc listedReconciliation
	m.node.Range("", func(o raftmeta.Object) bool {
		kv := base.KeyVersion{Key: o.Key, Version: o.Version}
		if slices.Contains(o.Lost, id) {
			// A replica kept for this worker while it was dead: re-adopted when the worker
			// reports that very version (see raftmeta, "Lost replicas"). One it no longer has
			// stays lost while the object has a live replica elsewhere, so repair restores the
			// replica count (a worker back with an empty disk); otherwise it is forgotten and
			// the object, held nowhere, removed.
			switch v, ok := have[o.Key]; {
			case ok && v == o.Version:
				rc.adopt = append(rc.adopt, kv)
			case len(o.Replicas) > 0:
				rc.repair++
			default:
				rc.lost = append(rc.lost, kv)
			}
			return true
		}
		if !slices.Contains(o.Replicas, id) {
			return true
		}
		switch v, ok := have[o.Key]; {
		case ok && v == o.Version:
			delete(have, o.Key)
			rc.kept++
		case o.Created < settled:
			rc.lost = append(rc.lost, kv)
		default:
			rc.deferred++
		}
		return true
	})
	return rc
}

// unknownLocked returns the inventory entries still in have (neither kept nor re-adopted)
// that the worker must drop, and how many it spares: a put in flight to this worker, an
// object committed on it since the scan, or, in a new leader's grace, a put the previous
// leader may have started. REQUIRES: m.mu (released and retaken every reconcileLockBatch
// entries).
func (m *Master) unknownLocked(id base.WorkerID, pages [][]base.ObjectMeta, have map[string]base.Version, multi map[string]bool, inGrace bool) (drop []base.KeyVersion, spared int) {
	for _, p := range pages {
		for i, o := range p {
			if i%reconcileLockBatch == reconcileLockBatch-1 {
				// Let puts and heartbeats in: each entry's check below needs m.mu only for
				// itself (its reservation, then the FSM), so a million entries need not hold
				// the lock for the whole scan.
				m.mu.Unlock()
				m.mu.Lock()
			}
			if _, ok := have[o.Key]; !ok && !multi[o.Key] {
				continue // kept (a key reported at several versions: each is checked below)
			}
			if r, ok := m.mu.lc.Reservation(o.Key); ok && r.Version == o.Version && slices.Contains(r.Workers, id) {
				continue
			}
			// NB: PutEnd commits before it releases the reservation, so an object whose
			// reservation is gone is in the FSM by now if its put succeeded.
			if cur, ok := m.node.Lookup(o.Key); ok && cur.Version == o.Version && slices.Contains(cur.Replicas, id) {
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
			drop = append(drop, base.KeyVersion{Key: o.Key, Version: o.Version})
		}
	}
	return drop, spared
}

// inventoryVersions maps each key of the inventory to its version. A worker reports a key
// at several versions while it keeps versions an upsert replaced until the master drops them
// (tier/supersede.go): have then holds the version the metadata lists, if it is among them
// (else the newest), so that version is kept or re-adopted, and multi names the key, so
// unknownLocked checks each of its versions on its own (the others are dropped unless in
// flight).
func (m *Master) inventoryVersions(pages [][]base.ObjectMeta, n int) (have map[string]base.Version, multi map[string]bool) {
	have = make(map[string]base.Version, n)
	for _, p := range pages {
		for _, o := range p {
			if v, dup := have[o.Key]; dup && v != o.Version {
				if multi == nil {
					multi = map[string]bool{}
				}
				multi[o.Key] = true
				if cur, ok := m.node.LookupAny(o.Key); ok && cur.Version == v {
					continue
				}
			}
			have[o.Key] = o.Version
		}
	}
	return have, multi
}

// adopt commits the re-adoption of a returning worker's lost replicas that its inventory
// holds at the same version (AdoptReplicas, in batches), and takes each adopted key out of
// have so the reconciliation counts it as kept. An item the FSM refuses (removed or
// overwritten since the scan) stays in have: the worker is told to drop it.
func (m *Master) adopt(ctx context.Context, id base.WorkerID, adopt []base.KeyVersion, have map[string]base.Version) (int, error) {
	n := 0
	for len(adopt) > 0 {
		k := min(len(adopt), raftmeta.MaxBatch)
		res, err := m.node.Apply(ctx, raftmeta.AdoptReplicas{Worker: id, Items: adopt[:k]})
		if err != nil {
			return n, err
		}
		for i, kv := range adopt[:k] {
			if res.Items == nil || res.Items[i] == nil {
				delete(have, kv.Key)
				n++
			}
		}
		adopt = adopt[k:]
	}
	return n, nil
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
func replyDropCut(drop []base.KeyVersion) int {
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
// non-zero session). Only the leader accumulates (NOT_LEADER otherwise); the lifecycle
// machine keeps the pages and decides (lifecycle.Machine.RegisterPage: page order, session
// replacement, idle expiry, bounds); the final page runs registerWorker over every page and
// returns its drops.
func (m *Master) registerPage(ctx context.Context, a RegisterArgs, session uint64, page uint32, more bool) ([]base.KeyVersion, error) {
	if session == 0 {
		return m.registerWorker(ctx, a)
	}
	if m.cfg.Test.BeforeRegisterPage != nil {
		m.cfg.Test.BeforeRegisterPage(m, a.WorkerID, session, page)
	}
	if err := m.checkRegistration(a); err != nil {
		return nil, err
	}
	now := m.now()
	m.mu.Lock()
	earlier, began, done, err := m.mu.lc.RegisterPage(now, a.WorkerID, session, page, more, a.Inventory, inventoryBytes(a.Inventory))
	m.mu.Unlock()
	if err != nil {
		return nil, err
	}
	m.regPages.Add(1)
	if !done {
		return nil, nil
	}
	a.earlier, a.began = earlier, began
	return m.registerWorker(ctx, a)
}

// expireRegSessions drops the paged registrations idle for the session TTL (leader loop).
func (m *Master) expireRegSessions() {
	now := m.now()
	m.execute(context.Background(), m.lcEvent(func(lc *lifecycle.Machine) []lifecycle.Effect { return lc.ExpireSessions(now) }))
}

// HeartbeatReply tells a worker what to drop and whether to re-register; Settled says the
// leader owes it nothing once Drops are applied (lifecycle.Settled).
type HeartbeatReply struct {
	Drops      []base.KeyVersion
	Reregister bool
	Settled    bool
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
	if !active {
		return HeartbeatReply{}, fmt.Errorf("%w: worker %s is not registered with this leader; register again", base.ErrSegmentNotFound, id)
	}
	now := m.now()
	var err error
	effs := m.lcEvent(func(lc *lifecycle.Machine) []lifecycle.Effect {
		var effs []lifecycle.Effect
		effs, err = lc.Heartbeat(now, id, usage, leaving)
		return effs
	})
	if err != nil {
		return HeartbeatReply{}, err
	}
	// The reply is the effects' answer (drops owed, re-register); nothing else is proposed.
	return m.execute(context.Background(), effs)
}
