package raftmeta

import (
	"fmt"

	"github.com/hashicorp/raft"

	"github.com/mooncake-go/mooncake/internal/base"
)

// Version layout (see doc.go, "Versions"): the raft term in the high 24 bits, a counter that
// restarts at 1 in each term in the low 40 bits.
const (
	versionCounterBits = 40
	versionTermBits    = 64 - versionCounterBits
	maxVersionCounter  = 1<<versionCounterBits - 1
	maxVersionTerm     = 1<<versionTermBits - 1
)

// NewVersion returns a fresh object version. Leader only: a follower gets a *NotLeaderError.
//
// Versions never repeat, across failovers and restarts: raft elects at most one leader per
// term and terms only grow (they are persisted in the stable store), so the high bits are owned
// by this node alone for as long as it leads in that term; the low bits count up under a lock.
// Versions also grow over time, since a later term sorts above every version of earlier ones.
// The term is read twice around the state check: raft leaves the Leader state before it moves
// to a new term, so two equal reads around a Leader state prove this node led in that term.
//
// It fails with base.ErrUnavailable when the 2^40 versions of one term run out (a leader
// handing out a million versions a second for twelve days; a leadership transfer starts a new
// term) and with base.ErrInternal past term 2^24-1.
func (n *Node) NewVersion() (base.Version, error) {
	t1 := n.raft.CurrentTerm()
	leader := n.raft.State() == raft.Leader
	t2 := n.raft.CurrentTerm()
	if !leader || t1 != t2 {
		return 0, n.notLeader()
	}
	if t1 > maxVersionTerm {
		return 0, fmt.Errorf("raftmeta: term %d does not fit the version layout: %w", t1, base.ErrInternal)
	}
	n.ver.mu.Lock()
	defer n.ver.mu.Unlock()
	switch {
	case t1 < n.ver.term:
		// This call saw leadership in an older term and stalled before the lock while the
		// node led again in a newer one: resetting the counter to the old term would hand
		// out that term's versions a second time.
		return 0, n.notLeader()
	case t1 > n.ver.term:
		n.ver.term, n.ver.next = t1, 1
	}
	if n.ver.next > maxVersionCounter {
		return 0, fmt.Errorf("raftmeta: versions of term %d exhausted; transfer leadership: %w", t1, base.ErrUnavailable)
	}
	v := t1<<versionCounterBits | n.ver.next
	n.ver.next++
	return base.Version(v), nil
}

// IssuedThisTerm reports whether v was issued in the node's current raft term, that is by
// the current leader (versions carry their term). A leader uses it to tell a put it placed
// itself (whose reservation it knows, or dropped) from one a predecessor started.
func (n *Node) IssuedThisTerm(v base.Version) bool {
	return uint64(v)>>versionCounterBits == n.raft.CurrentTerm()
}
