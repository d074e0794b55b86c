package client

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/mooncake-go/mooncake/internal/base"
	"github.com/mooncake-go/mooncake/transfer"
)

// This file holds the calls that read into memory the caller provides or allocates, and the
// put forms built on Put and BatchPut, which the C library (cmd/libmooncake_store) and
// through it Mooncake's Python API need: GetWith, BatchGetWith, BatchGetInto,
// BatchGetRanges, PutParts, BatchPutParts and Describe.

// Alloc returns the buffer an object of size bytes is read into (len(buf) == size). It may be
// called more than once for one object, when the object changed between the lookup and the
// read; the buffer of the last call holds the object when the get succeeds, and the caller
// releases the earlier ones. An error fails the get with that error.
type Alloc func(size int64) ([]byte, error)

// GetWith reads the object into the buffer alloc returns for its size and returns the size.
// It is Get for callers that own the memory (a C caller's malloc, a pooled buffer).
func (c *Client) GetWith(ctx context.Context, key string, alloc Alloc) (int, error) {
	key, err := c.storedKey(key)
	if err != nil {
		return 0, err
	}
	ctx, cancel := c.withTimeout(ctx)
	defer cancel()
	return c.getInto(ctx, key, alloc)
}

// BatchGetWith reads several objects in parallel: one batched lookup at the leader for the
// keys without a cached lookup (lookupcache.go: after this client's puts, exists and gets),
// then the reads (at most batchParallelism at once), each into the buffer alloc(i, size) returns for
// item i (alloc is called as Alloc is; calls for different items may run concurrently).
// sizes[i] is keys[i]'s size when errs[i] is nil.
func (c *Client) BatchGetWith(ctx context.Context, keys []string, alloc func(i int, size int64) ([]byte, error)) (sizes []int, errs []error) {
	sizes, errs = make([]int, len(keys)), make([]error, len(keys))
	stored, kerr := c.storedKeys(keys)
	if kerr != nil {
		return sizes, fill(len(keys), kerr)
	}
	keys = stored
	if err := checkBatchKeys(keys); err != nil {
		return sizes, fill(len(keys), err)
	}
	// Objects whose lookup is cached and that this host's worker holds where an earlier pin
	// found them are copied first, with no call at all (copyNoWait); the others whose lookup
	// is cached are read with it; the rest are looked up in one batch. The reads run in
	// parallel.
	var rest []int
	lrs := make([]*transfer.LookupResponse, len(keys)) // cached lookups, nil for the rest
	kept := make([]bool, len(keys))                    // lrs[i] is a kept lookup (getKept)
	var refresh []string                               // cached lookups near their end of life
	for i, k := range keys {
		lr, ok, r := c.lookups.getRefresh(k)
		if r {
			refresh = append(refresh, k)
		}
		if ok {
			if n, ok := c.copyNoWait(k, lr, func(size int64) ([]byte, error) { return alloc(i, size) }); ok {
				sizes[i] = n
				continue
			}
			lrs[i] = lr
		} else if lr, ok := c.keptLookup(k); ok {
			lrs[i], kept[i] = lr, true
		}
		rest = append(rest, i)
	}
	c.refreshLookup(refresh...) // in the background, as a single get does; one call for all
	if len(rest) == 0 {
		return sizes, errs
	}
	ctx, cancel := c.withTimeout(ctx)
	defer cancel()
	looked, err := c.batchLookupMissing(ctx, keys, rest, lrs)
	if err != nil {
		for _, i := range rest {
			errs[i] = err
		}
		return sizes, errs
	}
	parallel(len(rest), func(j int) {
		i := rest[j]
		lr, fresh := lrs[i], looked[i]
		if fresh != nil {
			if err := fresh.err; err != nil {
				errs[i] = fmt.Errorf("get %q: %w", keys[i], err)
				return
			}
			lr = fresh.lr
		}
		buf, err := alloc(i, lr.Size)
		if err != nil {
			errs[i] = err
			return
		}
		if _, err = c.readReplicas(ctx, keys[i], lr, buf, kept[i]); err == nil {
			sizes[i] = len(buf)
			if fresh != nil {
				c.lookups.put(keys[i], lr, fresh.tok, fresh.sent) // as a single get does
			}
			return
		}
		// The object may have been replaced, removed or moved since the lookup: once more
		// the single-key way, with a fresh lookup.
		c.lookups.drop(keys[i])
		var kf *keptFailure
		if kept[i] {
			kf = &keptFailure{lr, err}
		}
		if n, err2 := c.getLookedUp(ctx, keys[i], func(size int64) ([]byte, error) { return alloc(i, size) }, kf); err2 == nil {
			sizes[i] = n
			return
		}
		errs[i] = fmt.Errorf("get %q: %w", keys[i], err)
	})
	return sizes, errs
}

// batchLookup is one item's answer of batchLookupMissing: the lookup or its error, and the
// cache token and send time to cache it with.
type batchLookup struct {
	lr   *transfer.LookupResponse
	err  error
	tok  uint64
	sent time.Time
}

// batchLookupMissing looks up, in one call (sendLookups: a BatchLookup, or a Lookup for a
// single key), the items idx of keys that have no cached lookup (lrs[i] nil); the answers are
// by item (nil for the cached ones). The error is the call's, for every item.
func (c *Client) batchLookupMissing(ctx context.Context, keys []string, idx []int, lrs []*transfer.LookupResponse) ([]*batchLookup, error) {
	var miss []string
	var at []int
	for _, i := range idx {
		if lrs[i] == nil {
			miss, at = append(miss, keys[i]), append(at, i)
		}
	}
	out := make([]*batchLookup, len(keys))
	if len(miss) == 0 {
		return out, nil
	}
	toks, sent := c.lookups.tokens(miss), time.Now()
	res, err := c.sendLookups(ctx, miss)
	if err != nil {
		return nil, fmt.Errorf("batch get: %w", err)
	}
	for j, i := range at {
		out[i] = &batchLookup{lr: res[j].res, err: res[j].err, tok: toks[j], sent: sent}
	}
	return out, nil
}

// BatchGetInto reads keys[i] into bufs[i] for every i, in parallel, and returns each object's
// size. A buffer shorter than its object fails that item with an error wrapping
// base.ErrInvalidParams; mismatched lengths fail every item.
func (c *Client) BatchGetInto(ctx context.Context, keys []string, bufs [][]byte) (sizes []int, errs []error) {
	if len(keys) != len(bufs) {
		return make([]int, len(keys)), fill(len(keys), fmt.Errorf("%w: %d keys for %d buffers", base.ErrInvalidParams, len(keys), len(bufs)))
	}
	return c.BatchGetWith(ctx, keys, func(i int, size int64) ([]byte, error) {
		if int64(len(bufs[i])) < size {
			return nil, fmt.Errorf("%w: get %q: buffer of %d bytes for an object of %d", base.ErrInvalidParams, keys[i], len(bufs[i]), size)
		}
		return bufs[i][:size], nil
	})
}

// RangeRead is one item of BatchGetRanges: len(Dst) bytes of the object Key from Offset.
type RangeRead struct {
	Key    string
	Offset int64
	Dst    []byte
}

// BatchGetRanges reads byte ranges of objects into the callers' buffers, in parallel, after
// one batched lookup of the distinct keys. errs[i] is nil when reads[i].Dst holds the range.
// A range past the object's end fails with an error wrapping base.ErrInvalidParams. Ranges
// are read over TCP from the worker (ReadRange) and, unlike whole objects, are not checked
// against the object's checksum (it covers the whole object); a replica that fails is
// replaced by the next one.
func (c *Client) BatchGetRanges(ctx context.Context, reads []RangeRead) []error {
	if err := checkBatch(len(reads)); err != nil {
		return fill(len(reads), err)
	}
	errs := make([]error, len(reads))
	reads = slices.Clone(reads) // its keys become stored keys; the caller's slice is not changed
	var keys []string
	at := map[string]int{} // key -> index in keys
	for i, r := range reads {
		var err error
		if r.Key, err = c.storedKey(r.Key); err != nil {
			errs[i] = err
			continue
		}
		reads[i].Key = r.Key
		if r.Offset < 0 || len(r.Dst) == 0 {
			errs[i] = fmt.Errorf("%w: range of %q: offset %d, length %d", base.ErrInvalidParams, r.Key, r.Offset, len(r.Dst))
			continue
		}
		if _, ok := at[r.Key]; !ok {
			at[r.Key] = len(keys)
			keys = append(keys, r.Key)
		}
	}
	if len(keys) == 0 {
		return errs
	}
	ctx, cancel := c.withTimeout(ctx)
	defer cancel()
	resp, err := c.batchLookup(ctx, keys)
	parallel(len(reads), func(i int) {
		if errs[i] != nil {
			return
		}
		r := reads[i]
		if err != nil {
			errs[i] = fmt.Errorf("get range of %q: %w", r.Key, err)
			return
		}
		it := &resp.Items[at[r.Key]]
		if e := it.Err.Err(); e != nil {
			errs[i] = fmt.Errorf("get range of %q: %w", r.Key, e)
			return
		}
		if r.Offset+int64(len(r.Dst)) > it.Size {
			errs[i] = fmt.Errorf("%w: range [%d, %d) of %q is past its end (%d bytes)",
				base.ErrInvalidParams, r.Offset, r.Offset+int64(len(r.Dst)), r.Key, it.Size)
			return
		}
		errs[i] = c.readRange(ctx, r, &it.LookupResponse)
	})
	return errs
}

// readRange tries the replicas in preference order for one range.
func (c *Client) readRange(ctx context.Context, r RangeRead, lr *transfer.LookupResponse) error {
	var errs []error
	reps := orderReplicas(lr.Replicas, c.replicaRank)
	for k, rep := range reps {
		req := &transfer.ReadRequest{Key: r.Key, Version: lr.Version, Offset: r.Offset, Length: int64(len(r.Dst))}
		actx, cancel := readAttempt(ctx, len(reps)-k)
		resp, n, _, err := c.rpc.Read(actx, rep.Address, req, r.Dst, false)
		cancel()
		if err == nil && (resp.Version != lr.Version || n != len(r.Dst)) {
			err = fmt.Errorf("%w: worker sent %d bytes of version %d, want %d of %d", base.ErrCorruption, n, resp.Version, len(r.Dst), lr.Version)
		}
		if err == nil {
			c.reads.tcp.Add(1)
			return nil
		}
		errs = append(errs, fmt.Errorf("worker %s (%s): %w", rep.WorkerID, rep.Address, err))
		if ctx.Err() != nil {
			break
		}
	}
	return fmt.Errorf("get range of %q: %w", r.Key, errors.Join(errs...))
}

// PutParts stores the concatenation of parts under key, as Put does. The parts are copied
// once into one buffer: the transfer layer writes an object from one contiguous slice.
func (c *Client) PutParts(ctx context.Context, key string, parts [][]byte, rc ReplicateConfig) error {
	return c.Put(ctx, key, concat(parts), rc)
}

// BatchPutParts stores, for each i, the concatenation of parts[i] under keys[i], as BatchPut
// does (one copy of each object, as PutParts).
func (c *Client) BatchPutParts(ctx context.Context, keys []string, parts [][][]byte, rc ReplicateConfig) []error {
	if len(keys) != len(parts) {
		return fill(len(keys), fmt.Errorf("%w: %d keys for %d part lists", base.ErrInvalidParams, len(keys), len(parts)))
	}
	values := make([][]byte, len(parts))
	for i, p := range parts {
		values[i] = concat(p)
	}
	return c.BatchPut(ctx, keys, values, rc)
}

func concat(parts [][]byte) []byte {
	if len(parts) == 1 {
		return parts[0]
	}
	n := 0
	for _, p := range parts {
		n += len(p)
	}
	out := make([]byte, 0, n)
	for _, p := range parts {
		out = append(out, p...)
	}
	return out
}

// ObjectInfo describes a committed object and where its replicas are.
type ObjectInfo struct {
	Key      string
	Size     int64
	Version  base.Version
	Checksum uint64
	Replicas []ReplicaInfo
}

// ReplicaInfo is one replica of an object: the worker holding it.
type ReplicaInfo struct {
	WorkerID base.WorkerID
	Address  string
}

// Describe returns the object's size, version and replicas as the leader knows them;
// base.ErrObjectNotFound when there is none.
func (c *Client) Describe(ctx context.Context, key string) (ObjectInfo, error) {
	user := key
	key, err := c.storedKey(key)
	if err != nil {
		return ObjectInfo{}, err
	}
	ctx, cancel := c.withTimeout(ctx)
	defer cancel()
	lr, err := c.lookup(ctx, key)
	if err != nil {
		return ObjectInfo{}, fmt.Errorf("describe %q: %w", key, err)
	}
	info := ObjectInfo{Key: user, Size: lr.Size, Version: lr.Version, Checksum: lr.Checksum}
	for _, r := range lr.Replicas {
		info.Replicas = append(info.Replicas, ReplicaInfo{WorkerID: r.WorkerID, Address: r.Address})
	}
	return info, nil
}
