package client

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/mooncake-go/mooncake/internal/base"
	"github.com/mooncake-go/mooncake/transfer"
)

// batchParallelism bounds the objects of a batch moved at once.
const batchParallelism = 8

// maxBatch bounds the items of one batch call (one raft entry for BatchPutEnd).
const maxBatch = 4096

func checkBatch(n int) error {
	if n > maxBatch {
		return fmt.Errorf("%w: batch of %d items is over the limit of %d", base.ErrInvalidParams, n, maxBatch)
	}
	return nil
}

// checkBatchKeys checks the size of a batch of keys and every key in it.
func checkBatchKeys(keys []string) error {
	if err := checkBatch(len(keys)); err != nil {
		return err
	}
	for _, k := range keys {
		if err := base.ValidateKey(k); err != nil {
			return err
		}
	}
	return nil
}

// fill returns n copies of err.
func fill(n int, err error) []error {
	out := make([]error, n)
	for i := range out {
		out[i] = err
	}
	return out
}

// parallel runs fn(i) for i in [0, n) with at most batchParallelism at once.
func parallel(n int, fn func(i int)) {
	sem := make(chan struct{}, batchParallelism)
	var wg sync.WaitGroup
	for i := range n {
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			fn(i)
		}()
	}
	wg.Wait()
}

// BatchPut stores values[i] under keys[i], all with rc. It returns one error per item (nil:
// committed). The objects that were written are committed together in one raft entry (items
// placed again because a worker they were written to left before that commit, in a later
// one); an item that fails is revoked and not visible.
func (c *Client) BatchPut(ctx context.Context, keys []string, values [][]byte, rc ReplicateConfig) []error {
	if len(keys) != len(values) {
		return fill(len(keys), fmt.Errorf("%w: %d keys for %d values", base.ErrInvalidParams, len(keys), len(values)))
	}
	if err := checkBatch(len(keys)); err != nil {
		return fill(len(keys), err)
	}
	stored, kerr := c.storedKeys(keys)
	if kerr != nil {
		return fill(len(keys), kerr)
	}
	keys = stored
	errs := make([]error, len(keys))
	// The committed items' placements are seeded into the lookup cache (batchPutEnd); the
	// others are dropped, as a single put does.
	defer func() {
		var failed []string
		for i, k := range keys {
			if errs[i] != nil {
				failed = append(failed, k)
			}
		}
		c.lookups.drop(failed...)
	}()
	rc, err := rc.normalized()
	if err != nil {
		return fill(len(keys), err)
	}
	cfg := wireConfig(rc)
	var idx []int // placed item -> keys index
	for i, k := range keys {
		if _, err := checkPut(k, int64(len(values[i])), rc); err != nil {
			errs[i] = err
			continue
		}
		idx = append(idx, i)
	}
	if len(idx) == 0 {
		return errs
	}
	ctx, cancel := c.withTimeout(ctx)
	defer cancel()
	for round := 0; len(idx) > 0; round++ {
		placed, sums := c.batchPlaceAndWrite(ctx, keys, values, idx, cfg, rc, errs)
		idx = c.batchPutEnd(ctx, keys, values, idx, placed, sums, cfg, rc, errs, round < maxRecommits)
	}
	return errs
}

// batchPutEnd commits, in one BatchPutEnd, the items idx that batchPlaceAndWrite wrote
// (placed and sums by position in idx; the others failed already). An item refused for good is
// revoked and fails (errs). With again, it returns the items to place once more, their commit
// refused because a placed worker left meanwhile (recommit); else they fail too.
func (c *Client) batchPutEnd(ctx context.Context, keys []string, values [][]byte, idx []int, placed []*transfer.PutStartResponse,
	sums []uint64, cfg base.PutConfig, rc ReplicateConfig, errs []error, again bool) []int {
	end := &transfer.BatchPutEndRequest{}
	var endIdx []int // BatchPutEnd item -> idx position
	for j, i := range idx {
		if errs[i] != nil {
			continue
		}
		pl := placed[j]
		rec := base.Object{ObjectMeta: base.ObjectMeta{Key: keys[i], Version: pl.Version, Size: int64(len(values[i])),
			Checksum: sums[j]}, Replicas: replicaIDs(pl), Tokens: rc.Tokens, Model: rc.Model}
		end.Items = append(end.Items, transfer.PutEndRequest{Object: rec, Config: cfg})
		endIdx = append(endIdx, j)
	}
	if len(endIdx) == 0 {
		return nil
	}
	var st attemptState
	toks, sent := make([]uint64, len(endIdx)), time.Now()
	for n, it := range end.Items {
		toks[n] = c.lookups.token(it.Key)
	}
	endResp := transfer.NewBatchResponse(transfer.OpBatchPutEnd, nil)
	err := c.masterCall(ctx, end, endResp, &st)
	if err == nil && len(endResp.Items) != len(endIdx) {
		err = fmt.Errorf("%w: batch put end: %d answers for %d items", base.ErrInternal, len(endResp.Items), len(endIdx))
	}
	var next []int
	var seeds []seedItem // seeded together once every item is decided (lookupCache.seedAll)
	defer func() { c.lookups.seedAll(seeds, sent) }()
	for n, j := range endIdx {
		i, v := idx[j], placed[j].Version
		var ierr error
		if err != nil {
			ierr = err
		} else {
			ierr = endResp.Items[n].Err()
		}
		if c.ownCommit(ctx, ierr, &st, keys[i], v) {
			ierr = nil
		}
		if ierr == nil {
			it := &end.Items[n]
			seeds = append(seeds, seedItem{keys[i], &transfer.LookupResponse{ObjectMeta: it.ObjectMeta, Replicas: placed[j].Replicas}, toks[n]})
			continue
		}
		c.revoke(keys[i], v)
		if again && recommit(ctx, ierr) {
			next = append(next, i)
			continue
		}
		errs[i] = fmt.Errorf("put %q: %w", keys[i], ierr)
	}
	return next
}

// batchPlaceAndWrite places the items idx of a BatchPut (one BatchPutStart) and writes them
// in parallel; an item whose write failed on a worker another would not fail on is revoked
// and placed again without it (replace.go), all such items of a round in one BatchPutStart,
// until each is written or fails for good (errs[idx[j]]). It returns, by position in idx,
// each written item's placement and checksum.
func (c *Client) batchPlaceAndWrite(ctx context.Context, keys []string, values [][]byte, idx []int, cfg base.PutConfig,
	rc ReplicateConfig, errs []error) ([]*transfer.PutStartResponse, []uint64) {
	placed := make([]*transfer.PutStartResponse, len(idx))
	sums := make([]uint64, len(idx))
	excl := make([]exclusion, len(idx))
	again := make([]bool, len(idx))
	pending := make([]int, len(idx)) // positions in idx still to place
	for j := range pending {
		pending[j] = j
	}
	for len(pending) > 0 {
		req := &transfer.BatchPutStartRequest{Items: make([]transfer.PutStartRequest, len(pending))}
		for n, j := range pending {
			i := idx[j]
			rec := base.Object{ObjectMeta: base.ObjectMeta{Key: keys[i], Size: int64(len(values[i]))}}
			req.Items[n] = transfer.PutStartRequest{Object: rec, Config: cfg, Exclude: excl[j].workers}
		}
		var resp transfer.BatchPutStartResponse
		err := c.batchPutStart(ctx, req, &resp)
		if err == nil && len(resp.Items) != len(pending) {
			err = fmt.Errorf("%w: batch put start: %d answers for %d items", base.ErrInternal, len(resp.Items), len(pending))
		}
		if err != nil {
			for _, j := range pending {
				errs[idx[j]] = fmt.Errorf("put %q: %w", keys[idx[j]], excl[j].wrap(err))
			}
			break
		}
		wctx, cancel := writeAttempt(ctx)
		parallel(len(pending), func(n int) {
			j, it := pending[n], &resp.Items[n]
			i := idx[j]
			if err := it.Err.Err(); err != nil {
				errs[i] = fmt.Errorf("put %q: %w", keys[i], excl[j].wrap(err))
				return
			}
			if excl[j].cause == nil {
				sums[j] = base.Checksum(values[i]) // once, at the first placement
			}
			err := c.writeReplicas(wctx, keys[i], &it.PutStartResponse, rc, values[i], sums[j])
			if err == nil {
				placed[j] = &it.PutStartResponse
				return
			}
			c.revoke(keys[i], it.Version)
			if excl[j].add(ctx, err) {
				again[j] = true
				return
			}
			errs[i] = fmt.Errorf("put %q: %w", keys[i], err)
		})
		cancel()
		next := pending[:0]
		for _, j := range pending {
			if again[j] {
				again[j] = false
				next = append(next, j)
			}
		}
		if len(next) > 0 {
			c.log.Debug("client: batch put: writes failed; placing items again without their workers", "items", len(next))
		}
		pending = next
	}
	return placed, sums
}

// BatchGet reads several objects. values[i] is keys[i]'s bytes when errs[i] is nil.
func (c *Client) BatchGet(ctx context.Context, keys []string) (values [][]byte, errs []error) {
	values = make([][]byte, len(keys))
	_, errs = c.BatchGetWith(ctx, keys, func(i int, size int64) ([]byte, error) {
		values[i] = make([]byte, size)
		return values[i], nil
	})
	for i, err := range errs {
		if err != nil {
			values[i] = nil
		}
	}
	return values, errs
}

// BatchExists reports for each key whether it is committed.
func (c *Client) BatchExists(ctx context.Context, keys []string) ([]bool, error) {
	stored, kerr := c.storedKeys(keys)
	if kerr != nil {
		return nil, kerr
	}
	keys = stored
	if err := checkBatchKeys(keys); err != nil {
		return nil, err
	}
	ctx, cancel := c.withTimeout(ctx)
	defer cancel()
	// As Exists: with the lookup cache on, the placements come too and are cached.
	toks, sent := c.lookups.tokens(keys), time.Now()
	var resp transfer.BatchExistsResponse
	if err := c.masterCall(ctx, &transfer.BatchExistsRequest{Keys: keys, Placements: c.lookups != nil}, &resp, nil); err != nil {
		return nil, fmt.Errorf("batch exists: %w", err)
	}
	if len(resp.Exists) != len(keys) {
		return nil, fmt.Errorf("%w: batch exists: %d answers for %d keys", base.ErrInternal, len(resp.Exists), len(keys))
	}
	for i := range resp.Lookups {
		if it := &resp.Lookups[i]; it.Err.Err() == nil && len(it.Replicas) > 0 {
			it.Key = keys[i]
			c.lookups.put(keys[i], &it.LookupResponse, toks[i], sent)
		}
	}
	return resp.Exists, nil
}

// BatchRemove removes several objects; errs[i] is keys[i]'s outcome (base.ErrObjectNotFound
// for a missing key).
func (c *Client) BatchRemove(ctx context.Context, keys []string) []error {
	stored, kerr := c.storedKeys(keys)
	if kerr != nil {
		return fill(len(keys), kerr)
	}
	keys = stored
	if err := checkBatchKeys(keys); err != nil {
		return fill(len(keys), err)
	}
	ctx, cancel := c.withTimeout(ctx)
	defer cancel()
	defer c.lookups.drop(keys...)
	var st attemptState
	resp := transfer.NewBatchResponse(transfer.OpBatchRemove, nil)
	if err := c.masterCall(ctx, &transfer.BatchRemoveRequest{Keys: keys}, resp, &st); err != nil {
		return fill(len(keys), fmt.Errorf("batch remove: %w", err))
	}
	if len(resp.Items) != len(keys) {
		return fill(len(keys), fmt.Errorf("%w: batch remove: %d answers for %d keys", base.ErrInternal, len(resp.Items), len(keys)))
	}
	errs := make([]error, len(keys))
	for i, it := range resp.Items {
		err := it.Err()
		if err != nil && st.ambiguous && errors.Is(err, base.ErrObjectNotFound) {
			err = nil
		}
		if err != nil {
			errs[i] = fmt.Errorf("remove %q: %w", keys[i], err)
		}
	}
	return errs
}
