package raftmeta

import (
	"fmt"

	"github.com/mooncake-go/mooncake/internal/base"
)

// Object is one committed object as the FSM holds it: its record (base.Object, as the PutEnd
// committed it, pins as SetPin last set them) and the FSM's own fields. Lookups return a
// fresh copy: the caller owns it and may keep or change it.
//
// Replicas are the workers holding a full copy, in the order PutEnd listed them (minus any
// dropped since). Empty only for an invisible object (Node.LookupAny, Node.Range): every
// replica is lost and Lookup does not return it. The FSM never expires SoftPinUntil.
type Object struct {
	base.Object
	// Lost are the workers that held this version when they were marked lost
	// (MarkWorkerLost): their copies are re-adopted if they return (AdoptReplicas).
	Lost []base.WorkerID
	// Created is the proposer's clock (unix nanoseconds) in the PutEnd that made this version.
	Created int64
}

// SegmentState is a worker's (segment's) state in the FSM.
type SegmentState uint8

const (
	// SegmentActive: the worker is registered and may be given new replicas.
	SegmentActive SegmentState = 1
	// SegmentDead: the leader concluded the worker is gone: its replicas were dropped
	// (MarkWorkerDead) or kept as lost replicas (MarkWorkerLost). A later RegisterWorker makes
	// it active again.
	SegmentDead SegmentState = 2
	// SegmentLeft: the worker left on purpose (LeaveWorker with Keep): no new replicas, its
	// replicas are kept as lost replicas for its return. Never dead. A later RegisterWorker
	// makes it active again.
	SegmentLeft SegmentState = 3
)

// String returns "active", "dead", "left" or "state(n)".
func (s SegmentState) String() string {
	switch s {
	case SegmentActive:
		return "active"
	case SegmentDead:
		return "dead"
	case SegmentLeft:
		return "left"
	}
	return fmt.Sprintf("state(%d)", uint8(s))
}

// Segment is a worker as the FSM holds it. Objects and Bytes are derived from the objects
// table (replicas held by this worker and the sum of their sizes), kept by apply.
type Segment struct {
	ID           base.WorkerID
	Address      string
	DRAMCapacity int64
	NVMeCapacity int64
	State        SegmentState
	Objects      int64 // replicas this worker holds
	Bytes        int64 // sum of the sizes of those replicas
	// DeadSince is when MarkWorkerLost was proposed (unix nanoseconds), 0 otherwise.
	DeadSince int64
	// Draining: SetWorkerDraining; no new placements, replicas move to other workers.
	Draining bool
	// LostReplicas counts the lost replicas naming this worker (kept for re-adoption).
	LostReplicas int64
}

// Master is one master's client-facing RPC address as registered in the FSM (RegisterMaster).
type Master struct {
	ID      string
	RPCAddr string
}

// Stats are counters of the FSM and of raft on this node. FSM counters are kept by apply, so
// Stats is O(segments + masters), never O(objects).
type Stats struct {
	Keys int64 // visible objects (with a live replica)
	// Invisible counts objects whose replicas are all lost (kept for re-adoption); KeyBytes
	// and Bytes include them. LostReplicas counts lost replicas.
	Invisible    int64
	LostReplicas int64
	KeyBytes     int64 // sum of key lengths
	Bytes        int64 // sum of object sizes (one copy each)
	Replicas     int64 // sum of replica counts
	SoftPinned   int64 // objects with a soft pin deadline set (expired or not)
	HardPinned   int64 // objects with a hard pin
	Segments     int64 // registered workers, any state
	Active       int64 // workers in SegmentActive
	Masters      int64 // registered masters

	AppliedIndex uint64 // last raft index applied to the FSM on this node
	// Raft state of this node; zero values for an FSM without a node.
	State        string // "Leader", "Follower", "Candidate", "Shutdown"
	Term         uint64
	LastIndex    uint64
	CommitIndex  uint64
	LeaderID     string
	NumPeers     int // voters in the latest configuration, this node included
	LastSnapshot uint64
}

// NotLeaderError is the error a follower returns for writes and linearizable reads. It wraps
// base.ErrNotLeader: test with errors.Is(err, base.ErrNotLeader), and get the leader with
//
//	var nl *raftmeta.NotLeaderError
//	if errors.As(err, &nl) { redirect to nl.LeaderRPCAddr }
//
// LeaderID is empty when this node knows no leader (an election is running); LeaderRPCAddr is
// empty when the leader's RegisterMaster has not reached this node yet (see doc.go, "Master
// addresses").
type NotLeaderError struct {
	LeaderID      string
	LeaderRPCAddr string
}

func (e *NotLeaderError) Error() string {
	switch {
	case e.LeaderID == "":
		return "raftmeta: not leader, leader unknown"
	case e.LeaderRPCAddr == "":
		return fmt.Sprintf("raftmeta: not leader, leader is %s (address unknown)", e.LeaderID)
	}
	return fmt.Sprintf("raftmeta: not leader, leader is %s at %s", e.LeaderID, e.LeaderRPCAddr)
}

// Unwrap makes errors.Is(err, base.ErrNotLeader) true.
func (e *NotLeaderError) Unwrap() error { return base.ErrNotLeader }

// Result is what one applied command produced. Per-item errors wrap base sentinels:
// base.ErrObjectAlreadyExists, base.ErrObjectNotFound, base.ErrSegmentNotFound,
// base.ErrInvalidParams; test with errors.Is.
type Result struct {
	// Index is the raft log index of the entry. A follower has applied the command once its
	// AppliedIndex reaches it (WaitApplied), which gives read-your-writes on followers.
	Index uint64
	// Err is the whole command's error (nothing changed), or, for a command of exactly one
	// item, that item's error.
	Err error
	// Items holds one entry per item for PutEnd, Remove and DropReplicas (nil: the item
	// succeeded); nil for other commands.
	Items []error
	// Removed counts objects removed (Remove*, and objects left with no replica by
	// DropReplicas, MarkWorkerDead, UnregisterWorker, LeaveWorker).
	Removed int
	// Dropped counts replicas dropped (DropReplicas, MarkWorkerDead, UnregisterWorker), or
	// made lost (MarkWorkerLost, LeaveWorker).
	Dropped int
	// Replaced holds, for an upsert PutEnd, each object an item replaced at another version,
	// as it was just before this entry: the leader owes its workers drops of it. Computed at
	// apply (two upserts of a key whose entries are in flight together each replace what the
	// log puts before them); not state, so every node computes it and the proposer uses it.
	Replaced []Object
	// Gone holds, for Remove, RemoveRegex, RemoveAll and RemoveTenant, every object the entry
	// removed (visible or not), as it was just before it: the leader owes their workers
	// drops. Computed at apply, as Replaced, so an object put or replaced between the
	// proposer's look at the state and the commit is dropped too.
	Gone []Object
}

// Failed returns the number of items (or 1 for a failed single command) with an error.
func (r Result) Failed() int {
	if r.Items == nil {
		if r.Err != nil {
			return 1
		}
		return 0
	}
	n := 0
	for _, err := range r.Items {
		if err != nil {
			n++
		}
	}
	return n
}

// ErrCorruptSnapshot marks a snapshot stream that does not decode (bad magic, unknown version,
// truncated, checksum mismatch). It also matches base.ErrCorruption.
// Use errors.Is(err, ErrCorruptSnapshot).
var ErrCorruptSnapshot = fmt.Errorf("raftmeta: corrupt snapshot: %w", base.ErrCorruption)

// ErrBadCommand marks a command that does not decode. It also matches base.ErrInvalidParams.
// Use errors.Is(err, ErrBadCommand).
var ErrBadCommand = fmt.Errorf("raftmeta: bad command: %w", base.ErrInvalidParams)
