package client

import (
	"context"
	"errors"
	"fmt"
	"sync"

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
// committed). The objects that were written are committed together in one raft entry; an item
// that fails is revoked and not visible.
func (c *Client) BatchPut(ctx context.Context, keys []string, values [][]byte, rc ReplicateConfig) []error {
	if len(keys) != len(values) {
		return fill(len(keys), fmt.Errorf("%w: %d keys for %d values", base.ErrInvalidParams, len(keys), len(values)))
	}
	if err := checkBatch(len(keys)); err != nil {
		return fill(len(keys), err)
	}
	errs := make([]error, len(keys))
	defer c.lookups.drop(keys...)
	rc, err := rc.normalized()
	if err != nil {
		return fill(len(keys), err)
	}
	cfg := wireConfig(rc)
	req := &transfer.BatchPutStartRequest{}
	idx := []int{} // request item -> keys index
	for i, k := range keys {
		if _, err := checkPut(k, int64(len(values[i])), rc); err != nil {
			errs[i] = err
			continue
		}
		req.Items = append(req.Items, transfer.PutStartRequest{Key: k, Size: int64(len(values[i])), Config: cfg})
		idx = append(idx, i)
	}
	if len(idx) == 0 {
		return errs
	}
	ctx, cancel := c.withTimeout(ctx)
	defer cancel()
	var resp transfer.BatchPutStartResponse
	if err := c.batchPutStart(ctx, req, &resp); err != nil {
		for _, i := range idx {
			errs[i] = fmt.Errorf("put %q: %w", keys[i], err)
		}
		return errs
	}
	if len(resp.Items) != len(idx) {
		for _, i := range idx {
			errs[i] = fmt.Errorf("%w: batch put start: %d answers for %d items", base.ErrInternal, len(resp.Items), len(idx))
		}
		return errs
	}
	sums := make([]uint64, len(idx))
	parallel(len(idx), func(j int) {
		i, it := idx[j], &resp.Items[j]
		if err := it.Err.Err(); err != nil {
			errs[i] = fmt.Errorf("put %q: %w", keys[i], err)
			return
		}
		sums[j] = base.Checksum(values[i])
		if err := c.writeReplicas(ctx, keys[i], &it.PutStartResponse, rc, values[i], sums[j]); err != nil {
			errs[i] = fmt.Errorf("put %q: %w", keys[i], err)
			c.revoke(keys[i], it.Version)
		}
	})
	end := &transfer.BatchPutEndRequest{}
	var endIdx []int // BatchPutEnd item -> idx position
	for j, i := range idx {
		if errs[i] != nil {
			continue
		}
		it := &resp.Items[j]
		end.Items = append(end.Items, transfer.PutEndRequest{Key: keys[i], Version: it.Version, Size: int64(len(values[i])),
			Checksum: sums[j], Replicas: replicaIDs(&it.PutStartResponse), Config: cfg, Tokens: rc.Tokens, Model: rc.Model})
		endIdx = append(endIdx, j)
	}
	if len(endIdx) == 0 {
		return errs
	}
	var st attemptState
	endResp := transfer.NewBatchResponse(transfer.OpBatchPutEnd, nil)
	err = c.masterCall(ctx, end, endResp, &st)
	if err == nil && len(endResp.Items) != len(endIdx) {
		err = fmt.Errorf("%w: batch put end: %d answers for %d items", base.ErrInternal, len(endResp.Items), len(endIdx))
	}
	for n, j := range endIdx {
		i, v := idx[j], resp.Items[j].Version
		var ierr error
		if err != nil {
			ierr = err
		} else {
			ierr = endResp.Items[n].Err()
		}
		if c.ownCommit(ctx, ierr, &st, keys[i], v) {
			ierr = nil
		}
		if ierr != nil {
			errs[i] = fmt.Errorf("put %q: %w", keys[i], ierr)
			c.revoke(keys[i], v)
		}
	}
	return errs
}

// BatchGet reads several objects. values[i] is keys[i]'s bytes when errs[i] is nil.
func (c *Client) BatchGet(ctx context.Context, keys []string) (values [][]byte, errs []error) {
	values, errs = make([][]byte, len(keys)), make([]error, len(keys))
	if err := checkBatchKeys(keys); err != nil {
		return values, fill(len(keys), err)
	}
	ctx, cancel := c.withTimeout(ctx)
	defer cancel()
	var resp transfer.BatchLookupResponse
	if err := c.masterCall(ctx, &transfer.BatchLookupRequest{Keys: keys}, &resp, nil); err != nil {
		return values, fill(len(keys), fmt.Errorf("batch get: %w", err))
	}
	if len(resp.Items) != len(keys) {
		return values, fill(len(keys), fmt.Errorf("%w: batch lookup: %d answers for %d keys", base.ErrInternal, len(resp.Items), len(keys)))
	}
	parallel(len(keys), func(i int) {
		it := &resp.Items[i]
		if err := it.Err.Err(); err != nil {
			errs[i] = fmt.Errorf("get %q: %w", keys[i], err)
			return
		}
		buf := make([]byte, it.Size)
		if _, err := c.readReplicas(ctx, keys[i], &it.LookupResponse, buf); err != nil {
			// The object may have been replaced since the lookup: one more try the slow way.
			if buf2, err2 := c.Get(ctx, keys[i]); err2 == nil {
				values[i] = buf2
				return
			}
			errs[i] = fmt.Errorf("get %q: %w", keys[i], err)
			return
		}
		values[i] = buf
	})
	return values, errs
}

// BatchExists reports for each key whether it is committed.
func (c *Client) BatchExists(ctx context.Context, keys []string) ([]bool, error) {
	if err := checkBatchKeys(keys); err != nil {
		return nil, err
	}
	ctx, cancel := c.withTimeout(ctx)
	defer cancel()
	var resp transfer.BatchExistsResponse
	if err := c.masterCall(ctx, &transfer.BatchExistsRequest{Keys: keys}, &resp, nil); err != nil {
		return nil, fmt.Errorf("batch exists: %w", err)
	}
	if len(resp.Exists) != len(keys) {
		return nil, fmt.Errorf("%w: batch exists: %d answers for %d keys", base.ErrInternal, len(resp.Exists), len(keys))
	}
	return resp.Exists, nil
}

// BatchRemove removes several objects; errs[i] is keys[i]'s outcome (base.ErrObjectNotFound
// for a missing key).
func (c *Client) BatchRemove(ctx context.Context, keys []string) []error {
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
