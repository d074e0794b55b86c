package tier

import (
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/mooncake-go/mooncake/dram"
	"github.com/mooncake-go/mooncake/internal/base"
	"github.com/mooncake-go/mooncake/internal/invariants"
	"github.com/mooncake-go/mooncake/tier/policy"
)

// ErrClosed is returned by every method after Close. It matches base.ErrClosed.
var ErrClosed = fmt.Errorf("tier: engine closed: %w", base.ErrClosed)

// Engine is the worker-local storage engine: objects in the DRAM arena and, below it, the
// Lower tier. It is goroutine-safe. See doc.go for the goroutines it runs and its lock order.
type Engine struct {
	// Immutable after Open.
	opts  Options
	arena *dram.Arena
	lower Lower
	log   *slog.Logger
	ev    EventListener

	// Lock order: a key lock (lockKey) before mu; mu before the arena's lock (a leaf) and
	// before spillQ.mu. No callback and no Lower call runs under mu.
	mu struct {
		sync.Mutex
		closed bool
		// objects indexes committed objects by key; byID by policy ID. Both hold exactly the
		// objects the policy holds.
		objects map[string]*object
		byID    map[policy.ID]*object
		nextID  policy.ID
		pol     *policy.Policy
		// keyLocks holds a channel per key whose lower-tier writes or commit are in progress;
		// it is closed when they end (see lockKey).
		keyLocks map[string]chan struct{}
		// space is closed (and replaced) whenever DRAM bytes are freed or a spill ends: Puts
		// waiting for room select on it.
		space chan struct{}
		// writers / writerBytes count Writers between Put and Commit/Abort.
		writers     int64
		writerBytes int64
		m           counters
		// models interns model names and tallies their objects' bytes per tier (models.go).
		models modelTable
		// sup holds, per key, the versions local commits replaced while the master may still
		// list one of them (supersede.go), oldest first.
		// Invariant: versions ascend, and the key's current version, if any, is newer.
		sup map[string][]*superseded
		// supBytes sums the sizes of the versions in sup.
		supBytes int64
	}

	// labels is lower when it keeps labels (models.go), else nil. labelMu serializes
	// recording a model's name there (saveLabel). Lock order: labelMu before mu.
	labels  labeledLower
	labelMu sync.Mutex

	spillQ spillQueue
	kick   chan struct{} // cap 1: wakes the evictor
	// evictPass is held for one pass of the evictor down to the low watermark, victims
	// enqueued included (evictToLow): the background evictor's, or a test's Settle, which
	// thereby knows no pass is between its plan and its enqueue.
	evictPass sync.Mutex
	closeCh   chan struct{} // closed by Close
	wg        sync.WaitGroup
}

// object is one committed object version. Its fields are guarded by Engine.mu.
type object struct {
	id          policy.ID
	meta        base.ObjectMeta
	persistence base.Persistence
	hardPin     bool
	softUntil   time.Time
	// sessionPin: a member of a pinned KV session (kvpin.go), soft pinned without a deadline.
	sessionPin bool
	// copy is the DRAM copy; nil when the object is on the lower tier only.
	copy *dramCopy
	// onLower: the bytes are on the lower tier (durable put, spilled, SpillAll, or found at Open).
	onLower bool
	// lowerBytes is what the lower tier's record takes (footprint), set with onLower.
	lowerBytes int64
	// model is the interned tag of the put's model (0: none); counted is what the object adds
	// to its model's tally now (tallyLocked keeps it current).
	model   uint16
	counted tally
}

// dramCopy is one DRAM range holding an object's bytes. The engine holds one reference to h
// while the copy is attached to its object; every Reader and every spill job holds one more
// (holders counts them). Detaching (remove, replace, eviction) drops the engine's reference:
// the range is freed when the last holder releases, never under one.
type dramCopy struct {
	h    *dram.Handle
	id   policy.ID
	size int64
	// Guarded by Engine.mu.
	attached bool
	holders  int
}

// Open returns an engine over opts.Arena and opts.Lower. With a Lower it scans it and indexes
// every object found (on the lower tier only; WarmUp copies some into DRAM). Where the scan
// reports two versions of one key, the newer is kept and the older deleted.
func Open(opts Options) (*Engine, error) {
	opts.EnsureDefaults()
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	pol, err := policy.New(policy.Config{
		Capacity:      opts.Arena.Capacity(),
		HighWatermark: opts.HighWatermark,
		LowWatermark:  opts.LowWatermark,
		PromoteOnHit:  opts.PromoteOnHit,
		HasLower:      opts.Lower != nil,
	})
	if err != nil {
		return nil, fmt.Errorf("tier: %w", err)
	}
	e := &Engine{
		opts:    opts,
		arena:   opts.Arena,
		lower:   opts.Lower,
		log:     opts.Logger,
		ev:      opts.Events,
		kick:    make(chan struct{}, 1),
		closeCh: make(chan struct{}),
	}
	e.mu.objects = make(map[string]*object)
	e.mu.byID = make(map[policy.ID]*object)
	e.mu.keyLocks = make(map[string]chan struct{})
	e.mu.space = make(chan struct{})
	e.mu.sup = make(map[string][]*superseded)
	e.mu.pol = pol
	e.spillQ.init(opts.SpillQueueBytes)
	e.labels, _ = opts.Lower.(labeledLower)

	if e.lower != nil {
		if err := e.scanLower(); err != nil {
			return nil, err
		}
	}
	e.wg.Add(1)
	go e.runEvictor()
	if e.lower != nil {
		e.wg.Add(1)
		go e.runSpiller()
	}
	return e, nil
}

// scanLower indexes what the lower tier holds. Called by Open before any goroutine starts.
func (e *Engine) scanLower() error {
	start := time.Now()
	var stale []base.ObjectMeta
	var bytes int64
	scan := func(fn func(base.ObjectMeta, uint16) error) error {
		return e.lower.Scan(func(m base.ObjectMeta) error { return fn(m, 0) })
	}
	if e.labels != nil {
		names, err := e.labels.LabelNames()
		if err != nil {
			return fmt.Errorf("tier: open: reading model names from the lower tier: %w", err)
		}
		e.seedLabelsLocked(names)
		scan = e.labels.ScanLabeled
	}
	err := scan(func(m base.ObjectMeta, label uint16) error {
		if err := base.ValidateKey(m.Key); err != nil || m.Size <= 0 || m.Version == 0 {
			e.backgroundError(fmt.Errorf("tier: open: skipping bad lower-tier record %q version %d size %d", m.Key, m.Version, m.Size))
			return nil
		}
		if old := e.mu.objects[m.Key]; old != nil {
			if old.meta.Version >= m.Version {
				stale = append(stale, m)
				return nil
			}
			stale = append(stale, old.meta)
			e.mu.pol.Remove(old.id)
			delete(e.mu.byID, old.id)
			bytes -= old.meta.Size
			e.tallyLocked(old)
		}
		e.mu.nextID++
		o := &object{id: e.mu.nextID, meta: m, persistence: base.PersistenceSpill, onLower: true, lowerBytes: m.Size,
			model: e.knownTagLocked(label)}
		e.mu.objects[m.Key] = o
		e.mu.byID[o.id] = o
		e.tallyLocked(o)
		// Its mode is not recorded on the lower tier: it may have been durable, so its copy
		// there stays (never released on promotion nor evicted to make room).
		e.mu.pol.AddLower(policy.Object{ID: o.id, Size: m.Size, Persistence: o.persistence, KeepLower: true, Tenant: base.TenantOf(m.Key)})
		bytes += m.Size
		return nil
	})
	if err != nil {
		return fmt.Errorf("tier: open: scanning the lower tier: %w", err)
	}
	for _, m := range stale {
		if err := e.lower.Delete(m.Key, m.Version); err != nil && !isGone(err) {
			e.backgroundError(fmt.Errorf("tier: open: deleting stale %q version %d: %w", m.Key, m.Version, err))
		}
	}
	// What each record takes on the lower tier, for the per-model tallies. The model of an
	// object found here is not known (the lower tier does not keep it): it counts under "".
	for _, o := range e.mu.objects {
		o.lowerBytes = e.footprint(o.meta)
		e.tallyLocked(o)
	}
	e.log.Info("tier: indexed the lower tier", "objects", len(e.mu.objects), "bytes", bytes,
		"stale_deleted", len(stale), "duration", time.Since(start))
	return nil
}

// isGone reports a Delete/Read of something already gone: not an error for an idempotent delete.
func isGone(err error) bool {
	return errors.Is(err, base.ErrObjectNotFound) || errors.Is(err, base.ErrInvalidVersion)
}

// Watermarks returns the DRAM watermarks the engine runs with (Options after their defaults),
// as shares of the arena capacity.
func (e *Engine) Watermarks() (high, low float64) { return e.opts.HighWatermark, e.opts.LowWatermark }

// Close stops the background goroutines, abandons queued spills (the objects stay where they
// were: this is not SpillAll) and releases the engine's references to DRAM. Readers and
// Writers still held stay valid until released; release them before closing the arena.
// Closing twice returns nil.
//
// Steps: 1. mark closed and wake every waiter; 2. close the spill queue; 3. wait for the
// evictor and the spiller; 4. release every DRAM copy the index holds.
func (e *Engine) Close() error {
	e.mu.Lock()
	if e.mu.closed {
		e.mu.Unlock()
		return nil
	}
	e.verifyLocked()
	e.mu.closed = true
	close(e.closeCh)
	e.signalSpaceLocked()
	e.mu.Unlock()

	for _, j := range e.spillQ.close() {
		e.finishJob(j)
	}
	e.wg.Wait()

	e.mu.Lock()
	defer e.mu.Unlock()
	var errs []error
	for key := range e.mu.sup {
		// Their lower-tier records, if any, stay: the next Open finds them (the master
		// settles the key when this worker registers).
		if _, err := e.releaseAllSupLocked(key, nil); err != nil {
			errs = append(errs, err)
		}
	}
	for _, o := range e.mu.objects {
		if o.copy != nil {
			if err := e.detachLocked(o); err != nil {
				errs = append(errs, err)
			}
		}
	}
	return errors.Join(errs...)
}

// lockKey serialises commits and lower-tier writes and deletes of one key, so that a slow
// spill of version 1 can never land on the lower tier after version 2 and overwrite it.
// It returns the unlock function. Never called with mu held.
func (e *Engine) lockKey(key string) func() {
	e.mu.Lock()
	for {
		unlock, ok := e.tryLockKeyLocked(key)
		if ok {
			e.mu.Unlock()
			return unlock
		}
		ch := e.mu.keyLocks[key]
		e.mu.Unlock()
		<-ch
		e.mu.Lock()
	}
}

// tryLockKeyLocked takes key's lock if it is free (ok) and returns its unlock function,
// which must be called without mu. REQUIRES: e.mu.
func (e *Engine) tryLockKeyLocked(key string) (unlock func(), ok bool) {
	if _, busy := e.mu.keyLocks[key]; busy {
		return nil, false
	}
	ch := make(chan struct{})
	e.mu.keyLocks[key] = ch
	return func() {
		e.mu.Lock()
		delete(e.mu.keyLocks, key)
		e.mu.Unlock()
		close(ch)
	}, true
}

// signalSpaceLocked wakes every Put waiting for room. REQUIRES: e.mu.
func (e *Engine) signalSpaceLocked() {
	close(e.mu.space)
	e.mu.space = make(chan struct{})
}

// detachLocked drops an object's DRAM copy from the index: the engine's reference to the range
// is released; holders (readers, a spill job) keep it alive, and their bytes stay accounted
// as reserved until the last one lets go. The policy must already have stopped counting the
// copy (Remove, SpillDone, an eviction). REQUIRES: e.mu.
func (e *Engine) detachLocked(o *object) error {
	if e.ev.CopyDetached != nil {
		e.ev.CopyDetached(o.meta.Key) // before the Release below can free the range
	}
	c := o.copy
	o.copy = nil
	c.attached = false
	if c.holders > 0 {
		e.mu.pol.Reserve(c.size)
	} else {
		defer e.signalSpaceLocked()
	}
	e.tallyLocked(o)
	if err := c.h.Release(); err != nil {
		return fmt.Errorf("tier: releasing the DRAM copy of %q: %w", o.meta.Key, err)
	}
	return nil
}

// addHolderLocked makes one more holder of c (a Reader if reader, else a spill job) with its
// own reference to the range; releaseHolderLocked ends it. REQUIRES: e.mu.
func (e *Engine) addHolderLocked(c *dramCopy, reader bool) error {
	if err := c.h.Retain(); err != nil {
		return err
	}
	c.holders++
	if reader {
		e.mu.pol.Acquire(c.id)
	}
	return nil
}

// releaseHolderLocked ends one holder of c (a Reader if reader, else a spill job) and releases
// its reference. REQUIRES: e.mu.
func (e *Engine) releaseHolderLocked(c *dramCopy, reader bool) error {
	c.holders--
	if c.holders < 0 {
		return invariants.AssertionFailedf("tier: dram copy %d: holders %d < 0", c.id, c.holders)
	}
	if c.attached {
		if reader {
			e.mu.pol.Release(c.id)
		}
	} else if c.holders == 0 {
		e.mu.pol.Unreserve(c.size)
		e.signalSpaceLocked()
	}
	return c.h.Release()
}

// removeLocked takes o out of the index and the policy and detaches its DRAM copy. It returns
// whether the lower tier may hold its bytes (the caller deletes them there, outside mu).
// REQUIRES: e.mu.
func (e *Engine) removeLocked(o *object) (onLower bool, err error) {
	loc := e.mu.pol.Location(o.id)
	e.mu.pol.Remove(o.id)
	delete(e.mu.objects, o.meta.Key)
	delete(e.mu.byID, o.id)
	if o.copy != nil {
		err = e.detachLocked(o)
	}
	e.tallyLocked(o)
	return o.onLower || loc == policy.LocSpilling, err
}

// deleteLower deletes one version from the lower tier under the key's lock. Already gone is
// success.
func (e *Engine) deleteLower(m base.ObjectMeta) error {
	unlock := e.lockKey(m.Key)
	defer unlock()
	return e.deleteLowerKeyLocked(m)
}

// deleteLowerKeyLocked is deleteLower for a caller that holds the key's lock.
func (e *Engine) deleteLowerKeyLocked(m base.ObjectMeta) error {
	if err := e.lower.Delete(m.Key, m.Version); err != nil && !isGone(err) {
		e.mu.Lock()
		e.mu.m.lowerErrors++
		e.mu.Unlock()
		return fmt.Errorf("tier: deleting %q version %d from the lower tier: %w", m.Key, m.Version, err)
	}
	return nil
}

// lookupLocked finds key at version v (0: any). REQUIRES: e.mu.
func (e *Engine) lookupLocked(key string, v base.Version) (*object, error) {
	if e.mu.closed {
		return nil, ErrClosed
	}
	o := e.mu.objects[key]
	if o == nil {
		return nil, fmt.Errorf("%w: %q", base.ErrObjectNotFound, key)
	}
	if v != 0 && o.meta.Version != v {
		return nil, fmt.Errorf("%w: %q is at version %d, not %d", base.ErrInvalidVersion, key, o.meta.Version, v)
	}
	return o, nil
}

// Remove removes key (at version v; 0: any). Readers keep the bytes they hold until they
// release them. Errors: base.ErrObjectNotFound, base.ErrInvalidVersion, a lower-tier error
// (the object is gone from the index either way).
//
// Superseded versions (supersede.go) are the master's to settle: Remove of one's version
// releases it, Remove of the current version makes the newest superseded one current again,
// Remove with v == 0 drops them all.
func (e *Engine) Remove(key string, v base.Version) error {
	e.mu.Lock()
	// lower: superseded versions whose lower-tier records are ours to delete (outside mu).
	var lower []base.ObjectMeta
	var errs []error
	released := false // v == 0 released superseded versions
	if !e.mu.closed && len(e.mu.sup[key]) > 0 {
		if v == 0 {
			released = true
			var err error
			lower, err = e.releaseAllSupLocked(key, lower)
			errs = append(errs, err)
			e.mu.m.removes++
		} else if i := e.supIndexLocked(key, v); i >= 0 {
			lower, err := e.releaseSupLocked(key, i, lower)
			e.mu.m.removes++
			e.verifyLocked()
			e.mu.Unlock()
			return errors.Join(err, e.deleteLowers(lower))
		}
	}
	var restored *object
	o, err := e.lookupLocked(key, v)
	if err != nil {
		if s := e.newestSupLocked(key); s != nil && e.mu.objects[key] == nil && v > s.meta.Version {
			// The replacing version left without a Remove (evicted in cache mode, lost on
			// the lower tier) and the master drops it: the newest superseded one is current
			// again.
			restored, err = e.restoreLocked(key)
		} else if released {
			err = nil // only superseded versions were held
		}
		e.verifyLocked()
		e.mu.Unlock()
		errs = append(errs, err, e.deleteLowers(lower))
		if restored != nil {
			errs = append(errs, e.settleRestoredLower(restored))
		}
		return errors.Join(errs...)
	}
	onLower, err := e.removeLocked(o)
	errs = append(errs, err)
	e.mu.m.removes++
	if len(e.mu.sup[key]) > 0 {
		restored, err = e.restoreLocked(key)
		errs = append(errs, err)
	}
	e.verifyLocked()
	e.mu.Unlock()
	if onLower {
		errs = append(errs, e.deleteLower(o.meta))
	}
	errs = append(errs, e.deleteLowers(lower))
	if restored != nil {
		// After the removed version's record is gone: the restored one may have to be
		// written there again.
		errs = append(errs, e.settleRestoredLower(restored))
	}
	return errors.Join(errs...)
}

// deleteLowers deletes each version from the lower tier (deleteLower). Called without mu.
func (e *Engine) deleteLowers(ms []base.ObjectMeta) error {
	var errs []error
	for _, m := range ms {
		errs = append(errs, e.deleteLower(m))
	}
	return errors.Join(errs...)
}

// Exists reports whether key is committed (in any tier).
func (e *Engine) Exists(key string) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	return !e.mu.closed && e.mu.objects[key] != nil
}

func (e *Engine) infoLocked(o *object) ObjectInfo {
	info := ObjectInfo{ObjectMeta: o.meta, Tier: base.TierNVMe, OnLower: o.onLower,
		Persistence: o.persistence, HardPin: o.hardPin, SoftPinUntil: o.softUntil, SessionPinned: o.sessionPin}
	if o.copy != nil {
		info.Tier = base.TierDRAM
	}
	return info
}

// List returns the committed objects whose key starts with prefix, sorted by key (nil after
// Close).
func (e *Engine) List(prefix string) []ObjectInfo {
	e.mu.Lock()
	if e.mu.closed {
		e.mu.Unlock()
		return nil
	}
	var out []ObjectInfo
	for k, o := range e.mu.objects {
		if strings.HasPrefix(k, prefix) {
			out = append(out, e.infoLocked(o))
		}
	}
	e.mu.Unlock()
	sort.Slice(out, func(i, j int) bool { return out[i].Key < out[j].Key })
	return out
}

// Inventory returns every committed object, any tier, and every superseded version
// (supersede.go: the master may list one of them), sorted by key, then version (worker
// registration; nil after Close). A key held at several versions is listed once per version,
// the current one last.
func (e *Engine) Inventory() []base.ObjectMeta {
	e.mu.Lock()
	if e.mu.closed {
		e.mu.Unlock()
		return nil
	}
	out := make([]base.ObjectMeta, 0, len(e.mu.objects)+len(e.mu.sup))
	for _, o := range e.mu.objects {
		out = append(out, o.meta)
	}
	for _, l := range e.mu.sup {
		for _, s := range l {
			out = append(out, s.meta)
		}
	}
	e.mu.Unlock()
	sort.Slice(out, func(i, j int) bool {
		if out[i].Key != out[j].Key {
			return out[i].Key < out[j].Key
		}
		return out[i].Version < out[j].Version
	})
	return out
}

func (e *Engine) setPins(key string, until time.Time, hard bool) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	o, err := e.lookupLocked(key, 0)
	if err != nil {
		return err
	}
	o.hardPin, o.softUntil = hard, until
	if err := e.mu.pol.SetPins(o.id, hard, o.softPinNanos()); err != nil {
		return invariants.AssertionFailedf("tier: pin %q: %v", key, err)
	}
	return nil
}

func unixNanos(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixNano()
}

// backgroundError logs err and reports it to the listener.
func (e *Engine) backgroundError(err error) {
	e.log.Warn("tier: background error", "err", err)
	if e.ev.BackgroundError != nil {
		e.ev.BackgroundError(err)
	}
}

// lost reports an object that left this worker without a Remove.
func (e *Engine) lost(m base.ObjectMeta, why string) {
	if e.ev.ObjectLost != nil {
		e.ev.ObjectLost(m, why)
	}
}
