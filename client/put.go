package client

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/mooncake-go/mooncake/internal/base"
	"github.com/mooncake-go/mooncake/transfer"
)

// revokeTimeout bounds the best-effort PutRevoke after a failed put (the workers drop pending
// bytes on their own after the master's put timeout anyway).
const revokeTimeout = 5 * time.Second

func wireConfig(rc ReplicateConfig) base.PutConfig {
	return base.PutConfig{
		Replicas:        uint8(rc.Replicas),
		PreferredWorker: rc.PreferredWorker,
		SoftPinTTL:      rc.SoftPinTTL,
		HardPin:         rc.HardPin,
		Persistence:     rc.Persistence,
		Upsert:          rc.Upsert,
	}
}

func checkPut(key string, size int64, rc ReplicateConfig) (ReplicateConfig, error) {
	if err := base.ValidateKey(key); err != nil {
		return rc, err
	}
	if size <= 0 {
		return rc, fmt.Errorf("%w: put %q: the value is empty", base.ErrInvalidParams, key)
	}
	return rc.normalized()
}

// Put stores value under key on rc.Replicas distinct workers. It returns once the object is
// committed (visible to every reader); on any error nothing becomes visible. A key that exists
// fails with base.ErrObjectAlreadyExists unless rc.Upsert. value is not retained.
func (c *Client) Put(ctx context.Context, key string, value []byte, rc ReplicateConfig) error {
	key, err := c.storedKey(key)
	if err != nil {
		return err
	}
	rc, err = checkPut(key, int64(len(value)), rc)
	if err != nil {
		return err
	}
	ctx, cancel := c.withTimeout(ctx)
	defer cancel()
	sum := checksumAsync(value)
	defer sum.wait() // value is not retained: the hash ends before Put returns
	return c.put(ctx, key, int64(len(value)), rc, func(ctx context.Context, pl *transfer.PutStartResponse) (uint64, error) {
		s := sum.wait()
		return s, c.writeReplicas(ctx, key, pl, rc, value, s)
	})
}

// asyncHashMin is the smallest value whose checksum is computed beside the PutStart round
// trip instead of before it: HighwayHash runs at ~8 GB/s, so from 256 KiB (~30 µs) the hash
// is worth a goroutine, and a 16 MiB value's ~2 ms leave the put's critical path.
const asyncHashMin = 256 << 10

// pendingSum is a checksum being computed (checksumAsync).
type pendingSum struct {
	c    chan uint64 // nil: sum is ready
	sum  uint64
	done bool
}

// checksumAsync starts base.Checksum(p): on a goroutine for a large p, else at once.
func checksumAsync(p []byte) *pendingSum {
	if len(p) < asyncHashMin {
		return &pendingSum{sum: base.Checksum(p), done: true}
	}
	ps := &pendingSum{c: make(chan uint64, 1)}
	go func() { ps.c <- base.Checksum(p) }()
	return ps
}

// wait returns the checksum once computed. Not safe for concurrent use; any number of calls.
func (ps *pendingSum) wait() uint64 {
	if !ps.done {
		ps.sum, ps.done = <-ps.c, true
	}
	return ps.sum
}

// PutFrom stores size bytes read from r under key. r must yield at least size bytes (only
// size are read); fewer is an error and nothing becomes visible. The value is read after the
// master placed it (so a value larger than every segment is refused before anything is read
// or allocated) into one buffer of size bytes: the transfer layer writes whole objects, and
// stripes them over several connections itself.
func (c *Client) PutFrom(ctx context.Context, key string, r io.Reader, size int64, rc ReplicateConfig) error {
	key, err := c.storedKey(key)
	if err != nil {
		return err
	}
	rc, err = checkPut(key, size, rc)
	if err != nil {
		return err
	}
	ctx, cancel := c.withTimeout(ctx)
	defer cancel()
	var buf []byte // read once, at the first placement; a re-placed put writes it again
	var sum uint64
	return c.put(ctx, key, size, rc, func(ctx context.Context, pl *transfer.PutStartResponse) (uint64, error) {
		if buf == nil {
			b := make([]byte, size)
			if _, err := io.ReadFull(r, b); err != nil {
				return 0, fmt.Errorf("reading the value: %w", err)
			}
			buf, sum = b, base.Checksum(b)
		}
		return sum, c.writeReplicas(ctx, key, pl, rc, buf, sum)
	})
}

// put runs PutStart, write (which returns the checksum of what it wrote), PutEnd; it revokes
// the put when the write or PutEnd fails. A write that failed on a worker another would not
// fail on is placed again without it (replace.go), write called once per placement.
func (c *Client) put(ctx context.Context, key string, size int64, rc ReplicateConfig,
	write func(ctx context.Context, pl *transfer.PutStartResponse) (uint64, error)) error {
	// Whatever happens, no lookup sent before the put ends is cached (lookupCache.token):
	// this client's next get of key reads what it committed (read your writes), from the
	// placement seeded here, or asks the leader when the put failed.
	var (
		committed *transfer.LookupResponse
		tok       uint64
		sent      time.Time
	)
	defer func() { c.lookups.seed(key, committed, tok, sent) }()
	cfg := wireConfig(rc)
	g := c.groupCommit()
	var x exclusion
	for recommits := 0; ; {
		rec := base.Object{ObjectMeta: base.ObjectMeta{Key: key, Size: size}}
		pl, err := g.starts.do(ctx, &transfer.PutStartRequest{Object: rec, Config: cfg, Exclude: x.workers})
		if err != nil {
			return fmt.Errorf("put %q: %w", key, x.wrap(err))
		}
		if len(pl.Replicas) == 0 {
			return fmt.Errorf("%w: put %q: the master placed no replica", base.ErrInternal, key)
		}
		wctx, cancel := writeAttempt(ctx)
		sum, err := write(wctx, pl)
		cancel()
		if err != nil {
			c.revoke(key, pl.Version)
			if x.add(ctx, err) {
				c.log.Debug("client: a write failed; placing the put again without the worker", "key", key, "exclude", x.workers, "err", err)
				continue
			}
			return fmt.Errorf("put %q: %w", key, err)
		}
		// The same record, now placed and written.
		rec.Version, rec.Checksum, rec.Replicas, rec.Tokens, rec.Model = pl.Version, sum, replicaIDs(pl), rc.Tokens, rc.Model
		tok, sent = c.lookups.token(key), time.Now()
		_, err = g.ends.do(ctx, &transfer.PutEndRequest{Object: rec, Config: cfg})
		if err != nil {
			c.revoke(key, pl.Version)
			if recommits < maxRecommits && recommit(ctx, err) {
				recommits++
				c.log.Debug("client: a placed worker left before the commit; placing the put again", "key", key, "err", err)
				continue
			}
			return fmt.Errorf("put %q: %w", key, err)
		}
		committed = &transfer.LookupResponse{ObjectMeta: rec.ObjectMeta, Replicas: pl.Replicas}
		return nil
	}
}

func replicaIDs(pl *transfer.PutStartResponse) []base.WorkerID {
	ids := make([]base.WorkerID, len(pl.Replicas))
	for i, r := range pl.Replicas {
		ids[i] = r.WorkerID
	}
	return ids
}

// groupCommits holds the coalescers of PutStart and PutEnd calls (coalesce.go), built on
// first use.
type groupCommits struct {
	once   sync.Once
	starts coalescer[*transfer.PutStartRequest, *transfer.PutStartResponse]
	ends   coalescer[*transfer.PutEndRequest, struct{}]
}

func (c *Client) groupCommit() *groupCommits {
	g := &c.group
	g.once.Do(func() {
		g.starts.send, g.starts.key, g.starts.timeout = c.sendPutStarts, func(r *transfer.PutStartRequest) string { return r.Key }, c.cfg.Timeout
		g.ends.send, g.ends.key, g.ends.timeout = c.sendPutEnds, func(r *transfer.PutEndRequest) string { return r.Key }, c.cfg.Timeout
	})
	return g
}

// sendPutStarts places the puts of reqs: one PutStart for one put (exactly the call a put
// made before coalescing), one BatchPutStart for several (the master places them in order,
// as it would the same calls one after the other; like a single PutStart, the call waits
// within ctx for a first live worker of a starting cluster).
func (c *Client) sendPutStarts(ctx context.Context, reqs []*transfer.PutStartRequest) ([]itemResult[*transfer.PutStartResponse], error) {
	out := make([]itemResult[*transfer.PutStartResponse], len(reqs))
	if len(reqs) == 1 {
		var pl transfer.PutStartResponse
		if err := c.masterCall(ctx, reqs[0], &pl, nil); err != nil {
			return nil, err
		}
		out[0].res = &pl
		return out, nil
	}
	req := &transfer.BatchPutStartRequest{Items: make([]transfer.PutStartRequest, len(reqs))}
	for i, r := range reqs {
		req.Items[i] = *r
	}
	var resp transfer.BatchPutStartResponse
	// batchPutStart waits for a first live worker as masterCall does for a single PutStart.
	if err := c.batchPutStart(ctx, req, &resp); err != nil {
		return nil, err
	}
	if len(resp.Items) != len(reqs) {
		return nil, fmt.Errorf("%w: batch put start: %d answers for %d items", base.ErrInternal, len(resp.Items), len(reqs))
	}
	for i := range resp.Items {
		if err := resp.Items[i].Err.Err(); err != nil {
			out[i].err = err
			continue
		}
		out[i].res = &resp.Items[i].PutStartResponse
	}
	return out, nil
}

// sendPutEnds commits the puts of reqs: one PutEnd for one put, one BatchPutEnd (one raft
// entry) for several. An item refused by the master fails alone; an ambiguous call is
// resolved per item by ownCommit, as for a PutEnd of its own.
func (c *Client) sendPutEnds(ctx context.Context, reqs []*transfer.PutEndRequest) ([]itemResult[struct{}], error) {
	out := make([]itemResult[struct{}], len(reqs))
	var st attemptState
	if len(reqs) == 1 {
		r := reqs[0]
		err := c.masterCall(ctx, r, transfer.NewEmpty(transfer.OpPutEnd), &st)
		if c.ownCommit(ctx, err, &st, r.Key, r.Version) {
			err = nil
		}
		out[0].err = err
		return out, nil
	}
	req := &transfer.BatchPutEndRequest{Items: make([]transfer.PutEndRequest, len(reqs))}
	for i, r := range reqs {
		req.Items[i] = *r
	}
	resp := transfer.NewBatchResponse(transfer.OpBatchPutEnd, nil)
	err := c.masterCall(ctx, req, resp, &st)
	if err == nil && len(resp.Items) != len(reqs) {
		err = fmt.Errorf("%w: batch put end: %d answers for %d items", base.ErrInternal, len(resp.Items), len(reqs))
	}
	for i, r := range reqs {
		ierr := err
		if err == nil {
			ierr = resp.Items[i].Err()
		}
		if c.ownCommit(ctx, ierr, &st, r.Key, r.Version) {
			ierr = nil
		}
		out[i].err = ierr
	}
	return out, nil
}

// ownCommit reports whether a PutEnd answered err actually committed our object: an earlier
// attempt failed ambiguously (the leader may have committed it before dying), the retry found
// the key taken (or, for an upsert, the reservation gone), and the object committed under key
// has version v. Put and BatchPut share this rule.
func (c *Client) ownCommit(ctx context.Context, err error, st *attemptState, key string, v base.Version) bool {
	if err == nil || !st.ambiguous || !(errors.Is(err, base.ErrObjectAlreadyExists) || errors.Is(err, base.ErrInvalidVersion)) {
		return false
	}
	var lr transfer.LookupResponse
	return c.masterCall(ctx, &transfer.LookupRequest{Key: key}, &lr, nil) == nil && lr.Version == v
}

// revoke tells the leader to drop a put that will not be committed. Best effort: the master
// drops it after its put timeout anyway.
func (c *Client) revoke(key string, v base.Version) {
	ctx, cancel := context.WithTimeout(context.Background(), revokeTimeout)
	defer cancel()
	if err := c.masterCall(ctx, &transfer.PutRevokeRequest{Key: key, Version: v}, transfer.NewEmpty(transfer.OpPutRevoke), nil); err != nil {
		c.log.Debug("client: put revoke failed", "key", key, "version", v, "err", err)
	}
}

func writeReq(key string, v base.Version, size int64, rc ReplicateConfig, sum uint64) *transfer.WriteRequest {
	return &transfer.WriteRequest{Key: key, Version: v, TotalSize: size, Persistence: rc.Persistence,
		SoftPinTTL: rc.SoftPinTTL, HardPin: rc.HardPin, Checksum: sum, Model: rc.Model}
}

// writeReplicas writes value to every placed replica in parallel: through shared memory to a
// worker on this host (shmput.go), else over TCP, where the transfer client sends a value up
// to its stripe threshold in one committing Write frame, a larger one in stripes over several
// connections followed by a Commit. All replicas must succeed.
func (c *Client) writeReplicas(ctx context.Context, key string, pl *transfer.PutStartResponse, rc ReplicateConfig, value []byte, sum uint64) error {
	return forEachReplica(ctx, pl.Replicas, func(ctx context.Context, r base.Placement) error {
		return c.writeReplica(ctx, r, writeReq(key, pl.Version, int64(len(value)), rc, sum), value)
	})
}

// forEachReplica runs fn for every replica in parallel and returns the first error (naming
// the worker); the others are cancelled.
func forEachReplica(ctx context.Context, reps []base.Placement, fn func(ctx context.Context, r base.Placement) error) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	errs := make([]error, len(reps))
	var wg sync.WaitGroup
	for i, r := range reps {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := fn(ctx, r); err != nil {
				errs[i] = &replicaError{worker: r.WorkerID, addr: r.Address, err: err}
				cancel()
			}
		}()
	}
	wg.Wait()
	// Report a real cause before the cancellations it caused.
	for _, err := range errs {
		if err != nil && !errors.Is(err, context.Canceled) {
			return err
		}
	}
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}
