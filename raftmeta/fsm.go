package raftmeta

import (
	"container/heap"
	"encoding/binary"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"
	"sync"

	"github.com/mooncake-go/mooncake/internal/base"
	"github.com/mooncake-go/mooncake/internal/invariants"
)

// hardPinBit is the top bit of objRec.sizeFlags; the low 63 bits hold the size.
const hardPinBit = 1 << 63

// maxSlots bounds the workers the FSM can hold at once: slot numbers are uint16 and slot 0 is
// never used, so a zero uint16 never names a worker.
const maxSlots = 1<<16 - 1

// objRec is one object's record. It is built to be small (see doc.go, "Memory"):
// 64 bytes in a recTable chunk, plus the replica string's bytes (the map holds key -> index).
//
// Invariant: reps is non-empty, has even length, and every uint16 in it names an occupied
// slot whose worker is listed once.
// Records live in a recTable and apply overwrites them in place; a snapshot copies the table
// (its chunks) and shares the replica strings, which are immutable.
type objRec struct {
	sizeFlags uint64 // size | hardPinBit
	version   uint64
	checksum  uint64
	created   int64
	softPin   int64
	reps      string // packed little-endian uint16 worker slots
	tokens    uint32 // KV-cache tokens the object holds, 0 if not given (models.go)
	model     uint16 // index in state.mdl, 0 for none
}

func (r *objRec) size() int64   { return int64(r.sizeFlags &^ hardPinBit) }
func (r *objRec) hardPin() bool { return r.sizeFlags&hardPinBit != 0 }
func (r *objRec) nreps() int    { return len(r.reps) / 2 }
func (r *objRec) rep(i int) uint16 {
	return uint16(r.reps[2*i]) | uint16(r.reps[2*i+1])<<8
}

// segRec is one worker, at its slot.
type segRec struct {
	id      base.WorkerID
	addr    string
	dram    int64
	nvme    int64
	state   SegmentState
	objects int64 // derived: replicas held
	bytes   int64 // derived: their sizes
	// deadSince is MarkWorkerLost's clock (unix nanoseconds) while state is SegmentDead by
	// that command, else 0. draining is SetWorkerDraining's flag (it survives death and
	// return). lost is derived: the lost replicas naming this slot.
	deadSince int64
	draining  bool
	lost      int64
}

// recChunkBits sets the records per chunk of a recTable (4096 records, 224 KiB): big enough
// that chunk headers cost nothing per object, small enough that the last chunk's slack does
// not matter.
const recChunkBits = 12

// recTable holds object records densely in fixed-size chunks, addressed by a uint32 index that
// the objects map holds. Keeping records out of the map makes a map slot 24 bytes instead of
// 72, and Go's map (Swiss table: groups of 8 slots, tables split when 7/8 full) carries 1.1x
// to 2.3x its live slots, so the slack now costs 24-byte slots instead of 72-byte ones (see
// doc.go, "Memory"). Freed indexes are reused (LIFO); chunks are only returned by RemoveAll
// or a restore. Indexes are private to one state: two equal states may number records
// differently, so compare states by key, never by index.
type recTable struct {
	chunks [][]objRec // every chunk has length 1<<recChunkBits
	n      uint32     // indexes handed out so far (free ones included)
	free   []uint32   // released indexes, reused first
}

func (t *recTable) at(i uint32) *objRec {
	return &t.chunks[i>>recChunkBits][i&(1<<recChunkBits-1)]
}

func (t *recTable) alloc() uint32 {
	if k := len(t.free); k > 0 {
		i := t.free[k-1]
		t.free = t.free[:k-1]
		return i
	}
	if int(t.n>>recChunkBits) == len(t.chunks) {
		t.chunks = append(t.chunks, make([]objRec, 1<<recChunkBits))
	}
	t.n++
	return t.n - 1
}

// release zeroes record i (dropping its replica string) and makes i reusable.
func (t *recTable) release(i uint32) {
	*t.at(i) = objRec{}
	t.free = append(t.free, i)
}

func (t *recTable) clone() recTable {
	c := recTable{n: t.n, free: slices.Clone(t.free), chunks: make([][]objRec, len(t.chunks))}
	for i, ch := range t.chunks {
		c.chunks[i] = slices.Clone(ch)
	}
	return c
}

// state is the whole replicated state. It has no lock: fsm guards it, and restore builds a new
// one before swapping it in.
type state struct {
	// objects maps each key to its record's index in recs.
	// Invariant: every index in objects is distinct and allocated in recs.
	objects map[string]uint32
	recs    recTable
	// slots[i] is the worker at slot i (nil: free). Slot 0 is never used. Allocation takes the
	// lowest free slot, so the slot of each worker depends only on the applied commands.
	slots   []*segRec
	slotOf  map[base.WorkerID]uint16
	masters map[string]string
	// lost maps a key to its lost replicas: packed uint16 slots of workers that held this
	// version when MarkWorkerLost was applied (see lifecycle.go). Only keys with some.
	// Invariant: every key in lost is in objects, its slots name occupied slots, and no slot is
	// both live and lost; an object with no live replica has a lost one.
	lost map[string]string
	// mdl is the model registry and per-model counters (models.go).
	mdl modelTable
	// kvs is the KV-session registry (kvsession.go).
	kvs kvSessions
	// tenants holds each tenant's quota and usage (tenants.go); only tenants with either.
	tenants map[string]tenantRec
	// tenantDefault is the default quota: the quota of every tenant without its own
	// (SetTenantQuota with Default; tenants.go). Zero: none. tenantDefaultSet is true once
	// any SetTenantQuota with Default applied, even one that removed it (a master's
	// --default_tenant_quota_bytes seeds only a state where it is false).
	tenantDefault    tenantQuota
	tenantDefaultSet bool

	// Counters kept by apply (see Stats). invisible counts objects with no live replica.
	keyBytes, bytes, replicas, softPinned, hardPinned int64
	invisible, lostReplicas                           int64

	// evSeq is the KV event sequence of the last entry with events (kvevents.go); replicated
	// (snapshot section 40). evN counts and ev collects the events of the entry being applied
	// (not state); evKeep says whether to collect them (fsm.keepEvents, set per entry).
	evSeq  uint64
	evN    int
	ev     []KVEvent
	evKeep bool
}

func newState() *state {
	return &state{
		objects: make(map[string]uint32),
		slots:   make([]*segRec, 1),
		slotOf:  make(map[base.WorkerID]uint16),
		masters: make(map[string]string),
		lost:    make(map[string]string),
	}
}

// fsm is the state machine raft drives. Apply runs on raft's FSM goroutine only; reads run on
// any goroutine.
type fsm struct {
	mu sync.RWMutex // protects st, applied, appliedCh
	st *state
	// applied is the last raft index applied (or restored). appliedCh is closed and replaced
	// whenever applied moves, to wake WaitApplied.
	applied   uint64
	appliedCh chan struct{}
	// events holds the last KV event batches (kvevents.go), kept only once keepEvents is set
	// (Node.KeepKVEvents): the sequence is counted either way.
	events     kvEventRing
	keepEvents bool
}

func newFSM() *fsm { return &fsm{st: newState(), appliedCh: make(chan struct{})} }

// advanceLocked records index as applied and wakes waiters. REQUIRES: f.mu held for writing.
func (f *fsm) advanceLocked(index uint64) {
	if index <= f.applied {
		return
	}
	f.applied = index
	close(f.appliedCh)
	f.appliedCh = make(chan struct{})
}

// apply runs one decoded command against st and returns its result. It is deterministic: it
// reads nothing but st and c (no clock, no randomness, no I/O, no map iteration order leaking
// into the result). REQUIRES: the caller owns st exclusively (f.mu held for writing).
func (st *state) apply(c Command) Result {
	// Re-check what the proposer's Validate checked: a decoded entry is not trusted. PutEnd
	// items are checked one by one in putEnd, so one bad item does not fail the batch.
	if p, ok := c.(PutEnd); ok {
		if err := checkBatch(len(p.Items)); err != nil {
			return Result{Err: err}
		}
	} else if err := c.Validate(); err != nil {
		return Result{Err: err}
	}
	if res, ok := st.applyLifecycle(c); ok {
		return res
	}
	if res, ok := st.applyTenant(c); ok {
		return res
	}
	switch c := c.(type) {
	case PutEnd:
		return st.putEnd(&c)
	case Remove, RemoveRegex, RemoveAll:
		return st.applyRemove(c)
	case RegisterWorker:
		if slot, ok := st.slotOf[c.ID]; ok {
			s := st.slots[slot]
			s.addr, s.dram, s.nvme, s.state = c.Address, c.DRAMCapacity, c.NVMeCapacity, SegmentActive
			s.deadSince = 0
			return Result{}
		}
		slot := st.freeSlot()
		if slot == 0 {
			return Result{Err: fmt.Errorf("raftmeta: register %q: %d workers already: %w", c.ID, maxSlots, base.ErrNoSpace)}
		}
		st.slots[slot] = &segRec{id: c.ID, addr: c.Address, dram: c.DRAMCapacity, nvme: c.NVMeCapacity, state: SegmentActive}
		st.slotOf[c.ID] = slot
		return Result{}
	case UnregisterWorker:
		slot, ok := st.slotOf[c.ID]
		if !ok {
			return Result{Err: fmt.Errorf("raftmeta: unregister %q: %w", c.ID, base.ErrSegmentNotFound)}
		}
		return st.unregister(c.ID, slot)
	case MarkWorkerDead:
		slot, ok := st.slotOf[c.ID]
		if !ok {
			return Result{Err: fmt.Errorf("raftmeta: mark dead %q: %w", c.ID, base.ErrSegmentNotFound)}
		}
		res := st.dropWorker(slot)
		st.slots[slot].state = SegmentDead
		return res
	case DropReplicas:
		return st.dropReplicas(&c)
	case SetPin:
		_, rec := st.find(c.Key)
		if rec == nil || (c.Version != 0 && base.Version(rec.version) != c.Version) {
			return Result{Err: fmt.Errorf("raftmeta: pin %q version %d: %w", c.Key, c.Version, base.ErrObjectNotFound)}
		}
		st.unaccount(rec)
		rec.softPin = c.SoftPinUntil
		rec.sizeFlags &^= hardPinBit
		if c.HardPin {
			rec.sizeFlags |= hardPinBit
		}
		st.account(rec)
		return Result{}
	case KVSession:
		return st.applyKVSession(&c)
	case RegisterModel:
		return st.registerModel(c)
	case RemoveModel:
		return st.removeModel(c)
	case RegisterMaster:
		if c.RPCAddr == "" {
			delete(st.masters, c.ID)
		} else {
			st.masters[c.ID] = c.RPCAddr
		}
		return Result{}
	}
	return Result{Err: fmt.Errorf("raftmeta: command %T: %w", c, base.ErrNotSupported)}
}

// unregister forgets worker id at slot: its replicas, live and lost, are dropped, objects
// left with none are removed, and the slot is freed.
func (st *state) unregister(id base.WorkerID, slot uint16) Result {
	res := st.dropWorker(slot)
	res.Removed += st.forgetLost(slot).Removed
	st.slots[slot] = nil
	delete(st.slotOf, id)
	for len(st.slots) > 1 && st.slots[len(st.slots)-1] == nil {
		st.slots = st.slots[:len(st.slots)-1]
	}
	return res
}

// applyRemove applies Remove, RemoveRegex and RemoveAll. Result.Removed counts visible
// objects only; an invisible one (every replica lost) is removed too, so it never comes back.
func (st *state) applyRemove(c Command) Result {
	switch c := c.(type) {
	case Remove:
		res := Result{Items: make([]error, len(c.Keys))}
		for i, k := range c.Keys {
			if ri, ok := st.objects[k]; ok && st.recs.at(ri).nreps() > 0 {
				res.Gone = append(res.Gone, st.object(k, st.recs.at(ri)))
				st.emitRemoved(KVRemoved, k, st.recs.at(ri))
				st.removeAt(k, ri)
				res.Removed++
			} else {
				// An invisible object (every replica lost) is removed too, so it never comes
				// back, but to the caller it did not exist.
				if ok {
					res.Gone = append(res.Gone, st.object(k, st.recs.at(ri)))
					st.removeAt(k, ri)
				}
				res.Items[i] = fmt.Errorf("raftmeta: remove %q: %w", k, base.ErrObjectNotFound)
			}
		}
		return res.single()
	case RemoveRegex:
		re, err := regexp.Compile(c.Pattern)
		if err != nil {
			return Result{Err: invalidf("pattern %q: %v", c.Pattern, err)}
		}
		// Deleting from a map while ranging over it is defined in Go: the deleted entry is
		// simply not produced again.
		var res Result
		for k, i := range st.objects {
			if re.MatchString(k) {
				if st.recs.at(i).nreps() > 0 {
					res.Removed++
				}
				res.Gone = append(res.Gone, st.object(k, st.recs.at(i)))
				st.emitRemoved(KVRemoved, k, st.recs.at(i))
				st.removeAt(k, i)
			}
		}
		return res
	case RemoveAll:
		n := len(st.objects) - int(st.invisible)
		gone := make([]Object, 0, len(st.objects))
		for k, i := range st.objects {
			gone = append(gone, st.object(k, st.recs.at(i)))
		}
		st.emit(KVEvent{Kind: KVCleared})
		clear(st.objects)
		clear(st.lost)
		st.recs = recTable{}
		st.keyBytes, st.bytes, st.replicas, st.softPinned, st.hardPinned = 0, 0, 0, 0, 0
		st.invisible, st.lostReplicas = 0, 0
		st.mdl.clearObjects()
		st.kvs = kvSessions{}
		st.clearTenantUsage()
		for _, s := range st.slots {
			if s != nil {
				s.objects, s.bytes, s.lost = 0, 0, 0
			}
		}
		return Result{Removed: n, Gone: gone}
	}
	return Result{Err: fmt.Errorf("raftmeta: command %T: %w", c, base.ErrNotSupported)}
}

// single moves the error of a one-item result to Err as well, as Result documents.
func (r Result) single() Result {
	if len(r.Items) == 1 {
		r.Err = r.Items[0]
	}
	return r
}

func (st *state) putEnd(c *PutEnd) Result {
	res := Result{Items: make([]error, len(c.Items))}
	var buf [2 * MaxReplicas]byte
	for i := range c.Items {
		it := &c.Items[i]
		if err := validatePutItem(it); err != nil {
			res.Items[i] = err
			continue
		}
		ri, old := st.find(it.Key)
		// An invisible object (every replica lost) does not block a plain put: the new
		// version overwrites it, and the old copies are never re-adopted.
		if old != nil && !c.Upsert && old.nreps() > 0 {
			if old.version == uint64(it.Version) && old.checksum == it.Checksum {
				continue // a retried PutEnd that already committed
			}
			res.Items[i] = fmt.Errorf("raftmeta: put %q: %w", it.Key, base.ErrObjectAlreadyExists)
			continue
		}
		reps := buf[:0]
		for _, w := range it.Replicas {
			slot, ok := st.slotOf[w]
			if ok && st.slots[slot].state == SegmentActive {
				reps = binary.LittleEndian.AppendUint16(reps, slot)
			}
		}
		if len(reps) == 0 {
			res.Items[i] = fmt.Errorf("raftmeta: put %q: no replica on an active worker (%v): %w", it.Key, it.Replicas, base.ErrSegmentNotFound)
			continue
		}
		rec := objRec{
			sizeFlags: uint64(it.Size),
			version:   uint64(it.Version),
			checksum:  it.Checksum,
			created:   c.Now,
			softPin:   it.SoftPinUntil,
			reps:      string(reps),
		}
		if it.HardPin {
			rec.sizeFlags |= hardPinBit
		}
		var oldSize int64
		if old != nil {
			oldSize = old.size()
		}
		if err := st.checkTenantQuota(it.Key, it.Size, oldSize); err != nil {
			res.Items[i] = err
			continue
		}
		if err := st.setTokens(&rec, it); err != nil {
			res.Items[i] = err
			continue
		}
		if old != nil {
			st.countTenant(it.Key, oldSize, -1)
			if c.Upsert && old.version != uint64(it.Version) {
				res.Replaced = append(res.Replaced, st.object(it.Key, old))
			}
			st.unaccount(old)
			st.setLost(it.Key, "")
		} else {
			st.keyBytes += int64(len(it.Key))
			ri = st.recs.alloc()
			st.objects[it.Key] = ri
		}
		st.account(&rec)
		st.countTenant(it.Key, rec.size(), 1)
		*st.recs.at(ri) = rec
		st.emitObject(KVStored, it.Key, &rec)
	}
	return res.single()
}

func (st *state) dropReplicas(c *DropReplicas) Result {
	res := Result{Items: make([]error, len(c.Items))}
	slot, ok := st.slotOf[c.Worker]
	if !ok {
		for i := range res.Items {
			res.Items[i] = fmt.Errorf("raftmeta: drop on %q: %w", c.Worker, base.ErrSegmentNotFound)
		}
		res.Err = res.Items[0]
		return res
	}
	for i, it := range c.Items {
		ri, rec := st.find(it.Key)
		if rec != nil && (it.Version == 0 || base.Version(rec.version) == it.Version) && hasSlot(st.lost[it.Key], slot) {
			// A lost replica the returning worker no longer has.
			res.Dropped++
			if st.dropLost(it.Key, slot) {
				res.Removed++
			}
			continue
		}
		if rec == nil || (it.Version != 0 && base.Version(rec.version) != it.Version) || !rec.hasRep(slot) {
			res.Items[i] = fmt.Errorf("raftmeta: drop %q version %d on %q: %w", it.Key, it.Version, c.Worker, base.ErrObjectNotFound)
			continue
		}
		res.Dropped++
		if st.dropRep(KVEvicted, it.Key, ri, slot) {
			res.Removed++
		}
	}
	return res.single()
}

func (r *objRec) hasRep(slot uint16) bool {
	for i := 0; i < r.nreps(); i++ {
		if r.rep(i) == slot {
			return true
		}
	}
	return false
}

// dropRep removes slot from the record of key (at index i, which must hold slot) and reports
// whether the object was removed because no replica was left (an event of kind).
func (st *state) dropRep(kind KVEventKind, key string, i uint32, slot uint16) (removed bool) {
	rec := st.recs.at(i)
	if rec.nreps() == 1 {
		// Its last live replica: removed, or invisible while it has lost ones.
		st.emitRemoved(kind, key, rec)
		if st.lost[key] == "" {
			st.removeAt(key, i)
			return true
		}
	}
	st.removeRep(rec, slot)
	return false
}

// dropWorker drops every replica at slot. It walks the objects (O(objects)) only until it has
// dropped as many replicas as the slot's exact counter says it holds, so a worker holding none
// (one already marked dead) costs no walk.
func (st *state) dropWorker(slot uint16) Result {
	var res Result
	left := st.slots[slot].objects
	// Updating or deleting the entry being visited is allowed while ranging over a map.
	for k, i := range st.objects {
		if left == 0 {
			break
		}
		if st.recs.at(i).hasRep(slot) {
			left--
			res.Dropped++
			if st.dropRep(KVWorkerGone, k, i, slot) {
				res.Removed++
			}
		}
	}
	return res
}

// removeAt removes key, whose record is at index i.
func (st *state) removeAt(key string, i uint32) {
	st.unaccount(st.recs.at(i))
	st.countTenant(key, st.recs.at(i).size(), -1)
	st.setLost(key, "")
	st.keyBytes -= int64(len(key))
	st.recs.release(i)
	delete(st.objects, key)
	st.kvs.dropKey(key)
}

// account adds rec to the counters; unaccount takes it out. Key bytes are counted by the
// callers, which know whether the key is new.
func (st *state) account(rec *objRec)   { st.count(rec, 1) }
func (st *state) unaccount(rec *objRec) { st.count(rec, -1) }

func (st *state) count(rec *objRec, sign int64) {
	size := rec.size()
	st.bytes += sign * size
	st.replicas += sign * int64(rec.nreps())
	if rec.nreps() == 0 {
		st.invisible += sign
	}
	if rec.softPin != 0 {
		st.softPinned += sign
	}
	if rec.hardPin() {
		st.hardPinned += sign
	}
	st.countModel(rec, sign)
	for i := 0; i < rec.nreps(); i++ {
		s := st.slots[rec.rep(i)]
		if s == nil {
			_ = invariants.AssertionFailedf("raftmeta: record names free slot %d", rec.rep(i))
			continue
		}
		s.objects += sign
		s.bytes += sign * size
	}
}

func (st *state) freeSlot() uint16 {
	for i := 1; i < len(st.slots); i++ {
		if st.slots[i] == nil {
			return uint16(i)
		}
	}
	if len(st.slots) > maxSlots {
		return 0
	}
	st.slots = append(st.slots, nil)
	return uint16(len(st.slots) - 1)
}

// get returns a copy of key's record, for readers.
func (st *state) get(key string) (objRec, bool) {
	i, ok := st.objects[key]
	if !ok {
		return objRec{}, false
	}
	return *st.recs.at(i), true
}

// find returns the index of key's record and the record itself (nil when key is absent), for
// apply to edit in place with one map lookup: a snapshot has its own copy of the chunks, and
// replica strings are replaced, never modified. Counters are the caller's business.
func (st *state) find(key string) (uint32, *objRec) {
	i, ok := st.objects[key]
	if !ok {
		return 0, nil
	}
	return i, st.recs.at(i)
}

// object converts a record to the API type.
func (st *state) object(key string, rec *objRec) Object {
	o := Object{Object: base.Object{
		ObjectMeta:   base.ObjectMeta{Key: key, Version: base.Version(rec.version), Size: rec.size(), Checksum: rec.checksum},
		Replicas:     make([]base.WorkerID, rec.nreps()),
		SoftPinUntil: rec.softPin,
		HardPin:      rec.hardPin(),
		Tokens:       int64(rec.tokens),
	}, Created: rec.created}
	if rec.model != 0 {
		o.Model = st.mdl.recs[rec.model].name
	}
	if l := st.lost[key]; l != "" {
		o.Lost = st.slotIDs(l)
	}
	for i := range o.Replicas {
		if s := st.slots[rec.rep(i)]; s != nil {
			o.Replicas[i] = s.id
		}
	}
	return o
}

// Reads. Each takes the read lock; apply holds the write lock for one raft batch at a time.

func (f *fsm) lookup(key string) (Object, bool) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	rec, ok := f.st.get(key)
	if !ok || rec.nreps() == 0 {
		return Object{}, false
	}
	return f.st.object(key, &rec), true
}

// lookupAny is lookup including invisible objects (every replica lost).
func (f *fsm) lookupAny(key string) (Object, bool) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	rec, ok := f.st.get(key)
	if !ok {
		return Object{}, false
	}
	return f.st.object(key, &rec), true
}

// rangePrefix calls fn for every object whose key has prefix, in key order, until fn returns
// false. It collects and sorts the matching keys under the read lock, then calls fn without
// the lock (fn may call back into the node); objects removed meanwhile are skipped.
func (f *fsm) rangePrefix(prefix string, fn func(Object) bool) {
	f.mu.RLock()
	var keys []string
	for k := range f.st.objects {
		if strings.HasPrefix(k, prefix) {
			keys = append(keys, k)
		}
	}
	f.mu.RUnlock()
	slices.Sort(keys)
	const chunk = 256
	for len(keys) > 0 {
		n := min(chunk, len(keys))
		objs := make([]Object, 0, n)
		f.mu.RLock()
		for _, k := range keys[:n] {
			if rec, ok := f.st.get(k); ok {
				objs = append(objs, f.st.object(k, &rec))
			}
		}
		f.mu.RUnlock()
		keys = keys[n:]
		for _, o := range objs {
			if !fn(o) {
				return
			}
		}
	}
}

// keyHeap is a max-heap of keys: it keeps the limit smallest keys seen.
type keyHeap []string

func (h keyHeap) Len() int           { return len(h) }
func (h keyHeap) Less(i, j int) bool { return h[i] > h[j] }
func (h keyHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *keyHeap) Push(x any)        { *h = append(*h, x.(string)) }
func (h *keyHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

// list returns up to limit objects whose key has prefix and sorts after after, in key order.
// It walks every key once (O(objects)) but holds only limit keys (O(limit log limit) memory
// and sorting), so paging through a large table costs no big temporary slice.
func (f *fsm) list(prefix, after string, limit int) []Object {
	if limit <= 0 {
		return nil
	}
	h := make(keyHeap, 0, min(limit, 1024))
	f.mu.RLock()
	defer f.mu.RUnlock()
	for k, i := range f.st.objects {
		if k <= after || !strings.HasPrefix(k, prefix) || f.st.recs.at(i).nreps() == 0 {
			continue
		}
		if len(h) < limit {
			heap.Push(&h, k)
		} else if k < h[0] {
			h[0] = k
			heap.Fix(&h, 0)
		}
	}
	slices.Sort(h)
	out := make([]Object, 0, len(h))
	for _, k := range h {
		rec, _ := f.st.get(k)
		out = append(out, f.st.object(k, &rec))
	}
	return out
}

func (st *state) segments() []Segment {
	var out []Segment
	for _, s := range st.slots {
		if s != nil {
			out = append(out, Segment{ID: s.id, Address: s.addr, DRAMCapacity: s.dram, NVMeCapacity: s.nvme,
				State: s.state, Objects: s.objects, Bytes: s.bytes, DeadSince: s.deadSince, Draining: s.draining,
				LostReplicas: s.lost})
		}
	}
	slices.SortFunc(out, func(a, b Segment) int { return strings.Compare(string(a.ID), string(b.ID)) })
	return out
}

func (st *state) masterList() []Master {
	out := make([]Master, 0, len(st.masters))
	for id, addr := range st.masters {
		out = append(out, Master{ID: id, RPCAddr: addr})
	}
	slices.SortFunc(out, func(a, b Master) int { return strings.Compare(a.ID, b.ID) })
	return out
}

func (f *fsm) stats() Stats {
	f.mu.RLock()
	defer f.mu.RUnlock()
	st := f.st
	s := Stats{
		Keys: int64(len(st.objects)) - st.invisible, Invisible: st.invisible, LostReplicas: st.lostReplicas,
		KeyBytes: st.keyBytes, Bytes: st.bytes, Replicas: st.replicas,
		SoftPinned: st.softPinned, HardPinned: st.hardPinned, Masters: int64(len(st.masters)),
		AppliedIndex: f.applied,
	}
	for _, seg := range st.slots {
		if seg != nil {
			s.Segments++
			if seg.state == SegmentActive {
				s.Active++
			}
		}
	}
	return s
}

// clone copies the state for a snapshot: the map, the record chunks and the segment records
// (apply edits all three in place); key and replica strings are immutable and shared.
func (st *state) clone() *state {
	c := *st
	c.objects = maps.Clone(st.objects)
	c.recs = st.recs.clone()
	c.slots = make([]*segRec, len(st.slots))
	for i, s := range st.slots {
		if s != nil {
			cp := *s
			c.slots[i] = &cp
		}
	}
	c.slotOf = maps.Clone(st.slotOf)
	c.masters = maps.Clone(st.masters)
	c.lost = maps.Clone(st.lost)
	c.mdl = st.mdl.clone()
	c.kvs = st.kvs.clone()
	c.tenants = maps.Clone(st.tenants)
	return &c
}
