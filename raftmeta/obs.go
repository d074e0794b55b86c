package raftmeta

import (
	"sync/atomic"
	"time"

	"github.com/hashicorp/raft"
)

// CommitLatencyBuckets are the upper bounds, in seconds, of the commit latency histogram
// (Stats.CommitLatency): from 0.5 ms (an fsync on NVMe, a loopback round trip) to 10 s
// (applyTimeout, past which callers give up), about x2.5 apart, as etcd's
// backend_commit_duration_seconds starts at 1 ms.
var CommitLatencyBuckets = []float64{0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10}

// Histogram is a snapshot of a latency histogram: Counts[i] is the number of observations at
// or under Bounds[i] (cumulative, as Prometheus wants them); Count and Sum (seconds) cover all.
type Histogram struct {
	Bounds []float64
	Counts []uint64
	Count  uint64
	Sum    float64
}

// nodeObs holds the node's own counters. Typed atomics, no lock.
type nodeObs struct {
	// leaderChanges counts leaders this node saw elected (any node, itself included), like
	// etcd's server_leader_changes_seen_total.
	leaderChanges atomic.Uint64
	commit        struct {
		buckets  [16]atomic.Uint64 // per bucket (not cumulative); len(CommitLatencyBuckets) < 16
		count    atomic.Uint64
		sumNanos atomic.Uint64
	}
}

// observeCommit records the latency of one successful Apply (proposal to FSM result).
func (o *nodeObs) observeCommit(d time.Duration) {
	s := d.Seconds()
	for i, b := range CommitLatencyBuckets {
		if s <= b {
			o.commit.buckets[i].Add(1)
			break
		}
	}
	o.commit.count.Add(1)
	o.commit.sumNanos.Add(uint64(max(d, 0)))
}

// commitHistogram returns a snapshot of the commit latencies.
func (o *nodeObs) commitHistogram() Histogram {
	h := Histogram{Bounds: CommitLatencyBuckets, Counts: make([]uint64, len(CommitLatencyBuckets))}
	var run uint64
	for i := range CommitLatencyBuckets {
		run += o.commit.buckets[i].Load()
		h.Counts[i] = run
	}
	h.Count = o.commit.count.Load()
	h.Sum = float64(o.commit.sumNanos.Load()) / 1e9
	return h
}

// newLeaderObserver registers a raft observer that counts leader changes; the caller
// drains the returned channel (watchLeadership does).
func (n *Node) newLeaderObserver() (<-chan raft.Observation, *raft.Observer) {
	ch := make(chan raft.Observation, 16)
	obs := raft.NewObserver(ch, false, func(o *raft.Observation) bool {
		lo, ok := o.Data.(raft.LeaderObservation)
		return ok && lo.LeaderID != ""
	})
	n.raft.RegisterObserver(obs)
	return ch, obs
}

// LeaderChanges returns how many leader elections this node has seen.
func (n *Node) LeaderChanges() uint64 { return n.obs.leaderChanges.Load() }

// CommitLatency returns the histogram of Apply latencies on this node (leader only: a
// follower's Apply fails with NOT_LEADER and is not counted).
func (n *Node) CommitLatency() Histogram { return n.obs.commitHistogram() }
