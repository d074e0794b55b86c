package master

import (
	"context"
	"errors"
	"fmt"

	"github.com/mooncake-go/mooncake/internal/base"
	"github.com/mooncake-go/mooncake/raftmeta"
	"github.com/mooncake-go/mooncake/server/lifecycle"
	"github.com/mooncake-go/mooncake/transfer"
)

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

// putStart validates and places one put (the record's Key and Size, r.Config) and reserves
// its bytes. Leader only.
func (m *Master) putStart(r *transfer.PutStartRequest) (transfer.PutStartResponse, error) {
	if err := m.validateObject(r.Key, r.Size); err != nil {
		return transfer.PutStartResponse{}, err
	}
	// NB: r.Config.Replicas is a uint8, so it never exceeds raftmeta.MaxReplicas (255); 0 is
	// the default, 1 (lifecycle.PlacePut).
	if !m.ensureLeader() {
		return transfer.PutStartResponse{}, m.notLeader()
	}
	if !r.Config.Upsert {
		if _, ok := m.node.Lookup(r.Key); ok {
			return transfer.PutStartResponse{}, fmt.Errorf("%w: key %q", base.ErrObjectAlreadyExists, r.Key)
		}
	}
	version, err := m.node.NewVersion()
	if err != nil {
		return transfer.PutStartResponse{}, err
	}
	segs := m.activeSegments()
	now := m.now()
	quota := m.tenantAdmission(r.Key)

	m.mu.Lock()
	defer m.mu.Unlock()
	rec := r.Object // Key and Size: the rest of the record comes with PutEnd
	rec.Version = version
	ids, err := m.mu.lc.PlacePut(now, rec, r.Config, r.Exclude, quota, segs, m.mu.rng)
	if err != nil {
		m.countQuotaReject(r.Key, err)
		return transfer.PutStartResponse{}, err
	}
	addr := map[base.WorkerID]string{}
	for _, s := range segs {
		addr[s.ID] = s.Address
	}
	reply := transfer.PutStartResponse{Version: version, Replicas: make([]base.Placement, len(ids))}
	for i, id := range ids {
		reply.Replicas[i] = base.Placement{WorkerID: id, Address: addr[id]}
	}
	return reply, nil
}

// queueDrops owes each worker holding o a drop of o's version.
func (m *Master) queueDrops(objs []raftmeta.Object) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, o := range objs {
		for _, id := range o.Replicas {
			m.mu.lc.QueueDrop(id, o.Key, o.Version)
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

// putEnd commits the objects of items in ONE raft entry. It returns one error per item. Each
// item is the record as the client sent it, pins set (putEndRecord); empty Replicas means
// every placed replica.
func (m *Master) putEnd(ctx context.Context, items []base.Object, upsert bool) ([]error, error) {
	if !m.ensureLeader() {
		return nil, m.notLeader()
	}
	errs := make([]error, len(items))
	cmd := raftmeta.PutEnd{Upsert: upsert, Items: make([]base.Object, 0, len(items))}
	idx := make([]int, 0, len(items)) // cmd item -> items index
	resv := make([]bool, len(items))  // the item ends a reservation of this leader
	// workers[i]: the reservation's workers (owed drops if the entry refuses the item).
	workers := make([][]base.WorkerID, len(items))
	now := m.now()
	m.mu.Lock()
	for i, it := range items {
		if err := m.validateObject(it.Key, it.Size); err != nil {
			errs[i] = err
			continue
		}
		plan, err := m.mu.lc.BeginEnd(now, it, m.node.IssuedThisTerm(it.Version))
		switch {
		case errors.Is(err, base.ErrInvalidVersion) && m.alreadyCommitted(it):
			// A retried PutEnd whose first attempt committed (the reply was lost): success.
			continue
		case err != nil:
			errs[i] = err
			continue
		}
		if plan.Reserved {
			resv[i] = true
			workers[i] = plan.Workers
			if len(items) == 1 && plan.Upsert {
				// One raft entry has one Upsert flag: a single PutEnd inherits its PutStart's.
				// In a batch each item's flag is the PutEnd's (the handler splits batches by it).
				upsert = true
			}
		}
		rec := it
		rec.Replicas = plan.Replicas
		cmd.Items = append(cmd.Items, rec)
		idx = append(idx, i)
	}
	m.mu.Unlock()
	cmd.Upsert = upsert
	if len(cmd.Items) == 0 {
		return errs, nil // nothing began committing: every resv item is in cmd.Items
	}
	cctx, cancel := commitContext(ctx)
	defer cancel()
	res, err := m.node.Apply(cctx, cmd)
	if err != nil {
		// Outcome unknown or not proposed: keep the reservations; the client may retry.
		m.mu.Lock()
		for i, it := range items {
			if resv[i] {
				m.mu.lc.AbandonCommit(it.Key, it.Version)
			}
		}
		m.mu.Unlock()
		return nil, err
	}
	// An upsert replaces the stored version: its replicas are owed a drop (a worker keeps a
	// version it replaced locally until then: tier/supersede.go). What the entry replaced,
	// not a lookup before it: another upsert of the key may commit in between.
	if len(res.Replaced) > 0 {
		m.queueDropsCommitted(res.Replaced)
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
		if !resv[i] {
			continue
		}
		// Refused for good (duplicate, workers gone): the bytes are nobody's, drops owed.
		m.mu.lc.EndCommit(items[i].Key, items[i].Version, workers[i], itemErr == nil)
	}
	return errs, nil
}

// alreadyCommitted reports whether the metadata holds the item's key at its version and checksum.
func (m *Master) alreadyCommitted(it base.Object) bool {
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
	m.mu.lc.DropReservation(key, version)
	return nil
}

// expireReservations drops puts that did not reach PutEnd within PutTimeout.
func (m *Master) expireReservations() {
	now := m.now()
	m.execute(context.Background(), m.lcEvent(func(lc *lifecycle.Machine) []lifecycle.Effect { return lc.ExpireReservations(now) }))
}
