package raftmeta

import (
	"cmp"
	"context"
	"encoding/binary"
	"slices"

	"github.com/mooncake-go/mooncake/internal/base"
)

// KV events: what committed entries did to objects, for the leader's event publisher
// (server/master/kvevents.go). Apply derives them from the command and the state, so every node
// computes the same events for the same entry, and numbers each entry that has at least one
// with the next value of a replicated counter (state.evSeq). That number is the cluster's
// event sequence: it has no gap between entries that have events, survives snapshots (the
// section below) and continues on a new leader, because it is part of the replicated state.
//
// Each node keeps the last KVEventRing batches in memory (soft state: a node restored from a
// snapshot starts with an empty ring at the snapshot's sequence).

// KVEventKind is what happened to an object.
type KVEventKind uint8

const (
	// KVStored: a PutEnd committed the object (a new key, or an upsert's new version).
	KVStored KVEventKind = iota + 1
	// KVRemoved: Remove or RemoveRegex removed it.
	KVRemoved
	// KVEvicted: its last replica was dropped by the worker holding it (DropReplicas: eviction
	// in cache mode, or a replica the worker lost).
	KVEvicted
	// KVWorkerGone: its last replica was on a worker marked dead or unregistered.
	KVWorkerGone
	// KVCleared: RemoveAll removed every object (one event, no key).
	KVCleared
)

// KVEvent is one object change of a committed entry.
type KVEvent struct {
	Kind KVEventKind
	Key  string // "" for KVCleared
	Size int64
	// Tokens and Model are what the put said (base.Object), 0 and "" when unknown.
	Tokens int64
	Model  string
	// Workers hold the object: after a store, its replicas; before a removal, the replicas it
	// had.
	Workers []base.WorkerID
}

// KVEventBatch is the events of one committed entry.
type KVEventBatch struct {
	// Seq is the cluster's event sequence: 1 for the first entry with events, then +1 for each.
	Seq uint64
	// Index is the raft log index of the entry.
	Index  uint64
	Events []KVEvent
}

// KVEventRing is how many batches each node keeps for its publisher.
const KVEventRing = 4096

// kvEventRing holds the last batches; guarded by fsm.mu.
type kvEventRing struct {
	buf []KVEventBatch // Invariant: Seq strictly increasing, len <= KVEventRing
	ch  chan struct{}  // closed and replaced when a batch is added
}

// emit records ev for the entry being applied. REQUIRES: the caller owns st.
func (st *state) emit(ev KVEvent) {
	st.evN++
	if st.evKeep {
		st.ev = append(st.ev, ev)
	}
}

// emitObject records an event of kind for key (record rec), built only when kept.
func (st *state) emitObject(kind KVEventKind, key string, rec *objRec) {
	st.evN++
	if st.evKeep {
		st.ev = append(st.ev, st.event(kind, key, rec))
	}
}

// emitRemoved records the removal of key (record rec) with kind, when it was visible.
func (st *state) emitRemoved(kind KVEventKind, key string, rec *objRec) {
	if rec.nreps() == 0 {
		return // invisible: its removal was never visible either
	}
	st.emitObject(kind, key, rec)
}

func (st *state) event(kind KVEventKind, key string, rec *objRec) KVEvent {
	ev := KVEvent{Kind: kind, Key: key, Size: rec.size(), Tokens: int64(rec.tokens)}
	if rec.model != 0 && int(rec.model) < len(st.mdl.recs) {
		ev.Model = st.mdl.recs[rec.model].name
	}
	ev.Workers = make([]base.WorkerID, 0, rec.nreps())
	for i := 0; i < rec.nreps(); i++ {
		if s := int(rec.rep(i)); s < len(st.slots) && st.slots[s] != nil {
			ev.Workers = append(ev.Workers, st.slots[s].id)
		}
	}
	return ev
}

// takeEvents ends the entry at index: when it had events it numbers them with the next
// sequence and returns the batch. Events are sorted by key (stable, so a key put twice in one
// batch keeps its order): removals that walk a map find keys in random order, and every node
// must publish the same batch. REQUIRES: the caller owns st.
func (st *state) takeEvents(index uint64) (KVEventBatch, bool) {
	if st.evN == 0 {
		return KVEventBatch{}, false
	}
	evs := st.ev
	st.ev, st.evN = nil, 0
	slices.SortStableFunc(evs, func(a, b KVEvent) int { return cmp.Compare(a.Key, b.Key) })
	st.evSeq++
	return KVEventBatch{Seq: st.evSeq, Index: index, Events: evs}, true
}

// KeepKVEvents makes this node keep the events of the entries it applies from now on, for
// KVEvents; without it only the sequence is counted (no allocation at apply). The publisher
// calls it before it starts.
func (n *Node) KeepKVEvents() {
	n.fsm.mu.Lock()
	n.fsm.keepEvents = true
	n.fsm.mu.Unlock()
}

// addEventsLocked appends b to the ring and wakes KVEventsWait. REQUIRES: f.mu held for
// writing.
func (f *fsm) addEventsLocked(b KVEventBatch) {
	r := &f.events
	if len(r.buf) == KVEventRing {
		r.buf = slices.Delete(r.buf, 0, KVEventRing/4)
	}
	r.buf = append(r.buf, b)
	if r.ch != nil {
		close(r.ch)
		r.ch = nil
	}
}

// KVEvents returns the retained batches with Seq > after (oldest first, at most limit), and
// the last sequence this node has applied (0: none yet). A batch older than the ring is gone:
// when the first batch returned has Seq > after+1, the caller missed some.
func (n *Node) KVEvents(after uint64, limit int) (batches []KVEventBatch, last uint64) {
	f := n.fsm
	f.mu.RLock()
	defer f.mu.RUnlock()
	buf := f.events.buf
	i, _ := slices.BinarySearchFunc(buf, after+1, func(b KVEventBatch, s uint64) int { return cmp.Compare(b.Seq, s) })
	buf = buf[i:]
	if len(buf) > limit {
		buf = buf[:limit]
	}
	return slices.Clone(buf), f.st.evSeq
}

// KVEventsWait blocks until this node has applied a batch with Seq > after, or ctx ends.
func (n *Node) KVEventsWait(ctx context.Context, after uint64) error {
	f := n.fsm
	for {
		f.mu.Lock()
		if f.st.evSeq > after {
			f.mu.Unlock()
			return nil
		}
		if f.events.ch == nil {
			f.events.ch = make(chan struct{})
		}
		ch := f.events.ch
		f.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// The events section of a snapshot: the sequence of the last entry with events.
//
//	| tag (1B) = 40 | version (1B) = 1 | seq uvarint |
//
// Written only when seq > 0; a snapshot without it restores seq 0.
const (
	sectionEvents        = 40
	sectionEventsVersion = 1
)

func appendEventsSection(b []byte, st *state) []byte {
	if st.evSeq == 0 {
		return b
	}
	b = append(b, sectionEvents, sectionEventsVersion)
	return binary.AppendUvarint(b, st.evSeq)
}

func readEventsSection(d *snapReader, st *state) {
	if v := d.byte1(); d.err == nil && v != sectionEventsVersion {
		d.fail("unknown events section version %d", v)
	}
	st.evSeq = d.uvarint()
}
