package client

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"

	"github.com/mooncake-go/mooncake/internal/base"
	"github.com/mooncake-go/mooncake/transfer"
)

// Put sessions: Mooncake's layer-wise ranged put (batch_put_session_start,
// batch_put_from_multi_buffer_ranges, batch_put_session_end, batch_put_session_revoke).
//
// Where the bytes are, at each step:
//  1. PutSessionStart places every object (one BatchPutStart): the leader reserves its size on
//     rc.Replicas workers and gives it a version. Nothing is written or allocated yet; the
//     reservation lives PutTimeout (60 s) on the leader.
//  2. PutSessionWrite sends each range straight to every placed worker (transfer.WriteRange):
//     the worker lands it in the object's arena range at its offset, exactly as the stripes of
//     a large put, and keeps the object pending (invisible). The client keeps no copy: a
//     range acknowledged by every replica is in the workers' DRAM. The client records which
//     byte ranges every replica acknowledged.
//  3. PutSessionEnd seals each key (no more writes; it waits for writes in flight), checks
//     that the acknowledged ranges cover the object, has every worker commit it and report
//     the checksum of what landed (SessionCommit; replicas must agree), then commits all the
//     keys that got this far in ONE BatchPutEnd, one raft entry: from that entry on they are
//     visible, whole, to every reader, and none before it.
//  4. PutSessionRevoke (or an end refused for good) drops the reservation on the leader and
//     the bytes on each worker (Drop), so the space is free at once.
//
// A session whose client dies holds nothing for long: the leader drops its reservation after
// PutTimeout and each worker its pending bytes after its pending-write timeout (both 60 s by
// default). A leader change during a session: the new leader accepts the session's PutEnd
// within PutTimeout of its election, as it does for any put its predecessor placed (the record
// is complete in the PutEnd); after that the end is refused with INVALID_VERSION, the
// workers' bytes are dropped and nothing becomes visible.

// maxPutSessions bounds the put sessions (and, separately, the get sessions) one client holds
// open: each costs a little client memory and, on the leader, a reservation.
const maxPutSessions = 1 << 16

// PutRange is one range of a put session: Src is written at Offset of the object.
type PutRange struct {
	Offset int64
	Src    []byte
}

// putSession is one object of an open put session.
type putSession struct {
	key  string
	size int64
	rc   ReplicateConfig
	// pl is the placement: set once, under mu, by PutSessionStart (nil until then: placed),
	// read-only after.
	pl *transfer.PutStartResponse

	mu struct {
		sync.Mutex // protects the fields below
		cond       sync.Cond
		// sealed: PutSessionEnd or PutSessionRevoke began; no write starts after it.
		sealed bool
		// inflight counts writes under way; end and revoke wait for 0.
		inflight int
		// failed: a write failed, so the workers may have dropped the pending object; the
		// session can only be revoked.
		failed error
		// dead: the workers' bytes and the reservation were dropped after an end refused for
		// good; only revoke (which then just forgets the key) is left.
		dead bool
		// covered holds the byte ranges every replica acknowledged, sorted and merged.
		// Invariant: non-overlapping, non-adjacent, ascending.
		covered []span
	}
}

// span is the byte range [off, end).
type span struct{ off, end int64 }

// addSpanLocked merges [off, end) into the covered ranges. REQUIRES: s.mu.
func (s *putSession) addSpanLocked(off, end int64) {
	out := s.mu.covered[:0:0]
	for _, c := range s.mu.covered {
		if c.end < off || c.off > end {
			out = append(out, c)
			continue
		}
		off, end = min(off, c.off), max(end, c.end)
	}
	out = append(out, span{off, end})
	slices.SortFunc(out, func(a, b span) int { return int(min(max(a.off-b.off, -1), 1)) })
	s.mu.covered = out
}

// coveredLocked returns how many bytes of the object the acknowledged ranges cover.
// REQUIRES: s.mu.
func (s *putSession) coveredLocked() int64 {
	var n int64
	for _, c := range s.mu.covered {
		n += c.end - c.off
	}
	return n
}

// placed reports whether PutSessionStart has placed s (it is in the table from its start).
func (s *putSession) placed() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.pl != nil
}

// seal stops new writes and waits for those under way.
func (s *putSession) seal() {
	s.mu.Lock()
	s.mu.sealed = true
	for s.mu.inflight > 0 {
		s.mu.cond.Wait()
	}
	s.mu.Unlock()
}

// sealDead seals s and reports whether it is dead (its bytes dropped already).
func (s *putSession) sealDead() bool {
	s.seal()
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.mu.dead
}

// sessionTables holds a client's open put and get sessions, by key.
type sessionTables struct {
	mu   sync.Mutex // protects puts and gets
	puts map[string]*putSession
	gets map[string]*transfer.LookupResponse
}

// sessions returns the client's session tables, made on first use.
func (c *Client) sessions() *sessionTables {
	t := &c.sess
	t.mu.Lock()
	if t.puts == nil {
		t.puts = map[string]*putSession{}
		t.gets = map[string]*transfer.LookupResponse{}
	}
	t.mu.Unlock()
	return t
}

func (t *sessionTables) put(key string) *putSession {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.puts[key]
}

func (t *sessionTables) forgetPut(key string, s *putSession) {
	t.mu.Lock()
	if t.puts[key] == s {
		delete(t.puts, key)
	}
	t.mu.Unlock()
}

// placedSessions returns the placed put session of each key (nil with an error for a key
// with none, or named a second time, or every key of a batch over the limit).
func (t *sessionTables) placedSessions(keys []string) ([]*putSession, []error) {
	ss := make([]*putSession, len(keys))
	if err := checkBatch(len(keys)); err != nil {
		return ss, fill(len(keys), err)
	}
	errs := make([]error, len(keys))
	seen := make(map[string]bool, len(keys))
	for i, k := range keys {
		s := t.put(k)
		switch {
		case s == nil || !s.placed():
			errs[i] = errNoPutSession(k)
		case seen[k]:
			errs[i] = fmt.Errorf("%w: %q is named twice", base.ErrInvalidParams, k)
		default:
			ss[i] = s
		}
		seen[k] = true
	}
	return ss, errs
}

// errNoPutSession is the error of a call on a key with no open put session.
func errNoPutSession(key string) error {
	return fmt.Errorf("%w: no put session is open for %q in this client (start one with PutSessionStart)", base.ErrInvalidParams, key)
}

// PutSessionStart opens a put session for each key: the object keys[i] of sizes[i] bytes is
// placed (one BatchPutStart) and reserved, invisible until PutSessionEnd. errs[i] is nil when
// keys[i]'s session is open. A key with a session already open in this client fails with
// base.ErrObjectAlreadyExists, as does a key stored already (unless rc.Upsert).
func (c *Client) PutSessionStart(ctx context.Context, keys []string, sizes []int64, rc ReplicateConfig) []error {
	if len(keys) != len(sizes) {
		return fill(len(keys), fmt.Errorf("%w: %d keys for %d sizes", base.ErrInvalidParams, len(keys), len(sizes)))
	}
	if err := checkBatch(len(keys)); err != nil {
		return fill(len(keys), err)
	}
	stored, kerr := c.storedKeys(keys)
	if kerr != nil {
		return fill(len(keys), kerr)
	}
	keys = stored
	rc, err := rc.normalized()
	if err != nil {
		return fill(len(keys), err)
	}
	errs := make([]error, len(keys))
	t := c.sessions()
	cfg := wireConfig(rc)
	req := &transfer.BatchPutStartRequest{}
	var idx []int // request item -> keys index
	claimed := map[string]bool{}
	t.mu.Lock()
	for i, k := range keys {
		if _, err := checkPut(k, sizes[i], rc); err != nil {
			errs[i] = err
			continue
		}
		if t.puts[k] != nil || claimed[k] {
			errs[i] = fmt.Errorf("%w: a put session for %q is already open in this client", base.ErrObjectAlreadyExists, k)
			continue
		}
		if len(t.puts)+len(claimed) >= maxPutSessions {
			errs[i] = fmt.Errorf("%w: %d put sessions open in this client, the limit", base.ErrNoSpace, maxPutSessions)
			continue
		}
		claimed[k] = true
		req.Items = append(req.Items, transfer.PutStartRequest{Object: base.Object{ObjectMeta: base.ObjectMeta{Key: k, Size: sizes[i]}}, Config: cfg})
		idx = append(idx, i)
	}
	// Claim the keys now, so that a concurrent start of the same key fails rather than
	// placing it twice; the placement fills them in below.
	pending := make([]*putSession, len(idx))
	for j, i := range idx {
		s := &putSession{key: keys[i], size: sizes[i], rc: rc}
		s.mu.cond.L = &s.mu.Mutex
		s.mu.sealed = true // not writable until placed
		pending[j] = s
		t.puts[keys[i]] = s
	}
	t.mu.Unlock()
	if len(idx) == 0 {
		return errs
	}
	ctx, cancel := c.withTimeout(ctx)
	defer cancel()
	var resp transfer.BatchPutStartResponse
	err = c.batchPutStart(ctx, req, &resp)
	if err == nil && len(resp.Items) != len(idx) {
		err = fmt.Errorf("%w: batch put start: %d answers for %d items", base.ErrInternal, len(resp.Items), len(idx))
	}
	for j, i := range idx {
		s := pending[j]
		var ierr error
		if err != nil {
			ierr = err
		} else if ierr = resp.Items[j].Err.Err(); ierr == nil && len(resp.Items[j].Replicas) == 0 {
			ierr = fmt.Errorf("%w: the master placed no replica", base.ErrInternal)
		}
		if ierr != nil {
			errs[i] = fmt.Errorf("put session start %q: %w", keys[i], ierr)
			t.forgetPut(keys[i], s)
			continue
		}
		pl := resp.Items[j].PutStartResponse
		s.mu.Lock()
		s.pl = &pl
		s.mu.sealed = false
		s.mu.Unlock()
	}
	return errs
}

// rangeWriter is the part of transfer.Client that writes a range without committing.
type rangeWriter interface {
	WriteRange(ctx context.Context, addr string, req *transfer.WriteRequest, off int64, src []byte) error
}

// WriteRange writes src at off of the object req describes, uncommitted (transfer.Client.WriteRange).
func (r transferRPC) WriteRange(ctx context.Context, addr string, req *transfer.WriteRequest, off int64, src []byte) error {
	return r.c.WriteRange(ctx, addr, *req, off, src)
}

// PutSessionWrite writes ranges[i] of the object keys[i], whose put session is open, to every
// placed worker, all keys and ranges in parallel. written[i] is the number of bytes of
// ranges[i] (their sum) when errs[i] is nil. A range outside the object, or an empty one,
// fails with base.ErrInvalidParams and writes nothing of that key. A write that fails on a
// worker fails the key's session for good (the worker may have dropped what it had):
// PutSessionEnd then fails it, and PutSessionRevoke frees it. Ranges may overlap (the last
// write of a byte wins) and come in any order, from any number of goroutines at once.
// The caller's buffers are only read, and only until PutSessionWrite returns.
func (c *Client) PutSessionWrite(ctx context.Context, keys []string, ranges [][]PutRange) (written []int64, errs []error) {
	written = make([]int64, len(keys))
	if len(keys) != len(ranges) {
		return written, fill(len(keys), fmt.Errorf("%w: %d keys for %d range lists", base.ErrInvalidParams, len(keys), len(ranges)))
	}
	if err := checkBatch(len(keys)); err != nil {
		return written, fill(len(keys), err)
	}
	stored, kerr := c.storedKeys(keys)
	if kerr != nil {
		return written, fill(len(keys), kerr)
	}
	keys = stored
	errs = make([]error, len(keys))
	wr, ok := c.rpc.(rangeWriter)
	if !ok {
		return written, fill(len(keys), fmt.Errorf("%w: this transport cannot write ranges", base.ErrNotSupported))
	}
	t := c.sessions()
	ctx, cancel := c.withTimeout(ctx)
	defer cancel()
	parallel(len(keys), func(i int) {
		written[i], errs[i] = c.putSessionWriteKey(ctx, wr, t, keys[i], ranges[i])
	})
	return written, errs
}

func (c *Client) putSessionWriteKey(ctx context.Context, wr rangeWriter, t *sessionTables, key string, rs []PutRange) (int64, error) {
	s := t.put(key)
	if s == nil || !s.placed() {
		return 0, errNoPutSession(key)
	}
	var total int64
	for _, r := range rs {
		n := int64(len(r.Src))
		if n == 0 || r.Offset < 0 || r.Offset > s.size || n > s.size-r.Offset {
			return 0, fmt.Errorf("%w: range [%d, +%d) of %q is outside its %d bytes", base.ErrInvalidParams, r.Offset, n, key, s.size)
		}
		total += n
	}
	s.mu.Lock()
	switch {
	case s.mu.failed != nil:
		s.mu.Unlock()
		return 0, fmt.Errorf("put session of %q failed earlier (revoke it): %w", key, s.mu.failed)
	case s.mu.sealed:
		s.mu.Unlock()
		return 0, fmt.Errorf("%w: the put session of %q is ending or revoked", base.ErrInvalidParams, key)
	}
	s.mu.inflight++
	s.mu.Unlock()

	req := writeReq(key, s.pl.Version, s.size, s.rc, 0)
	err := forEachReplica(ctx, s.pl.Replicas, func(ctx context.Context, rep base.Placement) error {
		for _, r := range rs {
			if err := wr.WriteRange(ctx, rep.Address, req, r.Offset, r.Src); err != nil {
				return err
			}
		}
		return nil
	})

	s.mu.Lock()
	if err != nil && s.mu.failed == nil {
		s.mu.failed = err
	}
	if err == nil {
		for _, r := range rs {
			s.addSpanLocked(r.Offset, r.Offset+int64(len(r.Src)))
		}
	}
	s.mu.inflight--
	s.mu.cond.Broadcast()
	s.mu.Unlock()
	if err != nil {
		return 0, fmt.Errorf("put session write %q: %w", key, err)
	}
	return total, nil
}

// PutSessionEnd ends the put sessions of keys: each whose ranges cover its object and whose
// workers all commit it is made visible, all of them in one raft entry; errs[i] is nil when
// keys[i] is visible, whole. A key whose ranges leave bytes unwritten fails with
// base.ErrInvalidParams; one that failed a write fails with that error; both stay for
// PutSessionRevoke. A key refused by the master for good (its reservation is gone: timed out,
// or a new leader past its grace; or the key was stored meanwhile) is dropped on the workers
// at once and fails; PutSessionRevoke then only forgets it. A failure that may pass (no
// master reachable, a timeout) leaves the session to end or revoke again.
func (c *Client) PutSessionEnd(ctx context.Context, keys []string) []error {
	stored, kerr := c.storedKeys(keys)
	if kerr != nil {
		return fill(len(keys), kerr)
	}
	keys = stored
	t := c.sessions()
	ss, errs := t.placedSessions(keys)
	ctx, cancel := c.withTimeout(ctx)
	defer cancel()
	// Seal and commit on the workers, every key in parallel.
	sums := make([]uint64, len(keys))
	parallel(len(keys), func(i int) {
		if ss[i] != nil {
			sums[i], errs[i] = c.sessionCommit(ctx, ss[i])
		}
	})
	var reqs []*transfer.PutEndRequest
	var idx []int
	for i, s := range ss {
		if s == nil || errs[i] != nil {
			continue
		}
		reqs = append(reqs, &transfer.PutEndRequest{Object: base.Object{ObjectMeta: base.ObjectMeta{Key: s.key, Version: s.pl.Version,
			Size: s.size, Checksum: sums[i]}, Replicas: replicaIDs(s.pl), Tokens: s.rc.Tokens, Model: s.rc.Model},
			Config: wireConfig(s.rc)})
		idx = append(idx, i)
	}
	if len(reqs) == 0 {
		return errs
	}
	defer c.lookups.drop(keys...)
	res, err := c.sendPutEnds(ctx, reqs)
	for j, i := range idx {
		s := ss[i]
		ierr := err
		if err == nil {
			ierr = res[j].err
		}
		switch {
		case ierr == nil:
			t.forgetPut(s.key, s)
		case retryableEnd(ierr):
			errs[i] = fmt.Errorf("put session end %q (the session stays open: end or revoke it again): %w", s.key, ierr)
		default:
			errs[i] = fmt.Errorf("put session end %q: %w", s.key, ierr)
			c.dropSession(s)
			s.mu.Lock()
			s.mu.dead = true
			s.mu.Unlock()
		}
	}
	return errs
}

// retryableEnd reports whether a PutEnd error may pass, so the session is kept for another
// end: no master answered, or the call's outcome is unknown.
func retryableEnd(err error) bool {
	return errors.Is(err, base.ErrTimeout) || errors.Is(err, base.ErrUnavailable) || errors.Is(err, base.ErrNotLeader) ||
		errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled)
}

// sessionCommit seals s and commits it on each placed worker; it returns the checksum the
// workers computed (they must agree).
func (c *Client) sessionCommit(ctx context.Context, s *putSession) (uint64, error) {
	s.seal()
	s.mu.Lock()
	failed, dead, covered := s.mu.failed, s.mu.dead, s.coveredLocked()
	s.mu.Unlock()
	switch {
	case dead:
		return 0, fmt.Errorf("%w: the put session of %q was refused and dropped already (revoke it)", base.ErrInvalidVersion, s.key)
	case failed != nil:
		return 0, fmt.Errorf("put session of %q failed a write (revoke it): %w", s.key, failed)
	case covered != s.size:
		return 0, fmt.Errorf("%w: the ranges written to %q cover %d of its %d bytes", base.ErrInvalidParams, s.key, covered, s.size)
	}
	at := make(map[base.WorkerID]int, len(s.pl.Replicas))
	for k, rep := range s.pl.Replicas {
		at[rep.WorkerID] = k
	}
	sums := make([]uint64, len(s.pl.Replicas))
	err := forEachReplica(ctx, s.pl.Replicas, func(ctx context.Context, rep base.Placement) error {
		var resp transfer.SessionCommitResponse
		if err := c.rpc.Call(ctx, rep.Address, &transfer.SessionCommitRequest{Key: s.key, Version: s.pl.Version}, &resp); err != nil {
			return err
		}
		if resp.Size != s.size {
			return fmt.Errorf("%w: worker committed %d bytes, want %d", base.ErrInternal, resp.Size, s.size)
		}
		sums[at[rep.WorkerID]] = resp.Checksum
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("put session end %q: %w", s.key, err)
	}
	for _, sum := range sums[1:] {
		if sum != sums[0] {
			return 0, fmt.Errorf("%w: put session end %q: the replicas hold different bytes (checksums %#x, %#x)",
				base.ErrCorruption, s.key, sums[0], sum)
		}
	}
	return sums[0], nil
}

// dropSession drops s's reservation on the leader and its bytes on each placed worker, best
// effort: what a call misses, the leader's put timeout and the workers' pending-write timeout
// drop anyway. A worker Drop also frees bytes a worker committed for s (SessionCommit) that no
// PutEnd made visible.
func (c *Client) dropSession(s *putSession) {
	c.revoke(s.key, s.pl.Version)
	ctx, cancel := context.WithTimeout(context.Background(), revokeTimeout)
	defer cancel()
	_ = forEachReplica(ctx, s.pl.Replicas, func(ctx context.Context, rep base.Placement) error {
		err := c.rpc.Call(ctx, rep.Address, &transfer.DropRequest{Key: s.key, Version: s.pl.Version}, nil)
		if err != nil && !errors.Is(err, base.ErrObjectNotFound) {
			c.log.Debug("client: put session drop failed", "key", s.key, "worker", rep.WorkerID, "err", err)
		}
		return nil
	})
}

// dropOpenSessions drops every put session still open (Close): best effort, each bounded by
// revokeTimeout, all in parallel.
func (c *Client) dropOpenSessions() {
	t := &c.sess
	t.mu.Lock()
	var open []*putSession
	for _, s := range t.puts {
		open = append(open, s)
	}
	t.puts, t.gets = nil, nil
	t.mu.Unlock()
	parallel(len(open), func(i int) {
		s := open[i]
		if !s.placed() {
			return
		}
		if !s.sealDead() {
			c.dropSession(s)
		}
	})
}

// PutSessionRevoke abandons the put sessions of keys: nothing of them becomes visible, the
// reservations and the bytes written are dropped at once. errs[i] is nil when keys[i]'s
// session is gone; base.ErrInvalidParams when none was open. A key whose end committed after
// all (its reply was lost) is removed: revoke means the caller does not want it.
func (c *Client) PutSessionRevoke(ctx context.Context, keys []string) []error {
	stored, kerr := c.storedKeys(keys)
	if kerr != nil {
		return fill(len(keys), kerr)
	}
	keys = stored
	t := c.sessions()
	ss, errs := t.placedSessions(keys)
	ctx, cancel := c.withTimeout(ctx)
	defer cancel()
	defer c.lookups.drop(keys...)
	parallel(len(keys), func(i int) {
		k, s := keys[i], ss[i]
		if s == nil {
			return
		}
		if !s.sealDead() {
			var lr transfer.LookupResponse
			if err := c.masterCall(ctx, &transfer.LookupRequest{Key: k}, &lr, nil); err == nil && lr.Version == s.pl.Version {
				if err := c.remove(ctx, k); err != nil && !errors.Is(err, base.ErrObjectNotFound) {
					errs[i] = fmt.Errorf("put session revoke %q: removing the object its lost end committed: %w", k, err)
					return
				}
			}
			c.dropSession(s)
		}
		t.forgetPut(k, s)
	})
	return errs
}
