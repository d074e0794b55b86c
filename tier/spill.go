package tier

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/mooncake-go/mooncake/internal/base"
	"github.com/mooncake-go/mooncake/tier/policy"
)

// spillJob is one object on its way to the lower tier. It holds a reference to the object's
// DRAM copy (c.holders counts it) from the eviction decision until finishJob.
type spillJob struct {
	obj    *object
	c      *dramCopy
	queued time.Time
}

// spillQueue is a FIFO of spill jobs bounded in bytes: push waits while the queued and
// in-flight bytes plus the new job's would exceed the limit (a job alone may exceed it).
type spillQueue struct {
	mu sync.Mutex // protects the fields below; a leaf lock
	// jobs[head:] are queued. bytes counts queued jobs and the one being written.
	jobs   []*spillJob
	head   int
	bytes  int64
	limit  int64
	closed bool
	// changed is closed and replaced on every change: waiters select on it.
	changed chan struct{}
}

func (q *spillQueue) init(limit int64) {
	q.limit = limit
	q.changed = make(chan struct{})
}

func (q *spillQueue) changedLocked() {
	close(q.changed)
	q.changed = make(chan struct{})
}

// push queues j, waiting for room. It fails only when the queue is closed.
func (q *spillQueue) push(j *spillJob) error {
	q.mu.Lock()
	for !q.closed && q.bytes > 0 && q.bytes+j.c.size > q.limit {
		ch := q.changed
		q.mu.Unlock()
		<-ch
		q.mu.Lock()
	}
	defer q.mu.Unlock()
	if q.closed {
		return ErrClosed
	}
	q.jobs = append(q.jobs, j)
	q.bytes += j.c.size
	q.changedLocked()
	return nil
}

// pop waits for a job; ok is false once the queue is closed.
func (q *spillQueue) pop() (j *spillJob, ok bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	for !q.closed && q.head == len(q.jobs) {
		ch := q.changed
		q.mu.Unlock()
		<-ch
		q.mu.Lock()
	}
	if q.closed {
		return nil, false
	}
	j = q.jobs[q.head]
	q.jobs[q.head] = nil
	q.head++
	if q.head == len(q.jobs) {
		q.jobs, q.head = q.jobs[:0], 0
	}
	return j, true
}

// done ends a popped job: its bytes leave the bound. Called with Engine.mu held (spillQ.mu
// is a leaf).
func (q *spillQueue) done(size int64) {
	q.mu.Lock()
	q.bytes -= size
	q.changedLocked()
	q.mu.Unlock()
}

// queuedBytes returns the queued and in-flight bytes.
func (q *spillQueue) queuedBytes() int64 {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.bytes
}

// waitIdle waits until no job is queued or in flight.
func (q *spillQueue) waitIdle(ctx context.Context) error {
	q.mu.Lock()
	for !q.closed && q.bytes > 0 {
		ch := q.changed
		q.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		}
		q.mu.Lock()
	}
	closed := q.closed
	q.mu.Unlock()
	if closed {
		return ErrClosed
	}
	return nil
}

// close wakes every waiter and returns the jobs never popped.
func (q *spillQueue) close() []*spillJob {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.closed {
		return nil
	}
	q.closed = true
	left := q.jobs[q.head:]
	q.jobs, q.head = nil, 0
	q.changedLocked()
	return left
}

// enqueue pushes spill jobs (waiting for room in the queue). On a closed queue the remaining
// jobs are finished without writing.
func (e *Engine) enqueue(jobs []*spillJob) error {
	for i, j := range jobs {
		if err := e.spillQ.push(j); err != nil {
			for _, left := range jobs[i:] {
				e.finishJob(left)
			}
			return err
		}
	}
	return nil
}

// finishJob releases a job's hold on its DRAM copy without spilling (Close).
func (e *Engine) finishJob(j *spillJob) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if err := e.releaseHolderLocked(j.c, false); err != nil {
		e.log.Error("tier: dropping a spill job", "key", j.obj.meta.Key, "err", err)
	}
}

// kickEvictor wakes the background evictor without blocking.
func (e *Engine) kickEvictor() {
	select {
	case e.kick <- struct{}{}:
	default:
	}
}

// runEvictor is the background evictor goroutine: woken by Puts past the high watermark, it
// evicts down to the low watermark (drops at once, spills through the bounded queue, waiting
// for room there). It exits on Close.
func (e *Engine) runEvictor() {
	defer e.wg.Done()
	for {
		select {
		case <-e.kick:
		case <-e.closeCh:
			return
		}
		if err := e.evictToLow(); err != nil {
			return
		}
	}
}

// evictToLow is one pass of the evictor: it evicts down to the low watermark (drops at once,
// spills enqueued, waiting for room in the queue). It returns the queue's error once the
// engine is closed.
func (e *Engine) evictToLow() error {
	e.evictPass.Lock()
	defer e.evictPass.Unlock()
	for {
		e.mu.Lock()
		if e.mu.closed {
			e.mu.Unlock()
			return nil
		}
		plan := e.mu.pol.EvictToLow(e.opts.Now().UnixNano())
		if len(plan.Victims) == 0 {
			// Pinned or in use: nothing to do until something changes (the next Put kicks).
			e.mu.Unlock()
			return nil
		}
		jobs, events := e.applyVictimsLocked(plan.Victims, EvictWatermark)
		e.mu.Unlock()
		e.fireEvicted(events)
		if err := e.enqueue(jobs); err != nil {
			return err
		}
	}
}

// runSpiller is the spill worker goroutine: one job at a time (the lower tier is one appender,
// and order per key is kept), it writes the object to the lower tier and then frees its DRAM
// copy. A failed spill drops the object (it is a cache; ObjectLost tells the server). It exits
// on Close.
func (e *Engine) runSpiller() {
	defer e.wg.Done()
	for {
		j, ok := e.spillQ.pop()
		if !ok {
			return
		}
		e.spill(j)
	}
}

func (e *Engine) spill(j *spillJob) {
	o := j.obj
	// Callbacks run after the key lock is released: a listener may touch the same key.
	var after []func()
	defer func() {
		for _, f := range after {
			f()
		}
	}()
	unlock := e.lockKey(o.meta.Key)
	defer unlock()

	start := time.Now()
	e.mu.Lock()
	current := func() bool {
		return e.mu.byID[o.id] == o && e.mu.pol.Location(o.id) == policy.LocSpilling
	}
	wrote, err := false, error(nil)
	refused := false
	if current() {
		refused = e.makeSpillRoomLocked(o)
	}
	if current() && !refused {
		e.mu.Unlock()
		// j holds a reference to the range: it cannot be freed under this write.
		err = e.putLower(o.meta, j.c.h.Bytes(), false, o.model)
		wrote = err == nil
		var foot int64
		if wrote {
			foot = e.footprint(o.meta)
		}
		e.mu.Lock()
		if wrote {
			o.lowerBytes = foot
		}
	}
	info := SpillInfo{Meta: o.meta, Duration: time.Since(start), Err: err}
	stillCurrent := current()
	var why string // non-empty: the object is lost, and why
	if stillCurrent {
		why = e.endSpillLocked(o, wrote, refused, err)
	}
	if rerr := e.releaseHolderLocked(j.c, false); rerr != nil {
		e.log.Error("tier: spill", "err", rerr)
	}
	// The job leaves the queue's bound before Puts are woken: a Put waits while the queue is
	// not empty, so it must see the new count when it wakes.
	e.spillQ.done(j.c.size)
	e.signalSpaceLocked()
	e.verifyLocked()
	e.mu.Unlock()

	if wrote && !stillCurrent {
		// Removed or replaced while being written: the copy just written is stale. The key lock
		// is held, so no newer version of the key can be on the lower tier yet.
		if derr := e.deleteLowerKeyLocked(o.meta); derr != nil {
			after = append(after, func() { e.backgroundError(derr) })
		}
	}
	if err != nil && stillCurrent {
		err := fmt.Errorf("tier: spill of %q version %d failed, object dropped: %w", o.meta.Key, o.meta.Version, err)
		after = append(after, func() { e.backgroundError(err) })
	}
	if e.ev.SpillEnd != nil && (wrote || err != nil) {
		after = append(after, func() { e.ev.SpillEnd(info) })
	}
	if why != "" {
		after = append(after, func() { e.lost(o.meta, why) })
	}
}

// makeSpillRoomLocked applies the tenant's NVMe share (tier/policy tenants.go) to the spill of
// o: its own least recently used lower-tier objects are evicted first, or the object is not
// spilled at all (refused). REQUIRES: e.mu and o's key lock; e.mu is released while the
// victims are dropped and held again on return.
func (e *Engine) makeSpillRoomLocked(o *object) (refused bool) {
	victims, ok := e.mu.pol.SpillPlan(o.id, e.lowerBusyLocked())
	quota := e.takeLowerVictimsLocked(victims)
	for _, v := range quota {
		e.mu.m.nvmeQuotaEvictions++
		e.mu.m.nvmeQuotaEvictedBytes += v.meta.Size
	}
	if len(quota) > 0 {
		e.mu.Unlock()
		e.dropLowerVictims(quota, "evicted from the lower tier: its tenant is at its NVMe quota (least recently used first)")
		e.mu.Lock()
	}
	return !ok
}

// endSpillLocked ends the spill of o, still the current object and still spilling: on the
// lower tier when the write succeeded, else dropped from DRAM with its bytes freed all the
// same. It returns why o was lost, or "" when it was spilled. REQUIRES: e.mu.
func (e *Engine) endSpillLocked(o *object, wrote, refused bool, err error) (lostWhy string) {
	if wrote {
		if perr := e.mu.pol.SpillDone(o.id, true); perr != nil {
			e.log.Error("tier: spill", "err", perr)
		}
		o.onLower = true
		if derr := e.detachLocked(o); derr != nil {
			e.log.Error("tier: spill", "err", derr)
		}
		e.mu.m.spills++
		e.mu.m.spillBytes += o.meta.Size
		return ""
	}
	// The lower tier refused it (full, I/O error), or its tenant's NVMe share has no room
	// for it: the DRAM bytes must still be freed.
	_ = e.mu.pol.SpillDone(o.id, false)
	delete(e.mu.objects, o.meta.Key)
	delete(e.mu.byID, o.id)
	if derr := e.detachLocked(o); derr != nil {
		e.log.Error("tier: spill", "err", derr)
	}
	if refused {
		e.mu.m.nvmeQuotaDrops++
		e.mu.m.nvmeQuotaDroppedBytes += o.meta.Size
		return "evicted from DRAM without a spill: its tenant's NVMe quota has no room for it"
	}
	e.mu.m.spillErrors++
	if err == nil { // not reached: an unwritten, unrefused spill that is still current failed
		return "spill to the lower tier failed"
	}
	return "spill to the lower tier failed: " + err.Error()
}

// SpillAll writes every DRAM object that is not yet on the lower tier (spill and durable
// modes; cache-mode objects are meant to be lost) to the lower tier, synced, keeping the DRAM
// copies: the SIGTERM path, so that a graceful restart finds them. Spills queued by eviction
// are waited for (they may be queued while SpillAll runs: it loops until none is left). It
// stops when ctx ends and then returns an error wrapping ctx.Err() that says how many objects
// were written. Objects whose write fails are reported to BackgroundError and skipped. Without
// a lower tier it returns nil. Callers should stop Puts first (the server stops accepting).
func (e *Engine) SpillAll(ctx context.Context) error {
	if e.lower == nil {
		return nil
	}
	failed := map[*object]bool{}
	var done int
	var bytes int64
	start := time.Now()
	for {
		// Spills queued by eviction, possibly after the last round's snapshot, end first: their
		// objects are then on the lower tier (or dropped, if the write failed).
		if err := e.spillQ.waitIdle(ctx); err != nil {
			return fmt.Errorf("tier: spill all: %d objects written; waiting for queued spills: %w", done, err)
		}
		e.mu.Lock()
		if e.mu.closed {
			e.mu.Unlock()
			return ErrClosed
		}
		var todo []*object
		for _, o := range e.mu.objects {
			if o.copy != nil && !o.onLower && o.persistence != base.PersistenceCache && !failed[o] {
				todo = append(todo, o)
			}
		}
		e.mu.Unlock()
		if len(todo) == 0 {
			if e.spillQ.queuedBytes() == 0 {
				break
			}
			continue // an eviction queued a spill after waitIdle
		}
		for i, o := range todo {
			if err := ctx.Err(); err != nil {
				return fmt.Errorf("tier: spill all: %d objects written, at least %d left: %w", done, len(todo)-i, err)
			}
			wrote, err := e.spillOne(o)
			if err != nil {
				failed[o] = true
				e.backgroundError(err)
				continue
			}
			if wrote {
				done++
				bytes += o.meta.Size
			}
		}
	}
	e.log.Info("tier: spilled all DRAM objects", "objects", done, "bytes", bytes,
		"failed", len(failed), "duration", time.Since(start))
	return nil
}

// spillOne writes o to the lower tier (synced) if it is still current in DRAM and not being
// spilled by eviction, keeping the copy. wrote: this call wrote it.
func (e *Engine) spillOne(o *object) (wrote bool, err error) {
	unlock := e.lockKey(o.meta.Key)
	defer unlock()
	e.mu.Lock()
	if e.mu.byID[o.id] != o || o.copy == nil || o.onLower || e.mu.pol.Location(o.id) != policy.LocDRAM {
		e.mu.Unlock()
		// Removed, replaced, evicted or written meanwhile; or being spilled by eviction, which
		// the caller waits for.
		return false, nil
	}
	c := o.copy
	if err := e.addHolderLocked(c, false); err != nil {
		e.mu.Unlock()
		return false, err
	}
	e.mu.Unlock()

	err = e.putLower(o.meta, c.h.Bytes(), true, o.model)
	var foot int64
	if err == nil {
		foot = e.footprint(o.meta)
	}

	e.mu.Lock()
	if err == nil && e.mu.byID[o.id] == o && e.mu.pol.Location(o.id) == policy.LocDRAM {
		_ = e.mu.pol.MarkOnLower(o.id)
		o.onLower, o.lowerBytes = true, foot
		e.tallyLocked(o)
		e.mu.m.spills++
		e.mu.m.spillBytes += o.meta.Size
	} else if err != nil {
		e.mu.m.spillErrors++
	}
	rerr := e.releaseHolderLocked(c, false)
	// Removed or replaced meanwhile. (If eviction picked it meanwhile, its spill job writes
	// it again after this key lock is released: wasteful, rare and harmless.)
	stale := err == nil && e.mu.byID[o.id] != o
	e.mu.Unlock()
	if stale {
		// Removed meanwhile: do not leave it on the lower tier.
		return false, e.deleteLowerKeyLocked(o.meta)
	}
	if err != nil {
		return false, fmt.Errorf("tier: spill all: %q version %d: %w", o.meta.Key, o.meta.Version, err)
	}
	return true, rerr
}

// WarmUp copies lower-tier-only objects into DRAM, in key order, while DRAM
// stays under the low watermark and at most maxBytes are loaded (maxBytes <= 0: no limit but
// the watermark). It never evicts. It returns the number of objects loaded. After a restart
// the engine does not know which objects were hot (access history is not persisted), so the
// order is simply the keys'.
func (e *Engine) WarmUp(ctx context.Context, maxBytes int64) (int, error) {
	if e.lower == nil {
		return 0, nil
	}
	e.mu.Lock()
	var todo []*object
	for _, o := range e.mu.objects {
		if o.copy == nil {
			todo = append(todo, o)
		}
	}
	e.mu.Unlock()
	sort.Slice(todo, func(i, j int) bool { return todo[i].meta.Key < todo[j].meta.Key })
	limit := int64(e.opts.LowWatermark * float64(e.arena.Capacity()))
	var loaded int
	var bytes int64
	for _, o := range todo {
		if err := ctx.Err(); err != nil {
			return loaded, err
		}
		if maxBytes > 0 && bytes+o.meta.Size > maxBytes {
			continue
		}
		e.mu.Lock()
		if e.mu.closed {
			e.mu.Unlock()
			return loaded, ErrClosed
		}
		if e.mu.pol.Used()+o.meta.Size > limit || e.mu.byID[o.id] != o || o.copy != nil {
			e.mu.Unlock()
			continue
		}
		h, err := e.arena.Alloc(o.meta.Size)
		if err != nil {
			e.mu.Unlock()
			continue
		}
		e.mu.pol.Reserve(o.meta.Size)
		e.mu.Unlock()
		// A forced promotion through the read path: the Reader is released at once.
		r, err := e.readLower(o, o.meta, h, true, false)
		if err != nil {
			e.backgroundError(fmt.Errorf("tier: warm-up: %w", err))
			continue
		}
		if r.c != nil {
			loaded++
			bytes += o.meta.Size
		}
		r.Release()
	}
	return loaded, nil
}
