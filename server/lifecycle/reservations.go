package lifecycle

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"time"

	"github.com/mooncake-go/mooncake/internal/base"
	"github.com/mooncake-go/mooncake/raftmeta"
)

// Reservation is one put between PutStart and PutEnd: leader soft state, never committed.
// Its bytes count in each of its workers' Reserved until it ends.
type Reservation struct {
	Version  base.Version
	Size     int64
	Workers  []base.WorkerID
	Deadline time.Time
	Upsert   bool
	// committing: its PutEnd's raft entry is being applied (BeginEnd), so the entry
	// decides whether its workers are owed drops (EndCommit), not a supersede, revoke or
	// expiry meanwhile: a drop sent for a version that then commits would lose it.
	committing bool
}

// PlacePut places one put among segs (the active segments, from the FSM) and reserves its
// bytes. o is the object's record as PutStart gives it (Key, Size) with the Version from
// raftmeta (Node.NewVersion); cfg is the put's configuration (cfg.Replicas 0 means 1);
// exclude lists workers this put must not be placed on: an earlier attempt of the same put
// failed to write to them (the client re-places it, issue 18). The rules, in order:
//  1. Only a leader places (UNAVAILABLE while leadership is starting).
//  2. A put of a key with a reservation that has not timed out is refused
//     (OBJECT_ALREADY_EXISTS) unless it is an upsert; an upsert, or any put after the old
//     one timed out, supersedes it: its workers are owed drops of what they received.
//  3. At most MaxReservations puts are in flight (UNAVAILABLE past it).
//  4. A put that would take its tenant over its quota (quota: zero means no limit),
//     counting the tenant's committed bytes and its puts in flight, is refused
//     (TENANT_QUOTA_EXCEEDED, tenants.go).
//  5. Candidates are the placeable workers (Placeable) not in exclude; a worker past
//     the high watermark (used plus reserved over HighWatermark of its DRAM) is weighed as
//     full; Place picks among them with rng, the only randomness. When the exclusions leave
//     too few, Place's error (base.ErrNoSpace) names them.
func (m *Machine) PlacePut(now time.Time, o base.Object, cfg base.PutConfig, exclude []base.WorkerID, quota TenantQuota, segs []raftmeta.Segment,
	rng *rand.Rand) ([]base.WorkerID, error) {
	if !m.leader {
		return nil, fmt.Errorf("%w: leadership is starting, retry", base.ErrUnavailable)
	}
	if old, ok := m.resv[o.Key]; ok {
		if !cfg.Upsert && now.Before(old.Deadline) {
			return nil, fmt.Errorf("%w: key %q: a put of this key is in progress", base.ErrObjectAlreadyExists, o.Key)
		}
		m.DropReservation(o.Key, old.Version)
	}
	if len(m.resv) >= m.cfg.MaxReservations {
		return nil, fmt.Errorf("%w: %d puts in flight", base.ErrUnavailable, len(m.resv))
	}
	if err := m.admitTenant(o.Key, o.Size, quota); err != nil {
		return nil, err
	}
	cands := make([]PlacementCandidate, 0, len(segs))
	for _, s := range segs {
		// Not heard from during this leadership, leaving to restart (it refuses writes until
		// it registers again), draining, or dead: no new puts.
		if !m.Placeable(s.ID) {
			continue
		}
		if slices.Contains(exclude, s.ID) {
			continue
		}
		w := m.workers[s.ID]
		used := w.Usage.DRAMUsed
		free := s.DRAMCapacity - used - w.Reserved
		// Over the high watermark: the worker is evicting; weigh it as full.
		if s.DRAMCapacity > 0 && float64(used+w.Reserved) > m.cfg.HighWatermark*float64(s.DRAMCapacity) {
			free = 0
		}
		cands = append(cands, PlacementCandidate{ID: s.ID, Capacity: s.DRAMCapacity, Free: free})
	}
	replicas := max(int(cfg.Replicas), 1)
	ids, err := PlaceExcluding(cands, exclude, replicas, o.Size, cfg.PreferredWorker, rng)
	if err != nil {
		return nil, err
	}
	m.resv[o.Key] = &Reservation{Version: o.Version, Size: o.Size, Workers: ids,
		Deadline: now.Add(m.cfg.PutTimeout), Upsert: cfg.Upsert}
	for _, id := range ids {
		m.reserve(id, o.Size)
	}
	m.reserveTenant(o.Key, o.Size)
	return ids, nil
}

// Reservation returns the put in flight for key, if any (a copy).
func (m *Machine) Reservation(key string) (Reservation, bool) {
	r, ok := m.resv[key]
	if !ok {
		return Reservation{}, false
	}
	c := *r
	c.Workers = slices.Clone(r.Workers)
	return c, true
}

// EndReservation ends the put of key at version after its PutEnd committed: the bytes are
// the object's now. Nothing happens when key's reservation has another version (it was
// superseded, expired or revoked: its bytes were released then).
func (m *Machine) EndReservation(key string, version base.Version) {
	if r, ok := m.resv[key]; ok && r.Version == version {
		m.release(key, r)
	}
}

// DropReservation forgets the put of key at version (0: whatever version) and owes its
// workers a drop of what they received: a revoke, a refused PutEnd, a superseded or expired
// put. It reports whether there was one.
func (m *Machine) DropReservation(key string, version base.Version) bool {
	r, ok := m.resv[key]
	if !ok || (version != 0 && r.Version != version) {
		return false
	}
	m.release(key, r)
	if r.committing {
		return true // its PutEnd's entry decides (EndCommit)
	}
	for _, id := range r.Workers {
		m.QueueDrop(id, key, r.Version)
	}
	return true
}

// inLeaderGrace reports whether at is within PutTimeout of this leadership's start. The
// previous leader's puts in flight are unknown to this one: within the grace a PutEnd
// without a reservation is accepted (BeginEnd), and a registration's unknown objects are
// spared (the driver's reconciliation).
func (m *Machine) inLeaderGrace(at time.Time) bool {
	return m.leader && at.Sub(m.leaderSince) < m.cfg.PutTimeout
}

// EndPlan is how one PutEnd item commits (BeginEnd).
type EndPlan struct {
	// Replicas is the item's replica list in the raft entry.
	Replicas []base.WorkerID
	// Reserved: the item ends a reservation of this leader, now committing: the driver
	// reports the entry's outcome with EndCommit, or AbandonCommit when it is
	// unknown. Workers are its placed workers (owed drops if the entry refuses the item) and
	// Upsert its PutStart's flag.
	Reserved bool
	Workers  []base.WorkerID
	Upsert   bool
}

// BeginEnd decides how one PutEnd item (the record as the client sent it; empty Replicas
// means every placed replica) commits. The rules, in order:
//  1. A reservation of the key at the item's version: the size must be PutStart's and the
//     replicas among the placed workers (INVALID_PARAMS otherwise); no replicas means every
//     placed one. From here the entry decides the put's fate (it is committing): a supersede,
//     revoke or expiry meanwhile must not send its workers a drop of a version that then
//     commits.
//  2. Otherwise, in a new leader's grace (inLeaderGrace), an item that names its replicas and
//     whose version this leadership did not issue (issuedThisTerm false) is a put the previous
//     leader started: it commits as named (raftmeta checks the workers are active). One this
//     leader issued had its reservation dropped (superseded, revoked, expired) and its
//     workers told to drop the bytes.
//  3. Otherwise, when a named replica's worker left or was lost (goneWorker), its leave or
//     loss released the put's reservation (releaseWorkerReservations): SEGMENT_NOT_FOUND,
//     which tells the client to place the put again (its bytes are intact, only a worker went).
//  4. Otherwise the put is not in progress: INVALID_VERSION (the driver first checks that a
//     retried PutEnd did not commit already: then it is a success).
func (m *Machine) BeginEnd(now time.Time, it base.Object, issuedThisTerm bool) (EndPlan, error) {
	r, ok := m.resv[it.Key]
	switch {
	case ok && r.Version == it.Version:
		if it.Size != r.Size {
			return EndPlan{}, fmt.Errorf("%w: key %q: PutEnd size %d differs from PutStart size %d", base.ErrInvalidParams, it.Key, it.Size, r.Size)
		}
		replicas := it.Replicas
		if len(replicas) == 0 {
			replicas = r.Workers
		}
		for _, w := range replicas {
			if !slices.Contains(r.Workers, w) {
				return EndPlan{}, fmt.Errorf("%w: key %q: worker %s was not placed for this put", base.ErrInvalidParams, it.Key, w)
			}
		}
		r.committing = true
		return EndPlan{Replicas: slices.Clone(replicas), Reserved: true, Workers: slices.Clone(r.Workers), Upsert: r.Upsert}, nil
	case m.inLeaderGrace(now) && len(it.Replicas) > 0 && !issuedThisTerm:
		return EndPlan{Replicas: it.Replicas}, nil
	}
	if id, ok := m.goneWorker(it.Replicas); ok {
		return EndPlan{}, fmt.Errorf("%w: key %q version %d: worker %s left or was lost before the commit (its puts were released); place the put again",
			base.ErrSegmentNotFound, it.Key, it.Version, id)
	}
	return EndPlan{}, fmt.Errorf("%w: key %q version %d: no put in progress (it timed out after %v, was revoked or superseded)",
		base.ErrInvalidVersion, it.Key, it.Version, m.cfg.PutTimeout)
}

// EndCommit ends a commit BeginEnd started. committed: the entry made the object visible
// (the bytes are the object's); else the put failed for good and its workers (the caller's
// copy: the reservation may be gone) are owed drops.
func (m *Machine) EndCommit(key string, version base.Version, workers []base.WorkerID, committed bool) {
	if r, ok := m.resv[key]; ok && r.Version == version {
		r.committing = false
		if committed {
			m.release(key, r)
		} else {
			m.DropReservation(key, version)
		}
		return
	}
	if !committed {
		for _, id := range workers {
			m.QueueDrop(id, key, version)
		}
	}
}

// AbandonCommit ends a commit BeginEnd started whose entry's outcome is unknown (not
// proposed, leadership lost): the put keeps its reservation, if it still has one, and the
// client may retry. One dropped meanwhile owes no drops: its workers keep the bytes until
// their registration with a leader reconciles them.
func (m *Machine) AbandonCommit(key string, version base.Version) {
	if r, ok := m.resv[key]; ok && r.Version == version {
		r.committing = false
	}
}

func (m *Machine) release(key string, r *Reservation) {
	delete(m.resv, key)
	for _, id := range r.Workers {
		m.reserve(id, -r.Size)
	}
	m.reserveTenant(key, -r.Size)
}

// ExpireReservations drops the puts that did not reach PutEnd by their deadline (their
// workers are owed drops) and reports each (PutExpired), in key order.
func (m *Machine) ExpireReservations(now time.Time) []Effect {
	var out []Effect
	for _, key := range m.sortedKeys() {
		r := m.resv[key]
		if now.After(r.Deadline) {
			out = append(out, PutExpired{Key: key, Version: r.Version})
			m.DropReservation(key, r.Version)
		}
	}
	return out
}

// releaseWorkerReservations releases the bytes of the puts placed on a worker that died:
// they cannot complete (their other workers are owed drops when the puts expire or are
// revoked).
func (m *Machine) releaseWorkerReservations(id base.WorkerID) {
	for _, key := range m.sortedKeys() {
		if r := m.resv[key]; slices.Contains(r.Workers, id) {
			m.release(key, r)
		}
	}
}

// goneWorker returns the first of ids whose worker cannot hold a put placed before now: one
// forgotten, dead, left, or registering again after either (releaseWorkerReservations ran
// for it). The states in which a worker keeps its reservations (alive, suspect, draining,
// leaving, unreachable) are not gone.
func (m *Machine) goneWorker(ids []base.WorkerID) (base.WorkerID, bool) {
	for _, id := range ids {
		w := m.workers[id]
		if w == nil {
			return id, true
		}
		switch w.State {
		case Dead, Left, Retired, Registering, Returning:
			return id, true
		}
	}
	return "", false
}

// PutsInFlight returns how many puts hold a reservation.
func (m *Machine) PutsInFlight() int { return len(m.resv) }

func (m *Machine) sortedKeys() []string {
	keys := make([]string, 0, len(m.resv))
	for k := range m.resv {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, strings.Compare)
	return keys
}
