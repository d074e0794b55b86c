package raftmeta

import (
	"encoding/binary"
	"fmt"

	"github.com/mooncake-go/mooncake/internal/base"
)

// Lifecycle commands (CommandType 20-29): what the leader concludes about a worker's
// replicas when it goes away, comes back, is repaired around or drained. See doc.go, "Lost
// replicas", for the model and its bound.
const (
	TypeMarkWorkerLost    CommandType = 20
	TypeAdoptReplicas     CommandType = 21
	TypeMoveReplicas      CommandType = 22
	TypeSetWorkerDraining CommandType = 23
	TypeLeaveWorker       CommandType = 24
	TypeAddReplicas       CommandType = 25
)

// MarkWorkerLost records the leader's conclusion that a worker is gone (silent past
// client_ttl, or past its restart grace). Unlike MarkWorkerDead it forgets nothing: the
// segment becomes SegmentDead with DeadSince = Now, and each replica the worker held becomes
// a lost replica of its object. An object whose replicas are all lost stays in the FSM,
// invisible (Lookup, List and Stats.Keys leave it out), until the worker returns (its
// replicas are re-adopted with AdoptReplicas), the key is removed or overwritten, or the
// worker is retired (UnregisterWorker). Apply is O(objects).
type MarkWorkerLost struct {
	ID base.WorkerID
	// Now is the proposer's clock in unix nanoseconds, stored as the segment's DeadSince.
	// Zero: Node.Apply fills in time.Now().
	Now int64
}

// AdoptReplicas re-adopts replicas a returning worker reported in its verified inventory:
// each item whose object is stored at exactly that version with a lost replica on Worker
// gets that replica back as a live one. An item whose key is absent (removed), whose version
// differs (overwritten) or which has no lost replica on Worker (repaired elsewhere meanwhile,
// or never there) fails with base.ErrObjectNotFound and the worker drops its copy. Worker must
// be active (it registered first).
type AdoptReplicas struct {
	Worker base.WorkerID
	Items  []base.KeyVersion
}

// ReplicaMove is one replica moved by repair or drain: To (active, not yet holding the
// object) received a copy of Key at Version, which replaces From's replica (live when
// draining, lost when repairing). From == To is a repair onto the worker whose replica was
// lost (it came back without it).
type ReplicaMove struct {
	Key      string
	Version  base.Version
	From, To base.WorkerID
}

// MoveReplicas commits copies made by repair or drain. Per item: the object must be stored
// at Version with a replica (live or lost) on From, and To must be active and not hold one;
// then To becomes a live replica and From's replica goes. Otherwise the item fails (the copy
// on To is orphaned and the leader owes To a drop): base.ErrObjectNotFound when the object or
// From's replica is gone, base.ErrSegmentNotFound when To is not active,
// base.ErrObjectAlreadyExists when To already holds it.
type MoveReplicas struct{ Items []ReplicaMove }

// AddReplicas commits copies made by a copy task (Mooncake's create_copy_task): Worker
// received a copy of each item, which becomes one more live replica of it. Per item: the
// object must be stored at Version and Worker must be active and not hold a live replica;
// a lost replica Worker had of it is consumed (the copy replaces it). Otherwise the item
// fails (the copy on Worker is orphaned and the leader owes it a drop):
// base.ErrObjectNotFound when the object is gone or overwritten, base.ErrSegmentNotFound
// when Worker is not active, base.ErrObjectAlreadyExists when it already holds one. Unlike
// MoveReplicas no replica goes: a move task is a copy whose MoveReplicas names the source.
type AddReplicas struct {
	Worker base.WorkerID
	Items  []base.KeyVersion
}

// SetWorkerDraining marks a worker as draining (no new placements; its replicas are moved to
// other workers) or, with Draining false, cancels that. An unknown worker gives
// base.ErrSegmentNotFound.
type SetWorkerDraining struct {
	ID       base.WorkerID
	Draining bool
}

// LeaveWorker records that a worker left on purpose (it unmounted its segment: an embedded
// worker's close), as Mooncake's UnmountSegment does. It never makes the worker dead. With
// Keep false its replicas are dropped, objects left with none are removed and the worker is
// forgotten at once (as UnregisterWorker): a worker without an NVMe tier takes its bytes
// with it. With Keep true (a worker whose objects persist under root_fs_dir) its replicas
// become lost replicas, as MarkWorkerLost makes them, and the segment becomes SegmentLeft:
// objects held only there are invisible at once, and re-adopted if the worker registers
// again with the same id, until it is retired (UnregisterWorker). The leader's lifecycle
// machine decides Keep. An unknown worker gives base.ErrSegmentNotFound (it left already).
type LeaveWorker struct {
	ID   base.WorkerID
	Keep bool
	// Now is the proposer's clock in unix nanoseconds (the segment's DeadSince stays 0: it
	// is not dead); kept for the log's sake. Zero: Node.Apply fills in time.Now().
	Now int64
}

func (MarkWorkerLost) Type() CommandType    { return TypeMarkWorkerLost }
func (LeaveWorker) Type() CommandType       { return TypeLeaveWorker }
func (AdoptReplicas) Type() CommandType     { return TypeAdoptReplicas }
func (AddReplicas) Type() CommandType       { return TypeAddReplicas }
func (MoveReplicas) Type() CommandType      { return TypeMoveReplicas }
func (SetWorkerDraining) Type() CommandType { return TypeSetWorkerDraining }

func (c MarkWorkerLost) Validate() error {
	if err := base.ValidateWorkerID(c.ID); err != nil {
		return fmt.Errorf("raftmeta: %w", err)
	}
	return nil
}

func (c AdoptReplicas) Validate() error {
	return DropReplicas(c).Validate()
}

func (c AddReplicas) Validate() error {
	if err := DropReplicas(c).Validate(); err != nil {
		return err
	}
	for _, it := range c.Items {
		if it.Version == 0 {
			return invalidf("add of %q: version 0", it.Key)
		}
	}
	return nil
}

func (c MoveReplicas) Validate() error {
	if err := checkBatch(len(c.Items)); err != nil {
		return err
	}
	for _, it := range c.Items {
		if err := base.ValidateKey(it.Key); err != nil {
			return fmt.Errorf("raftmeta: %w", err)
		}
		if err := base.ValidateWorkerID(it.From); err != nil {
			return fmt.Errorf("raftmeta: %w", err)
		}
		if err := base.ValidateWorkerID(it.To); err != nil {
			return fmt.Errorf("raftmeta: %w", err)
		}
		if it.Version == 0 {
			return invalidf("move of %q: version 0", it.Key)
		}
	}
	return nil
}

func (c LeaveWorker) Validate() error {
	if err := base.ValidateWorkerID(c.ID); err != nil {
		return fmt.Errorf("raftmeta: %w", err)
	}
	return nil
}

func (c SetWorkerDraining) Validate() error {
	if err := base.ValidateWorkerID(c.ID); err != nil {
		return fmt.Errorf("raftmeta: %w", err)
	}
	return nil
}

func (c MarkWorkerLost) appendFields(b []byte) []byte {
	b = appendStr(b, string(c.ID))
	return binary.AppendVarint(b, c.Now)
}

func (c AdoptReplicas) appendFields(b []byte) []byte {
	return DropReplicas(c).appendFields(b)
}

func (c AddReplicas) appendFields(b []byte) []byte {
	return DropReplicas(c).appendFields(b)
}

func (c MoveReplicas) appendFields(b []byte) []byte {
	b = binary.AppendUvarint(b, uint64(len(c.Items)))
	for _, it := range c.Items {
		b = appendStr(b, it.Key)
		b = binary.AppendUvarint(b, uint64(it.Version))
		b = appendStr(b, string(it.From))
		b = appendStr(b, string(it.To))
	}
	return b
}

func (c LeaveWorker) appendFields(b []byte) []byte {
	b = appendStr(b, string(c.ID))
	b = appendBool(b, c.Keep)
	return binary.AppendVarint(b, c.Now)
}

func (c SetWorkerDraining) appendFields(b []byte) []byte {
	b = appendStr(b, string(c.ID))
	return appendBool(b, c.Draining)
}

// decodeLifecycle decodes the fields of a lifecycle command (types 20-29); ok is false for a
// type it does not know.
func decodeLifecycle(t CommandType, d *decoder) (c Command, ok bool) {
	switch t {
	case TypeMarkWorkerLost:
		id := base.WorkerID(d.str(base.MaxWorkerIDLen))
		return MarkWorkerLost{ID: id, Now: d.varint()}, true
	case TypeAdoptReplicas:
		return AdoptReplicas(decodeWorkerItems(d)), true
	case TypeAddReplicas:
		return AddReplicas(decodeWorkerItems(d)), true
	case TypeMoveReplicas:
		// An item is at least key(2) version(1) from(2) to(2).
		n := d.count(MaxBatch, 7)
		r := MoveReplicas{Items: make([]ReplicaMove, n)}
		for i := 0; i < n; i++ {
			it := &r.Items[i]
			it.Key = d.str(base.MaxKeyLen)
			it.Version = base.Version(d.uvarint())
			it.From = base.WorkerID(d.str(base.MaxWorkerIDLen))
			it.To = base.WorkerID(d.str(base.MaxWorkerIDLen))
		}
		return r, true
	case TypeSetWorkerDraining:
		id := base.WorkerID(d.str(base.MaxWorkerIDLen))
		return SetWorkerDraining{ID: id, Draining: d.boolean()}, true
	case TypeLeaveWorker:
		id := base.WorkerID(d.str(base.MaxWorkerIDLen))
		keep := d.boolean()
		return LeaveWorker{ID: id, Keep: keep, Now: d.varint()}, true
	}
	return nil, false
}

// decodeWorkerItems decodes the fields AdoptReplicas and AddReplicas share with
// DropReplicas: worker_id, n uvarint, n × (key, version uvarint).
func decodeWorkerItems(d *decoder) DropReplicas {
	var r DropReplicas
	r.Worker = base.WorkerID(d.str(base.MaxWorkerIDLen))
	n := d.count(MaxBatch, 3)
	r.Items = make([]base.KeyVersion, n)
	for i := 0; i < n; i++ {
		r.Items[i].Key = d.str(base.MaxKeyLen)
		r.Items[i].Version = base.Version(d.uvarint())
	}
	return r
}

// applyLifecycle applies a lifecycle command; ok is false for another command.
func (st *state) applyLifecycle(c Command) (res Result, ok bool) {
	switch c := c.(type) {
	case MarkWorkerLost:
		slot, found := st.slotOf[c.ID]
		if !found {
			return Result{Err: fmt.Errorf("raftmeta: mark lost %q: %w", c.ID, base.ErrSegmentNotFound)}, true
		}
		res = st.loseWorker(slot)
		s := st.slots[slot]
		// A drain survives death: the operator meant the worker to go, and a worker that
		// returns keeps draining until the drain is cancelled.
		s.state, s.deadSince = SegmentDead, c.Now
		return res, true
	case AdoptReplicas:
		return st.adoptReplicas(&c), true
	case MoveReplicas:
		return st.moveReplicas(&c), true
	case AddReplicas:
		return st.addReplicas(&c), true
	case LeaveWorker:
		return st.leaveWorker(&c), true
	case SetWorkerDraining:
		slot, found := st.slotOf[c.ID]
		if !found {
			return Result{Err: fmt.Errorf("raftmeta: drain %q: %w", c.ID, base.ErrSegmentNotFound)}, true
		}
		st.slots[slot].draining = c.Draining
		return Result{}, true
	}
	return Result{}, false
}

// leaveWorker applies LeaveWorker: the replicas become lost ones and the segment left
// (Keep), or the worker is forgotten as UnregisterWorker forgets it.
func (st *state) leaveWorker(c *LeaveWorker) Result {
	slot, found := st.slotOf[c.ID]
	if !found {
		return Result{Err: fmt.Errorf("raftmeta: leave %q: %w", c.ID, base.ErrSegmentNotFound)}
	}
	if !c.Keep {
		return st.unregister(c.ID, slot)
	}
	res := st.loseWorker(slot)
	st.slots[slot].state, st.slots[slot].deadSince = SegmentLeft, 0
	return res
}

// loseWorker turns every live replica at slot into a lost one (Result.Dropped counts them).
// Like dropWorker it stops walking once the slot's exact counter is exhausted.
func (st *state) loseWorker(slot uint16) Result {
	var res Result
	left := st.slots[slot].objects
	var buf [2]byte
	for k, i := range st.objects {
		if left == 0 {
			break
		}
		rec := st.recs.at(i)
		if !rec.hasRep(slot) {
			continue
		}
		left--
		res.Dropped++
		if rec.nreps() == 1 {
			// Its last live replica: the object becomes invisible.
			st.emitRemoved(KVWorkerGone, k, rec)
		}
		st.setLost(k, st.lost[k]+string(binary.LittleEndian.AppendUint16(buf[:0], slot)))
		st.removeRep(rec, slot)
	}
	return res
}

// forgetLost drops every lost replica at slot (a worker being retired), removing objects left
// with no replica at all. Result.Removed counts invisible objects removed.
func (st *state) forgetLost(slot uint16) Result {
	var res Result
	if st.slots[slot].lost == 0 {
		return res
	}
	for k, l := range st.lost {
		if hasSlot(l, slot) {
			if st.dropLost(k, slot) {
				res.Removed++
			}
		}
	}
	return res
}

// dropLost removes slot from key's lost replicas and the object when nothing is left; it
// reports whether the object was removed. REQUIRES: key's lost replicas hold slot.
func (st *state) dropLost(key string, slot uint16) (removed bool) {
	st.setLost(key, withoutSlot(st.lost[key], slot))
	i := st.objects[key]
	if st.recs.at(i).nreps() == 0 && st.lost[key] == "" {
		st.removeAt(key, i)
		return true
	}
	return false
}

func (st *state) adoptReplicas(c *AdoptReplicas) Result {
	res := Result{Items: make([]error, len(c.Items))}
	slot, ok := st.slotOf[c.Worker]
	if !ok || st.slots[slot].state != SegmentActive {
		for i := range res.Items {
			res.Items[i] = fmt.Errorf("raftmeta: adopt on %q: worker not active: %w", c.Worker, base.ErrSegmentNotFound)
		}
		res.Err = res.Items[0]
		return res
	}
	for i, it := range c.Items {
		ri, rec := st.find(it.Key)
		if rec == nil || base.Version(rec.version) != it.Version || !hasSlot(st.lost[it.Key], slot) {
			res.Items[i] = fmt.Errorf("raftmeta: adopt %q version %d on %q: %w", it.Key, it.Version, c.Worker, base.ErrObjectNotFound)
			continue
		}
		st.gainReplica(it.Key, ri, slot)
	}
	return res.single()
}

// gainReplica makes slot a live replica of the object at record index ri, consuming a lost
// replica slot had of it (AdoptReplicas, AddReplicas).
func (st *state) gainReplica(key string, ri uint32, slot uint16) {
	if hasSlot(st.lost[key], slot) {
		st.setLost(key, withoutSlot(st.lost[key], slot))
	}
	rec := st.recs.at(ri)
	st.addRep(rec, slot)
	if rec.nreps() == 1 {
		// It was invisible (every replica lost) and is visible again.
		st.emitObject(KVStored, key, rec)
	}
}

func (st *state) addReplicas(c *AddReplicas) Result {
	res := Result{Items: make([]error, len(c.Items))}
	slot, active := st.slotOf[c.Worker]
	active = active && st.slots[slot].state == SegmentActive
	for i, it := range c.Items {
		ri, rec := st.find(it.Key)
		switch {
		case rec == nil || base.Version(rec.version) != it.Version:
			res.Items[i] = fmt.Errorf("raftmeta: add %q version %d: %w", it.Key, it.Version, base.ErrObjectNotFound)
			continue
		case !active:
			res.Items[i] = fmt.Errorf("raftmeta: add %q to %q: not active: %w", it.Key, c.Worker, base.ErrSegmentNotFound)
			continue
		case rec.hasRep(slot):
			res.Items[i] = fmt.Errorf("raftmeta: add %q to %q: %w", it.Key, c.Worker, base.ErrObjectAlreadyExists)
			continue
		}
		st.gainReplica(it.Key, ri, slot)
	}
	return res.single()
}

func (st *state) moveReplicas(c *MoveReplicas) Result {
	res := Result{Items: make([]error, len(c.Items))}
	for i, it := range c.Items {
		res.Items[i] = st.moveReplica(&it)
		if res.Items[i] == nil {
			res.Dropped++
		}
	}
	return res.single()
}

func (st *state) moveReplica(it *ReplicaMove) error {
	_, rec := st.find(it.Key)
	if rec == nil || base.Version(rec.version) != it.Version {
		return fmt.Errorf("raftmeta: move %q version %d: %w", it.Key, it.Version, base.ErrObjectNotFound)
	}
	to, ok := st.slotOf[it.To]
	if !ok || st.slots[to].state != SegmentActive {
		return fmt.Errorf("raftmeta: move %q to %q: not active: %w", it.Key, it.To, base.ErrSegmentNotFound)
	}
	if rec.hasRep(to) {
		return fmt.Errorf("raftmeta: move %q to %q: %w", it.Key, it.To, base.ErrObjectAlreadyExists)
	}
	hasRepBefore := rec.nreps() > 0
	from, ok := st.slotOf[it.From]
	switch {
	case ok && rec.hasRep(from):
		st.removeRep(rec, from)
	case ok && hasSlot(st.lost[it.Key], from):
		st.setLost(it.Key, withoutSlot(st.lost[it.Key], from))
	default:
		return fmt.Errorf("raftmeta: move %q from %q: no replica there: %w", it.Key, it.From, base.ErrObjectNotFound)
	}
	if hasSlot(st.lost[it.Key], to) {
		st.setLost(it.Key, withoutSlot(st.lost[it.Key], to))
	}
	st.addRep(rec, to)
	if rec.nreps() == 1 && !hasRepBefore {
		// A repair of an invisible object (from a lost replica) makes it visible again.
		st.emitObject(KVStored, it.Key, rec)
	}
	return nil
}

// addRep appends slot to rec's live replicas, keeping the counters.
func (st *state) addRep(rec *objRec, slot uint16) {
	st.unaccount(rec)
	var buf [2]byte
	rec.reps = rec.reps + string(binary.LittleEndian.AppendUint16(buf[:0], slot)) // a new string
	st.account(rec)
}

// removeRep removes slot from rec's live replicas (possibly the last: the object becomes
// invisible), keeping the counters. Callers make sure an object left with no replica, live or
// lost, is removed.
func (st *state) removeRep(rec *objRec, slot uint16) {
	st.unaccount(rec)
	rec.reps = withoutSlot(rec.reps, slot) // a new string: a snapshot may share the old one
	st.account(rec)
}

// setLost replaces key's lost replicas (packed slots, "" for none), keeping the counters.
func (st *state) setLost(key, lost string) {
	st.countLost(st.lost[key], -1)
	if lost == "" {
		delete(st.lost, key)
	} else {
		st.lost[key] = lost
	}
	st.countLost(lost, 1)
}

func (st *state) countLost(lost string, sign int64) {
	for j := 0; j < len(lost)/2; j++ {
		slot := uint16(lost[2*j]) | uint16(lost[2*j+1])<<8
		if s := st.slots[slot]; s != nil {
			s.lost += sign
		}
		st.lostReplicas += sign
	}
}

// hasSlot reports whether packed slots hold slot.
func hasSlot(packed string, slot uint16) bool {
	for j := 0; j < len(packed)/2; j++ {
		if uint16(packed[2*j])|uint16(packed[2*j+1])<<8 == slot {
			return true
		}
	}
	return false
}

// withoutSlot returns packed slots minus slot (a new string).
func withoutSlot(packed string, slot uint16) string {
	var buf [2 * MaxReplicas]byte
	out := buf[:0]
	for j := 0; j < len(packed)/2; j++ {
		if s := uint16(packed[2*j]) | uint16(packed[2*j+1])<<8; s != slot {
			out = binary.LittleEndian.AppendUint16(out, s)
		}
	}
	return string(out)
}

// slotIDs names the workers of packed slots.
func (st *state) slotIDs(packed string) []base.WorkerID {
	out := make([]base.WorkerID, 0, len(packed)/2)
	for j := 0; j < len(packed)/2; j++ {
		if s := st.slots[uint16(packed[2*j])|uint16(packed[2*j+1])<<8]; s != nil {
			out = append(out, s.id)
		}
	}
	return out
}
