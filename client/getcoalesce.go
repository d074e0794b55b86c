package client

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mooncake-go/mooncake/internal/base"
	"github.com/mooncake-go/mooncake/transfer"
)

// Lookups of gets, coalesced and refreshed ahead.
//
// A get that misses the lookup cache asks the leader where its key lives. Concurrent misses
// share calls (lookupBatch, the coalescer of coalesce.go): a miss while no lookup is in
// flight is sent at once, alone, as the Lookup it always was; misses while one is in flight
// queue and leave together as one BatchLookup when it returns (one leadership check on the
// master for all of them). The answers are the same linearizable reads as single Lookups.
//
// A get that hits an entry near its end of life (lookupCache.getRefresh) queues its key for
// a refresh in the background (refreshLookups): one goroutine at a time looks the queued
// keys up in BatchLookups of up to maxCoalesced and stores the answers, so keys read again
// and again never make a get wait for the master. It runs only while keys are queued.

// maxRefreshQueue bounds the keys waiting for a refresh; a key that finds the queue full is
// not refreshed (its entry expires and the next get looks it up).
const maxRefreshQueue = 4 * maxCoalesced

// lookupBatches holds the coalescer of cache-missing lookups and the refresh queue, built on
// first use.
type lookupBatches struct {
	once  sync.Once
	calls coalescer[lookupReq, *transfer.LookupResponse]
	ids   atomic.Uint64 // lookupReq ids

	mu struct {
		sync.Mutex // protects the fields below
		queue      []string
		running    bool // a refresh goroutine runs (it drains queue before it clears running)
	}
	// ctx ends at Close: a refresh in flight stops, none starts. wg counts refresh goroutines.
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// lookupReq is one get's lookup of key. id is unique: lookups are reads, so the lookups of
// one key may share a batch (the coalescer's one-item-per-key rule is for puts), and id is
// their coalescing key.
type lookupReq struct {
	key string
	id  uint64
}

func (c *Client) lookupBatch() *lookupBatches {
	b := &c.lookupB
	b.once.Do(func() {
		b.calls.send, b.calls.timeout = c.sendLookupReqs, c.cfg.Timeout
		b.calls.key = func(r lookupReq) string { return strconv.FormatUint(r.id, 36) }
		b.ctx, b.cancel = context.WithCancel(context.Background())
	})
	return b
}

// closeLookups stops the refreshes and waits for a refresh goroutine to return.
func (c *Client) closeLookups() {
	b := c.lookupBatch()
	b.mu.Lock() // refreshLookup checks ctx and adds to wg under mu: no Add after Wait
	b.cancel()
	b.mu.Unlock()
	b.wg.Wait()
}

// lookupCoalesced is lookup through the coalescer.
func (c *Client) lookupCoalesced(ctx context.Context, key string) (*transfer.LookupResponse, error) {
	b := c.lookupBatch()
	lr, err := b.calls.do(ctx, lookupReq{key: key, id: b.ids.Add(1)})
	if errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, base.ErrTimeout) {
		// Its deadline passed while it waited for the call in flight: the same error as a
		// call that timed out.
		err = fmt.Errorf("lookup: %w (%w)", base.ErrTimeout, err)
	}
	return lr, err
}

func (c *Client) sendLookupReqs(ctx context.Context, reqs []lookupReq) ([]itemResult[*transfer.LookupResponse], error) {
	keys := make([]string, len(reqs))
	for i, r := range reqs {
		keys[i] = r.key
	}
	return c.sendLookups(ctx, keys)
}

// sendLookups looks keys up: one Lookup for one key, one BatchLookup for several.
func (c *Client) sendLookups(ctx context.Context, keys []string) ([]itemResult[*transfer.LookupResponse], error) {
	out := make([]itemResult[*transfer.LookupResponse], len(keys))
	if len(keys) == 1 {
		out[0].res, out[0].err = c.lookup(ctx, keys[0])
		return out, nil
	}
	var resp transfer.BatchLookupResponse
	if err := c.masterCall(ctx, &transfer.BatchLookupRequest{Keys: keys}, &resp, nil); err != nil {
		return nil, err
	}
	if len(resp.Items) != len(keys) {
		return nil, fmt.Errorf("%w: batch lookup: %d answers for %d keys", base.ErrInternal, len(resp.Items), len(keys))
	}
	for i := range resp.Items {
		it := &resp.Items[i]
		switch err := it.Err.Err(); {
		case err != nil:
			out[i].err = err
		case len(it.Replicas) == 0:
			out[i].err = fmt.Errorf("%w: %q has no live replica", base.ErrObjectNotFound, keys[i])
		default:
			out[i].res = &it.LookupResponse
		}
	}
	return out, nil
}

// refreshLookup queues keys for a refresh of their cache entries (getRefresh told the
// caller to). A batch get queues its keys in one call, so one refresh asks for all of them
// (queued one by one, the refresh goroutine could start between two keys and ask twice).
// Keys that find the queue full are not refreshed.
func (c *Client) refreshLookup(keys ...string) {
	if len(keys) == 0 {
		return
	}
	b := c.lookupBatch()
	b.mu.Lock()
	n := 0 // keys queued
	if b.ctx.Err() == nil {
		n = min(len(keys), max(0, maxRefreshQueue-len(b.mu.queue)))
	}
	b.mu.queue = append(b.mu.queue, keys[:n]...)
	if n > 0 && !b.mu.running {
		b.mu.running = true
		b.wg.Add(1)
		go c.refreshLookups()
	}
	b.mu.Unlock()
	c.lookups.refreshFailed(keys[n:]...)
}

// refreshLookups looks up the queued keys, maxCoalesced per call, until the queue is empty,
// and caches the answers. A key the master no longer has is dropped from the cache; a key
// whose refresh failed keeps its entry until it expires.
func (c *Client) refreshLookups() {
	b := c.lookupBatch()
	defer b.wg.Done()
	for {
		b.mu.Lock()
		n := min(len(b.mu.queue), maxCoalesced)
		if n == 0 || b.ctx.Err() != nil {
			keys := b.mu.queue
			b.mu.queue, b.mu.running = nil, false
			b.mu.Unlock()
			c.lookups.refreshFailed(keys...)
			return
		}
		keys := append([]string(nil), b.mu.queue[:n]...)
		b.mu.queue = b.mu.queue[n:]
		b.mu.Unlock()

		toks, sent := c.lookups.tokens(keys), time.Now()
		ctx, cancel := context.WithTimeout(b.ctx, c.cfg.Timeout)
		res, err := c.sendLookups(ctx, keys)
		cancel()
		if err != nil {
			c.log.Debug("client: refreshing cached lookups failed; they expire", "keys", len(keys), "err", err)
			c.lookups.refreshFailed(keys...)
			continue
		}
		var gone []string
		for i, k := range keys {
			switch {
			case res[i].err == nil:
				if !c.lookups.put(k, res[i].res, toks[i], sent) {
					c.lookups.refreshFailed(k)
				}
			case errors.Is(res[i].err, base.ErrObjectNotFound):
				gone = append(gone, k)
			default:
				c.lookups.refreshFailed(k)
			}
		}
		c.lookups.drop(gone...)
	}
}
