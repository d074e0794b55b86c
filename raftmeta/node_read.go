package raftmeta

import (
	"fmt"

	"github.com/hashicorp/raft"
)

// Reads of this node's FSM and raft state. None checks leadership: a linearizable read calls
// VerifyLeader first (node_apply.go).

// Lookup returns the object under key from this node's FSM (no leadership check: call
// VerifyLeader first for a linearizable read).
func (n *Node) Lookup(key string) (Object, bool) { return n.fsm.lookup(key) }

// LookupAny is Lookup including an invisible object (no live replica, some lost ones: see
// MarkWorkerLost). The registration of a returning worker uses it to re-adopt.
func (n *Node) LookupAny(key string) (Object, bool) { return n.fsm.lookupAny(key) }

// Range calls fn for each object whose key starts with prefix, in key order, until fn returns
// false. It is not a point-in-time view: writes applied during the walk may or may not be seen.
// It is O(objects) per call. It includes invisible objects (Replicas empty, Lost not).
func (n *Node) Range(prefix string, fn func(Object) bool) { n.fsm.rangePrefix(prefix, fn) }

// List returns up to limit objects whose key starts with prefix and sorts after after (""
// for the first page), in key order: a page of a listing, consistent within the page. Pass the
// last key of a page as after for the next one. O(objects) time, O(limit) memory.
func (n *Node) List(prefix, after string, limit int) []Object {
	return n.fsm.list(prefix, after, limit)
}

// Segments returns every registered worker, sorted by id.
func (n *Node) Segments() []Segment {
	n.fsm.mu.RLock()
	defer n.fsm.mu.RUnlock()
	return n.fsm.st.segments()
}

// Masters returns the masters table (id -> client RPC address), sorted by id.
func (n *Node) Masters() []Master {
	n.fsm.mu.RLock()
	defer n.fsm.mu.RUnlock()
	return n.fsm.st.masterList()
}

// AppliedIndex returns the last raft index applied to this node's FSM.
func (n *Node) AppliedIndex() uint64 {
	n.fsm.mu.RLock()
	defer n.fsm.mu.RUnlock()
	return n.fsm.applied
}

// Stats returns FSM counters and this node's raft state.
func (n *Node) Stats() Stats {
	s := n.fsm.stats()
	s.State = n.raft.State().String()
	s.Term = n.raft.CurrentTerm()
	s.LastIndex = n.raft.LastIndex()
	s.CommitIndex = n.raft.CommitIndex()
	_, lid := n.raft.LeaderWithID()
	s.LeaderID = string(lid)
	if f := n.raft.GetConfiguration(); f.Error() == nil {
		for _, srv := range f.Configuration().Servers {
			if srv.Suffrage == raft.Voter {
				s.NumPeers++
			}
		}
	}
	if idx, err := lastSnapshotIndex(n.raft); err == nil {
		s.LastSnapshot = idx
	}
	return s
}

func lastSnapshotIndex(r *raft.Raft) (uint64, error) {
	var idx uint64
	_, err := fmt.Sscan(r.Stats()["last_snapshot_index"], &idx)
	return idx, err
}
