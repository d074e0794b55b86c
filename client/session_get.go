package client

import (
	"context"
	"errors"
	"fmt"

	"github.com/mooncake-go/mooncake/internal/base"
	"github.com/mooncake-go/mooncake/transfer"
)

// Get sessions: Mooncake's batch_get_session_start, batch_get_into_multi_buffer_ranges and
// batch_get_session_end. A get session is this client's cached lookup of each key (version,
// size, replicas): the ranged reads that follow go straight to the workers, with no call to a
// master, and each worker checks the version, so a read of an object removed or replaced
// since the start fails (and ends that key's session) rather than returning other bytes.
// Nothing is held on a master or a worker: there is no lease to renew and nothing to leak.

// GetRange is one range of a get session: len(Dst) bytes of the object from Offset.
type GetRange struct {
	Offset int64
	Dst    []byte
}

// GetSessionStart opens (or refreshes) a get session for each key: one batched lookup.
// errs[i] is nil when keys[i] is stored and its session open; base.ErrObjectNotFound when
// the key is not stored.
func (c *Client) GetSessionStart(ctx context.Context, keys []string) []error {
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
	resp, err := c.batchLookup(ctx, keys)
	if err != nil {
		return fill(len(keys), fmt.Errorf("get session start: %w", err))
	}
	errs := make([]error, len(keys))
	t := c.sessions()
	t.mu.Lock()
	defer t.mu.Unlock()
	for i, k := range keys {
		if e := resp.Items[i].Err.Err(); e != nil {
			errs[i] = fmt.Errorf("get session start %q: %w", k, e)
			delete(t.gets, k)
			continue
		}
		if _, ok := t.gets[k]; !ok && len(t.gets) >= maxPutSessions {
			errs[i] = fmt.Errorf("%w: %d get sessions open in this client, the limit", base.ErrNoSpace, maxPutSessions)
			continue
		}
		lr := resp.Items[i].LookupResponse
		t.gets[k] = &lr
	}
	return errs
}

// GetSessionRead reads ranges[i] of the object keys[i], whose get session is open, into the
// caller's buffers, all keys and ranges in parallel. read[i] is the number of bytes of
// ranges[i] (their sum) when errs[i] is nil. A key with no session, or a range past the
// object's end, fails with base.ErrInvalidParams. A key removed or replaced since its session
// started fails with base.ErrObjectNotFound or base.ErrInvalidVersion and its session ends.
// Ranges are checked by the frame checksums of the transfer, not the object's checksum (that
// covers the whole object), as BatchGetRanges.
func (c *Client) GetSessionRead(ctx context.Context, keys []string, ranges [][]GetRange) (read []int64, errs []error) {
	read = make([]int64, len(keys))
	if len(keys) != len(ranges) {
		return read, fill(len(keys), fmt.Errorf("%w: %d keys for %d range lists", base.ErrInvalidParams, len(keys), len(ranges)))
	}
	if err := checkBatch(len(keys)); err != nil {
		return read, fill(len(keys), err)
	}
	stored, kerr := c.storedKeys(keys)
	if kerr != nil {
		return read, fill(len(keys), kerr)
	}
	keys = stored
	errs = make([]error, len(keys))
	t := c.sessions()
	lrs := make([]*transfer.LookupResponse, len(keys))
	t.mu.Lock()
	for i, k := range keys {
		lrs[i] = t.gets[k]
	}
	t.mu.Unlock()
	ctx, cancel := c.withTimeout(ctx)
	defer cancel()
	parallel(len(keys), func(i int) {
		read[i], errs[i] = c.getSessionReadKey(ctx, keys[i], lrs[i], ranges[i])
	})
	for i, err := range errs {
		if errors.Is(err, base.ErrObjectNotFound) || errors.Is(err, base.ErrInvalidVersion) {
			c.endGetSession(keys[i], lrs[i])
		}
	}
	return read, errs
}

func (c *Client) getSessionReadKey(ctx context.Context, key string, lr *transfer.LookupResponse, rs []GetRange) (int64, error) {
	if lr == nil {
		return 0, fmt.Errorf("%w: no get session is open for %q in this client (start one with GetSessionStart)", base.ErrInvalidParams, key)
	}
	var total int64
	for _, r := range rs {
		n := int64(len(r.Dst))
		if n == 0 || r.Offset < 0 || r.Offset > lr.Size || n > lr.Size-r.Offset {
			return 0, fmt.Errorf("%w: range [%d, +%d) of %q is outside its %d bytes", base.ErrInvalidParams, r.Offset, n, key, lr.Size)
		}
		total += n
	}
	errs := make([]error, len(rs))
	parallel(len(rs), func(j int) {
		errs[j] = c.readRange(ctx, RangeRead{Key: key, Offset: rs[j].Offset, Dst: rs[j].Dst}, lr)
	})
	if err := errors.Join(errs...); err != nil {
		return 0, err
	}
	return total, nil
}

// batchLookup looks keys up in one call; the response has one item per key.
func (c *Client) batchLookup(ctx context.Context, keys []string) (*transfer.BatchLookupResponse, error) {
	var resp transfer.BatchLookupResponse
	err := c.masterCall(ctx, &transfer.BatchLookupRequest{Keys: keys}, &resp, nil)
	if err == nil && len(resp.Items) != len(keys) {
		err = fmt.Errorf("%w: batch lookup: %d answers for %d keys", base.ErrInternal, len(resp.Items), len(keys))
	}
	return &resp, err
}

// endGetSession forgets key's get session if it is still lr.
func (c *Client) endGetSession(key string, lr *transfer.LookupResponse) {
	t := c.sessions()
	t.mu.Lock()
	if t.gets[key] == lr {
		delete(t.gets, key)
	}
	t.mu.Unlock()
}

// GetSessionEnd ends the get sessions of keys (a key with none is ignored).
func (c *Client) GetSessionEnd(keys []string) {
	keys, _ = c.storedKeys(keys) // a key that cannot be stored has no session
	t := c.sessions()
	t.mu.Lock()
	for _, k := range keys {
		delete(t.gets, k)
	}
	t.mu.Unlock()
}
