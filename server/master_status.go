package server

import (
	"time"

	"github.com/mooncake-go/mooncake/raftmeta"
)

// stats is the snapshot the metrics and the summary line read.
func (m *Master) stats() masterStats {
	st := m.node.Stats()
	s := masterStats{Keys: st.Keys, SoftPinnedKeys: st.SoftPinned}
	// Estimated FSM bytes: keys plus a fixed record size (raftmeta's target is under 200 bytes
	// per object beyond the key; 96 covers the record, map entry and replica ids of a
	// two-replica object).
	s.MetadataBytes = st.KeyBytes + st.Keys*96
	for _, seg := range m.node.Segments() {
		if seg.State != raftmeta.SegmentActive {
			continue
		}
		s.Workers++
		s.CapacityBytes += seg.DRAMCapacity
		s.AllocatedBytes += seg.Bytes
		s.Segments = append(s.Segments, segmentStat{ID: seg.ID, Allocated: seg.Bytes, Capacity: seg.DRAMCapacity})
	}
	return s
}

// Status is the JSON of /api/v1/status and of the Status call.
type Status struct {
	ClusterID      string         `json:"cluster_id"`
	Self           string         `json:"self"`
	Leader         string         `json:"leader"` // the leader's master id, "" if unknown
	LeaderAddress  string         `json:"leader_address"`
	Masters        []MasterStatus `json:"masters"`
	Workers        []WorkerStatus `json:"workers"`
	Keys           int64          `json:"keys"`
	SoftPinnedKeys int64          `json:"soft_pinned_keys"`
	Bytes          int64          `json:"bytes"`          // sum of object sizes, one copy each
	ReplicaBytes   int64          `json:"replica_bytes"`  // sum over replicas
	CapacityBytes  int64          `json:"capacity_bytes"` // DRAM of active workers
	PutsInFlight   int            `json:"puts_in_flight"` // leader only
	UsageReported  bool           `json:"usage_reported"` // false on followers: per-worker usage is leader soft state
	// EvictionHighWatermarkRatio and EvictionRatio are this master's settings (placement avoids
	// workers past the high watermark; workers evict themselves).
	EvictionHighWatermarkRatio float64 `json:"eviction_high_watermark_ratio"`
	EvictionRatio              float64 `json:"eviction_ratio"`
	RaftState                  string  `json:"raft_state"`
	RaftTerm                   uint64  `json:"raft_term"`
	AppliedIndex               uint64  `json:"applied_index"`
}

// MasterStatus is one member of the raft configuration in Status.
type MasterStatus struct {
	ID         string `json:"id"`
	RPCAddress string `json:"rpc_address"` // "" until the master registered it
	// RaftAddress is the member's raft address in the configuration this master holds.
	RaftAddress string `json:"raft_address"`
	Leader      bool   `json:"leader"`
}

// WorkerStatus is one worker in Status: FSM facts plus the leader's last heartbeat.
type WorkerStatus struct {
	ID                string `json:"id"`
	Address           string `json:"address"`
	State             string `json:"state"`         // active, dead
	Objects           int64  `json:"objects"`       // replicas the metadata places here
	ReplicaBytes      int64  `json:"replica_bytes"` // their bytes
	DRAMUsedBytes     int64  `json:"dram_used_bytes"`
	DRAMCapacityBytes int64  `json:"dram_capacity_bytes"`
	DRAMObjects       int64  `json:"dram_objects"`
	NVMeUsedBytes     int64  `json:"nvme_used_bytes"`
	NVMeCapacityBytes int64  `json:"nvme_capacity_bytes"`
	NVMeObjects       int64  `json:"nvme_objects"`
	LastHeartbeat     string `json:"last_heartbeat,omitempty"` // RFC 3339, leader only
	// RestartGraceUntil is set while the worker is away after a graceful shutdown: the leader
	// marks it dead at this time (RFC 3339) unless it registers again first. Leader only.
	RestartGraceUntil string `json:"restart_grace_until,omitempty"`
}

func (m *Master) status() Status {
	st := m.node.Stats()
	lid, laddr := m.node.Leader()
	s := Status{ClusterID: m.cfg.ClusterID, Self: m.cfg.ID, Leader: lid, LeaderAddress: laddr,
		Keys: st.Keys, SoftPinnedKeys: st.SoftPinned, Bytes: st.Bytes, RaftState: st.State, RaftTerm: st.Term,
		AppliedIndex: st.AppliedIndex, Masters: []MasterStatus{}, Workers: []WorkerStatus{},
		EvictionHighWatermarkRatio: m.cfg.EvictionHighWatermarkRatio, EvictionRatio: m.cfg.EvictionRatio}
	s.Masters = masterStatuses(m.node, lid)
	m.mu.Lock()
	defer m.mu.Unlock()
	s.UsageReported = m.mu.leader
	s.PutsInFlight = len(m.mu.reservations)
	for _, seg := range m.node.Segments() {
		w := WorkerStatus{ID: string(seg.ID), Address: seg.Address, State: seg.State.String(), Objects: seg.Objects,
			ReplicaBytes: seg.Bytes, DRAMCapacityBytes: seg.DRAMCapacity, NVMeCapacityBytes: seg.NVMeCapacity}
		s.ReplicaBytes += seg.Bytes
		if seg.State == raftmeta.SegmentActive {
			s.CapacityBytes += seg.DRAMCapacity
		}
		if ws := m.mu.workers[seg.ID]; ws != nil && seg.State == raftmeta.SegmentActive {
			u := ws.usage
			w.DRAMUsedBytes, w.DRAMObjects, w.NVMeUsedBytes, w.NVMeObjects = u.DRAMUsed, u.DRAMObjects, u.NVMeUsed, u.NVMeObjects
			if u.DRAMCapacity > 0 {
				w.DRAMCapacityBytes = u.DRAMCapacity
			}
			if u.NVMeCapacity > 0 {
				w.NVMeCapacityBytes = u.NVMeCapacity
			}
			w.LastHeartbeat = ws.lastSeen.UTC().Format(time.RFC3339Nano)
			if !ws.leavingAt.IsZero() {
				w.RestartGraceUntil = m.silenceDeadlineLocked(ws).UTC().Format(time.RFC3339Nano)
			}
		}
		s.Workers = append(s.Workers, w)
	}
	return s
}
