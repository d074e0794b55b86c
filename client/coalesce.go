package client

import (
	"context"
	"sync"
	"time"
)

// maxCoalesced bounds the items of one coalesced call: far under the master's batch limit
// (raftmeta.MaxBatch) and, with keys of at most base.MaxKeyLen, under the frame body limit.
const maxCoalesced = 128

// coalescer merges concurrent calls of one kind into batch calls: group commit for PutEnd
// (one BatchPutEnd, one raft entry, for the puts that ended while the previous call was in
// flight) and the same for PutStart.
//
// The window is adaptive, never a timer: a call made while none is in flight is sent at
// once, alone, from the caller's goroutine (at concurrency 1 nothing waits and nothing
// changes hands); calls made while one is in flight queue and leave together, from a flush
// goroutine, as soon as it returns. So a batch holds what arrived during one round trip,
// and each caller still returns only after its own item's answer: nothing is acknowledged
// earlier or less durably than a call of its own would be.
//
// Items whose key() is equal never share a call (the later waits for the next one), so a
// batch never asks the master to start or end two puts of one key in one entry.
type coalescer[Req, Res any] struct {
	// send makes one call for reqs (len >= 1) before ctx ends and returns one result per
	// item in order, or an error for the whole call (which each item then returns).
	send func(ctx context.Context, reqs []Req) ([]itemResult[Res], error)
	key  func(Req) string
	// timeout bounds a call whose items have no deadline.
	timeout time.Duration

	mu struct {
		sync.Mutex // protects the fields below
		// busy is true while a call is in flight (a caller's own, or the flush goroutine's,
		// which drains queue before clearing busy), so queue is empty whenever busy is false.
		busy  bool
		queue []*coalesced[Req, Res]
	}
}

// itemResult is one item's outcome of a batch call.
type itemResult[Res any] struct {
	res Res
	err error
}

// coalesced is one caller's item. res and err are written by the flush goroutine before it
// closes done; the caller reads them only after done is closed.
type coalesced[Req, Res any] struct {
	ctx  context.Context
	req  Req
	res  itemResult[Res]
	done chan struct{}
}

// do sends req, alone and on the caller's goroutine when no call is in flight, else queues
// it for the flush goroutine and waits for its result or the end of ctx. An item whose ctx
// ended before its batch left is never sent. An item whose ctx ends while its call is in
// flight returns ctx's error although the call may still succeed: the same ambiguity as a
// call of its own abandoned on cancellation (put revokes it).
func (c *coalescer[Req, Res]) do(ctx context.Context, req Req) (Res, error) {
	c.mu.Lock()
	if !c.mu.busy {
		// Nothing in flight (so nothing queued): this call goes at once, as a call of its
		// own, under the caller's ctx. Calls arriving meanwhile queue behind it.
		c.mu.busy = true
		c.mu.Unlock()
		res, err := c.send(ctx, []Req{req})
		c.mu.Lock()
		if len(c.mu.queue) == 0 {
			c.mu.busy = false
		} else {
			go c.drain() // it inherits busy
		}
		c.mu.Unlock()
		if err != nil {
			var zero Res
			return zero, err
		}
		return res[0].res, res[0].err
	}
	it := &coalesced[Req, Res]{ctx: ctx, req: req, done: make(chan struct{})}
	c.mu.queue = append(c.mu.queue, it)
	c.mu.Unlock()
	select {
	case <-it.done:
		return it.res.res, it.res.err
	case <-ctx.Done():
		var zero Res
		return zero, ctx.Err()
	}
}

// drain sends batches until the queue is empty. Only one drain runs at a time (busy).
func (c *coalescer[Req, Res]) drain() {
	for {
		c.mu.Lock()
		batch := c.takeLocked()
		if len(batch) == 0 {
			c.mu.busy = false
			c.mu.Unlock()
			return
		}
		c.mu.Unlock()
		c.flush(batch)
	}
}

// takeLocked removes the next batch from the queue: up to maxCoalesced live items with
// distinct keys, in arrival order. Items whose ctx ended are dropped (their callers have
// returned). REQUIRES: c.mu.
func (c *coalescer[Req, Res]) takeLocked() []*coalesced[Req, Res] {
	var batch, rest []*coalesced[Req, Res]
	var seen map[string]bool
	for _, it := range c.mu.queue {
		if it.ctx.Err() != nil {
			continue
		}
		k := c.key(it.req)
		if len(batch) == maxCoalesced || seen[k] {
			rest = append(rest, it)
			continue
		}
		if seen == nil {
			seen = make(map[string]bool)
		}
		seen[k] = true
		batch = append(batch, it)
	}
	c.mu.queue = rest
	return batch
}

// flush makes one call for batch and hands each item its result. The call's deadline is the
// latest of the items' (each caller stops waiting at its own).
func (c *coalescer[Req, Res]) flush(batch []*coalesced[Req, Res]) {
	reqs := make([]Req, len(batch))
	deadline, bounded := time.Time{}, true
	for i, it := range batch {
		reqs[i] = it.req
		d, ok := it.ctx.Deadline()
		bounded = bounded && ok
		if d.After(deadline) {
			deadline = d
		}
	}
	if !bounded { // never in practice: callers apply Config.Timeout
		deadline = time.Now().Add(c.timeout)
	}
	ctx, cancel := context.WithDeadline(context.Background(), deadline)
	defer cancel()
	res, err := c.send(ctx, reqs)
	for i, it := range batch {
		if err != nil {
			it.res.err = err
		} else {
			it.res = res[i]
		}
		close(it.done)
	}
}
