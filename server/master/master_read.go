package master

import (
	"context"
	"errors"
	"fmt"
	"regexp"

	"github.com/mooncake-go/mooncake/internal/base"
	"github.com/mooncake-go/mooncake/raftmeta"
	"github.com/mooncake-go/mooncake/transfer"
)

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

// lookupLocal resolves keys from the local FSM (after readCheck): each object's record with
// its replicas placed on active workers.
func (m *Master) lookupLocal(keys []string) ([]transfer.LookupResponse, []error) {
	addrs := map[base.WorkerID]string{}
	for _, s := range m.node.Segments() {
		if s.State == raftmeta.SegmentActive {
			addrs[s.ID] = s.Address
		}
	}
	out := make([]transfer.LookupResponse, len(keys))
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
		r := transfer.LookupResponse{ObjectMeta: o.ObjectMeta}
		for _, id := range o.Replicas {
			if a, ok := addrs[id]; ok {
				r.Replicas = append(r.Replicas, base.Placement{WorkerID: id, Address: a})
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
	for i, k := range keys {
		if err := base.ValidateKey(k); err != nil {
			errs[i] = err
			continue
		}
		valid = append(valid, k)
		idx = append(idx, i)
	}
	if len(valid) == 0 {
		return errs, nil
	}
	cctx, cancel := commitContext(ctx)
	defer cancel()
	res, err := m.node.Apply(cctx, raftmeta.Remove{Keys: valid})
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
	// What the entry removed, at the versions it removed (an upsert between a lookup here
	// and the commit would have left the committed version without a drop).
	m.queueDrops(res.Gone)
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

// removeByRegex removes every key of the default tenant matching pattern in one raft commit
// (master_tenants.go: the default tenant's is the only key space clients of the old calls know).
func (m *Master) removeByRegex(ctx context.Context, pattern string) (int, error) {
	if _, err := regexp.Compile(pattern); err != nil {
		return 0, fmt.Errorf("%w: regex %q: %v", base.ErrInvalidParams, pattern, err)
	}
	return m.removeTenant(ctx, base.DefaultTenant, pattern, false)
}

// removeAll removes every object of the default tenant in one raft commit.
func (m *Master) removeAll(ctx context.Context) (int, error) {
	return m.removeTenant(ctx, base.DefaultTenant, "", true)
}

// removeMatching commits cmd, a removal of many keys, and owes the workers of the objects it
// removed their drops: the objects the entry removed (Result.Gone), so one put between the
// proposal and the commit is dropped too. It returns how many objects the commit removed.
func (m *Master) removeMatching(ctx context.Context, cmd raftmeta.Command) (int, error) {
	if !m.ensureLeader() {
		return 0, m.notLeader()
	}
	cctx, cancel := commitContext(ctx)
	defer cancel()
	res, err := m.node.Apply(cctx, cmd)
	if err != nil {
		return 0, err
	}
	if res.Err != nil {
		return 0, res.Err
	}
	m.queueDrops(res.Gone)
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
