package client

import (
	"context"
	"errors"
	"fmt"

	"github.com/mooncake-go/mooncake/internal/base"
	"github.com/mooncake-go/mooncake/transfer"
)

// ExistOptions are Mooncake's ExistOptions: what an exists check does besides answering.
type ExistOptions struct {
	// PrefetchToMemory asks the worker holding each object found to promote it from NVMe to
	// DRAM in the background, so the read that follows (an engine checks a prefix, schedules
	// the request, then loads it) is served from DRAM. Best effort: a worker whose prefetch
	// budget is spent drops it, and the read is then served from NVMe as before. Off when
	// Config.DisableSSDPrefetch is set. See docs/protocol.md, "Prefetch on exist".
	PrefetchToMemory bool
}

// ExistsWith is Exists with options (Mooncake's is_exist(key, ExistOptions)).
func (c *Client) ExistsWith(ctx context.Context, key string, o ExistOptions) (bool, error) {
	if !o.PrefetchToMemory || c.cfg.DisableSSDPrefetch {
		return c.Exists(ctx, key)
	}
	key, err := c.storedKey(key)
	if err != nil {
		return false, err
	}
	ex, err := c.existsPrefetch(ctx, []string{key})
	if err != nil {
		return false, fmt.Errorf("exists %q: %w", key, err)
	}
	return ex[0], nil
}

// BatchExistsWith is BatchExists with options (Mooncake's batch_is_exist(keys, ExistOptions)).
func (c *Client) BatchExistsWith(ctx context.Context, keys []string, o ExistOptions) ([]bool, error) {
	if !o.PrefetchToMemory || c.cfg.DisableSSDPrefetch {
		return c.BatchExists(ctx, keys)
	}
	stored, kerr := c.storedKeys(keys)
	if kerr != nil {
		return nil, kerr
	}
	keys = stored
	if err := checkBatchKeys(keys); err != nil {
		return nil, err
	}
	ex, err := c.existsPrefetch(ctx, keys)
	if err != nil {
		return nil, fmt.Errorf("batch exists: %w", err)
	}
	return ex, nil
}

// existsPrefetch answers exists for keys from a BatchLookup (the master's Exists does not say
// where an object is) and sends one Prefetch per worker: to the replica a get would read
// first, for the version found. The workers answer before promoting, so this costs one round
// trip to each worker, in parallel; their answers only inform (logged), never fail the call.
func (c *Client) existsPrefetch(ctx context.Context, keys []string) ([]bool, error) {
	ctx, cancel := c.withTimeout(ctx)
	defer cancel()
	var resp transfer.BatchLookupResponse
	if err := c.masterCall(ctx, &transfer.BatchLookupRequest{Keys: keys}, &resp, nil); err != nil {
		return nil, err
	}
	if len(resp.Items) != len(keys) {
		return nil, fmt.Errorf("%w: %d answers for %d keys", base.ErrInternal, len(resp.Items), len(keys))
	}
	out := make([]bool, len(keys))
	var addrs []string
	byAddr := map[string][]base.KeyVersion{}
	for i := range resp.Items {
		it := &resp.Items[i]
		if err := it.Err.Err(); err != nil {
			if errors.Is(err, base.ErrObjectNotFound) {
				continue
			}
			return nil, fmt.Errorf("%q: %w", keys[i], err)
		}
		if len(it.Replicas) == 0 {
			continue // as lookup: no live replica is no object to read
		}
		out[i] = true
		addr := orderReplicas(it.Replicas, c.replicaRank)[0].Address
		if byAddr[addr] == nil {
			addrs = append(addrs, addr)
		}
		byAddr[addr] = append(byAddr[addr], base.KeyVersion{Key: keys[i], Version: it.Version})
	}
	var calls []prefetchCall
	for _, a := range addrs {
		items := byAddr[a]
		for len(items) > 0 {
			n := min(len(items), transfer.MaxPrefetch)
			calls = append(calls, prefetchCall{a, items[:n]})
			items = items[n:]
		}
	}
	parallel(len(calls), func(i int) { c.sendPrefetch(ctx, calls[i]) })
	return out, nil
}

type prefetchCall struct {
	addr  string
	items []base.KeyVersion
}

func (c *Client) sendPrefetch(ctx context.Context, pc prefetchCall) {
	resp := transfer.NewBatchResponse(transfer.OpPrefetch, nil)
	if err := c.rpc.Call(ctx, pc.addr, &transfer.PrefetchRequest{Items: pc.items}, resp); err != nil {
		c.log.Debug("client: prefetch refused", "worker", pc.addr, "keys", len(pc.items), "err", err)
		return
	}
	for i := range resp.Items {
		if err := resp.Items[i].Err(); err != nil && i < len(pc.items) {
			c.log.Debug("client: prefetch not taken", "worker", pc.addr, "key", pc.items[i].Key, "err", err)
		}
	}
}
