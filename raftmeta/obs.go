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

// LogStoreLatencyBuckets are the upper bounds, in seconds, of the log write histogram
// (Node.LogStoreLatency): one bolt transaction with its two fdatasyncs takes 0.2-0.5 ms on a
// cloud VM's disk and tens of microseconds on NVMe with a write cache, so the buckets start
// at 0.1 ms, ~x2.5 apart, up to 1 s (a disk that stalls).
var LogStoreLatencyBuckets = []float64{0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1}

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
	// commit: successful Applies, proposal to FSM result (CommitLatencyBuckets).
	commit latencyHist
	// logStore: raft log writes, the fsynced part of a commit (LogStoreLatencyBuckets).
	logStore latencyHist
}

// latencyHist is a latency histogram of typed atomics, no lock.
type latencyHist struct {
	buckets  [16]atomic.Uint64 // per bucket (not cumulative); every bounds slice has < 16
	count    atomic.Uint64
	sumNanos atomic.Uint64
}

// observe records d against bounds (seconds, ascending).
func (h *latencyHist) observe(bounds []float64, d time.Duration) {
	s := d.Seconds()
	for i, b := range bounds {
		if s <= b {
			h.buckets[i].Add(1)
			break
		}
	}
	h.count.Add(1)
	h.sumNanos.Add(uint64(max(d, 0)))
}

// snapshot returns the histogram with cumulative counts, as Prometheus wants them.
func (h *latencyHist) snapshot(bounds []float64) Histogram {
	out := Histogram{Bounds: bounds, Counts: make([]uint64, len(bounds))}
	var run uint64
	for i := range bounds {
		run += h.buckets[i].Load()
		out.Counts[i] = run
	}
	out.Count = h.count.Load()
	out.Sum = float64(h.sumNanos.Load()) / 1e9
	return out
}

// observeCommit records the latency of one successful Apply (proposal to FSM result).
func (o *nodeObs) observeCommit(d time.Duration) { o.commit.observe(CommitLatencyBuckets, d) }

// timedLogStore times the writes of the raft log: the part of a commit that waits for the
// disk (bolt's transaction and its fdatasyncs), which the commit histogram cannot tell apart
// from raft's hand-offs and the FSM.
type timedLogStore struct {
	raft.LogStore
	obs *nodeObs
}

func (s timedLogStore) StoreLog(l *raft.Log) error { return s.StoreLogs([]*raft.Log{l}) }

func (s timedLogStore) StoreLogs(logs []*raft.Log) error {
	start := time.Now()
	err := s.LogStore.StoreLogs(logs)
	if err == nil {
		s.obs.logStore.observe(LogStoreLatencyBuckets, time.Since(start))
	}
	return err
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
func (n *Node) CommitLatency() Histogram { return n.obs.commit.snapshot(CommitLatencyBuckets) }

// LogStoreLatency returns the histogram of raft log writes on this node (leader and
// followers alike: each fsyncs the entries it appends). On a leader the difference between
// CommitLatency and it is what a commit spends outside the disk.
func (n *Node) LogStoreLatency() Histogram { return n.obs.logStore.snapshot(LogStoreLatencyBuckets) }
