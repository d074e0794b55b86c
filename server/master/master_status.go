package master

import (
	"time"

	"github.com/mooncake-go/mooncake/raftmeta"
	"github.com/mooncake-go/mooncake/server/memory"
)

// stats is the snapshot the metrics and the summary line read.
func (m *Master) stats() masterStats {
	st := m.node.Stats()
	s := masterStats{Keys: st.Keys, SoftPinnedKeys: st.SoftPinned}
	// Estimated FSM bytes: keys plus a fixed record size (raftmeta's target is under 200 bytes
	// per object beyond the key; 96 covers the record, map entry and replica ids of a
	// two-replica object).
	s.MetadataBytes = st.KeyBytes + st.Keys*96
	s.Models = m.node.Models()
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
	// InvisibleObjects have every replica on a dead worker (kept for re-adoption, invisible
	// to reads until it returns); LostReplicas counts such replicas of dead workers.
	InvisibleObjects int64 `json:"invisible_objects"`
	LostReplicas     int64 `json:"lost_replicas"`
	// Repair is the repair and drain progress (leader only).
	Repair RepairStatus `json:"repair"`
	// Models: registered models and the tokens objects retain, from the metadata (the full
	// report with the workers' bytes is /api/v1/memory).
	Models       []memory.ModelMemory `json:"models,omitempty"`
	RaftState    string               `json:"raft_state"`
	RaftTerm     uint64               `json:"raft_term"`
	AppliedIndex uint64               `json:"applied_index"`
	// RootFSDir is handed to workers that set none of their own (worker.Config.RootFSDir).
	RootFSDir string `json:"root_fs_dir,omitempty"`
	// Tenants: every tenant with a quota or an object, its quota and usage (master_tenants.go).
	Tenants []TenantStatus `json:"tenants"`
	// TenantDefault is the default quota, that of every tenant without its own, as the
	// pseudo-tenant "_default" (absent when none is set).
	TenantDefault *TenantStatus `json:"tenant_default,omitempty"`
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
	State             string `json:"state"`         // active, dead, left
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
	// Lifecycle is the leader's lifecycle state: registering, alive, suspect, leaving, dead,
	// returning, draining, unreachable or left (docs/operations.md). Leader only.
	Lifecycle string `json:"lifecycle,omitempty"`
	// Attached: the worker holds its connection to the leader (the AttachWorker call), so
	// its crash is seen at once (docs/operations.md). Leader only.
	Attached bool `json:"attached,omitempty"`
	// Draining is the committed drain flag: no new puts, its objects move away (Objects
	// counts what is left).
	Draining bool `json:"draining,omitempty"`
	// LostReplicas counts this dead worker's replicas kept for re-adoption.
	LostReplicas int64 `json:"lost_replicas,omitempty"`
}

// RepairStatus is the repair and drain progress in Status (leader only).
type RepairStatus struct {
	// UnderReplicatedObjects have a replica on a dead worker; DrainingReplicas are on
	// draining workers (both counted at the last scan).
	UnderReplicatedObjects int   `json:"under_replicated_objects"`
	DrainingReplicas       int   `json:"draining_replicas"`
	Queued                 int   `json:"queued"`
	InFlight               int   `json:"in_flight"`
	Copied                 int64 `json:"copied"`
	Failed                 int64 `json:"failed"`
	CopiedBytes            int64 `json:"copied_bytes"`
}

func (m *Master) status() Status {
	st := m.node.Stats()
	lid, laddr := m.node.Leader()
	s := Status{ClusterID: m.cfg.ClusterID, Self: m.cfg.ID, Leader: lid, LeaderAddress: laddr,
		Keys: st.Keys, SoftPinnedKeys: st.SoftPinned, Bytes: st.Bytes, RaftState: st.State, RaftTerm: st.Term,
		InvisibleObjects: st.Invisible, LostReplicas: st.LostReplicas, AppliedIndex: st.AppliedIndex, Masters: []MasterStatus{}, Workers: []WorkerStatus{},
		EvictionHighWatermarkRatio: m.cfg.EvictionHighWatermarkRatio, EvictionRatio: m.cfg.EvictionRatio, RootFSDir: m.cfg.RootFSDir}
	s.Masters = masterStatuses(m.node, lid)
	s.Models = memory.StatusModels(m.node.Models())
	s.Tenants = m.tenantStatuses()
	if d := m.defaultTenantStatus(); d.MaxBytes != 0 || d.NVMeMaxBytes != 0 {
		s.TenantDefault = &d
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	s.UsageReported, _ = m.mu.lc.Leader()
	s.PutsInFlight = m.mu.lc.PutsInFlight()
	rs := m.mu.lc.RepairStats()
	s.Repair = RepairStatus{UnderReplicatedObjects: rs.UnderReplicated, DrainingReplicas: rs.Draining, Queued: rs.Queued,
		InFlight: rs.InFlight, Copied: rs.Copied, Failed: rs.Failed, CopiedBytes: rs.CopiedBytes}
	for _, seg := range m.node.Segments() {
		w := WorkerStatus{ID: string(seg.ID), Address: seg.Address, State: seg.State.String(), Objects: seg.Objects,
			ReplicaBytes: seg.Bytes, DRAMCapacityBytes: seg.DRAMCapacity, NVMeCapacityBytes: seg.NVMeCapacity,
			Draining: seg.Draining, LostReplicas: seg.LostReplicas}
		s.ReplicaBytes += seg.Bytes
		if seg.State == raftmeta.SegmentActive {
			s.CapacityBytes += seg.DRAMCapacity
		}
		ws, known := m.mu.lc.Worker(seg.ID)
		if known {
			w.Lifecycle, w.Attached = ws.State.String(), ws.Attached()
		}
		if known && seg.State == raftmeta.SegmentActive {
			u := ws.Usage
			w.DRAMUsedBytes, w.DRAMObjects, w.NVMeUsedBytes, w.NVMeObjects = u.DRAMUsed, u.DRAMObjects, u.NVMeUsed, u.NVMeObjects
			if u.DRAMCapacity > 0 {
				w.DRAMCapacityBytes = u.DRAMCapacity
			}
			if u.NVMeCapacity > 0 {
				w.NVMeCapacityBytes = u.NVMeCapacity
			}
			w.LastHeartbeat = ws.LastSeen.UTC().Format(time.RFC3339Nano)
			if !ws.LeavingAt.IsZero() {
				w.RestartGraceUntil = m.mu.lc.Deadline(seg.ID).UTC().Format(time.RFC3339Nano)
			}
		}
		s.Workers = append(s.Workers, w)
	}
	return s
}
