package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/mooncake-go/mooncake/internal/base"
	"github.com/mooncake-go/mooncake/transfer"
)

// Status is the cluster status a master reports (the JSON of its /api/v1/status page and of
// the Status call). Raw keeps the document as sent, so fields a newer master adds are not
// lost; the CLI prints Raw for --json. The master declares the same document as master.Status (server/master);
// TestStatusMirrorsServer fails when a field is added there and not here (or listed as not
// mirrored: the per-model report, which MemoryJSON returns in full).
type Status struct {
	ClusterID string `json:"cluster_id"`
	// Self is the id of the master that answered.
	Self string `json:"self"`
	// Leader is the leader's master id ("m2"); "" while there is none.
	Leader        string `json:"leader"`
	LeaderAddress string `json:"leader_address"`
	// Masters lists every master of the raft configuration.
	Masters []MasterStatus `json:"masters"`
	// Workers lists every registered worker (segment).
	Workers []WorkerStatus `json:"workers"`
	// Keys and Bytes count the committed objects and their size (one copy each).
	Keys           int64 `json:"keys"`
	SoftPinnedKeys int64 `json:"soft_pinned_keys"`
	Bytes          int64 `json:"bytes"`
	ReplicaBytes   int64 `json:"replica_bytes"`
	// CapacityBytes is the DRAM of the active workers.
	CapacityBytes int64 `json:"capacity_bytes"`
	PutsInFlight  int   `json:"puts_in_flight"`
	// UsageReported is false on followers: per-worker usage is the leader's soft state.
	UsageReported bool `json:"usage_reported"`
	// InvisibleObjects have every replica on a dead worker: kept for re-adoption when it
	// returns, invisible to reads until then. LostReplicas counts dead workers' replicas kept.
	InvisibleObjects int64 `json:"invisible_objects"`
	LostReplicas     int64 `json:"lost_replicas"`
	// Repair is the repair and drain progress (leader only).
	Repair       RepairStatus `json:"repair"`
	RaftState    string       `json:"raft_state"`
	RaftTerm     uint64       `json:"raft_term"`
	AppliedIndex uint64       `json:"applied_index"`
	// EvictionHighWatermarkRatio and EvictionRatio are the master's settings; a worker started
	// without its own derives its DRAM watermarks from them.
	EvictionHighWatermarkRatio float64 `json:"eviction_high_watermark_ratio"`
	EvictionRatio              float64 `json:"eviction_ratio"`
	// RootFSDir is the master's --root_fs_dir, for workers that set none ("" when unset).
	RootFSDir string `json:"root_fs_dir,omitempty"`
	// Tenants lists every tenant with a quota or an object (tenant.go).
	Tenants []TenantStatus `json:"tenants"`
	// TenantDefault is the default quota, that of every tenant without its own, as the
	// pseudo-tenant "_default"; nil when none is set.
	TenantDefault *TenantStatus `json:"tenant_default,omitempty"`

	Raw json.RawMessage `json:"-"`
}

// MasterStatus is one master in Status: a member of the raft configuration.
type MasterStatus struct {
	ID         string `json:"id"`
	RPCAddress string `json:"rpc_address"` // "" until the master registered it
	// RaftAddress is its raft address ("" from a master that predates the field).
	RaftAddress string `json:"raft_address"`
	Leader      bool   `json:"leader"`
}

// WorkerStatus is one worker in Status.
type WorkerStatus struct {
	ID      string `json:"id"`
	Address string `json:"address"`
	// State is "active" or "dead".
	State string `json:"state"`
	// Objects and ReplicaBytes are what the metadata places on this worker.
	Objects           int64  `json:"objects"`
	ReplicaBytes      int64  `json:"replica_bytes"`
	DRAMUsedBytes     int64  `json:"dram_used_bytes"`
	DRAMCapacityBytes int64  `json:"dram_capacity_bytes"`
	DRAMObjects       int64  `json:"dram_objects"`
	NVMeUsedBytes     int64  `json:"nvme_used_bytes"`
	NVMeCapacityBytes int64  `json:"nvme_capacity_bytes"`
	NVMeObjects       int64  `json:"nvme_objects"`
	LastHeartbeat     string `json:"last_heartbeat,omitempty"`
	// RestartGraceUntil is set while the worker is away after a graceful shutdown: the leader
	// marks it dead at this time (RFC 3339) unless it registers again first. Leader only.
	RestartGraceUntil string `json:"restart_grace_until,omitempty"`
	// Lifecycle is the leader's view: registering, alive, suspect, leaving, dead, returning
	// or draining ("" from a follower or a master that predates it).
	Lifecycle string `json:"lifecycle,omitempty"`
	// Attached: the worker holds its connection to the leader, so its crash is seen at once
	// (false from a follower or a master that predates it).
	Attached bool `json:"attached,omitempty"`
	// Draining: no new puts; its objects are being moved away (Objects counts what is left).
	Draining bool `json:"draining,omitempty"`
	// LostReplicas counts a dead worker's replicas kept for re-adoption.
	LostReplicas int64 `json:"lost_replicas,omitempty"`
}

// RepairStatus is the repair and drain progress in Status (leader only).
type RepairStatus struct {
	// UnderReplicatedObjects have a replica on a dead worker; DrainingReplicas are on
	// draining workers (both as of the leader's last scan).
	UnderReplicatedObjects int   `json:"under_replicated_objects"`
	DrainingReplicas       int   `json:"draining_replicas"`
	Queued                 int   `json:"queued"`
	InFlight               int   `json:"in_flight"`
	Copied                 int64 `json:"copied"`
	Failed                 int64 `json:"failed"`
	CopiedBytes            int64 `json:"copied_bytes"`
}

// ParseStatus decodes a master's status JSON, keeping the raw bytes.
func ParseStatus(p []byte) (Status, error) {
	var s Status
	if err := json.Unmarshal(p, &s); err != nil {
		return Status{}, err
	}
	s.Raw = append(json.RawMessage(nil), p...)
	return s, nil
}

// statusRounds bounds the rounds over every master that Status makes while masters answer
// but none names a leader (an election in progress, or a cluster that lost its quorum): it
// then returns what a master sees rather than wait out its whole timeout.
const statusRounds = 3

// Status returns the cluster status as the leader sees it (with per-worker usage). A master
// that answers without a leader (cut off from the others, or between terms) or does not
// answer is passed over for the next one, each within its share of the timeout; one that
// names the leader sends Status there. When masters answer but the leader's view cannot be had
// after statusRounds rounds, the first answer is returned (Leader "", or a follower's view);
// when none answers at all, Status keeps trying until its timeout.
func (c *Client) Status(ctx context.Context) (Status, error) {
	ctx, cancel := c.withTimeout(ctx)
	defer cancel()
	var (
		fallback *Status // the first answer that is not the leader's
		errs     []error
		backoff  = 20 * time.Millisecond
	)
	for round := 0; ; round++ {
		masters := c.statusOrder()
		for n, addr := range masters {
			st, err := c.masterStatusWithin(ctx, addr, len(masters)-n)
			if err == nil && st.fromLeader() {
				c.setLeader(addr)
				return st, nil
			}
			if err == nil && st.LeaderAddress != "" && st.LeaderAddress != addr {
				// A follower that knows the leader: ask it.
				lst, lerr := c.masterStatusWithin(ctx, st.LeaderAddress, len(masters)-n)
				if lerr == nil && lst.fromLeader() {
					c.learnLeader(st.LeaderAddress)
					return lst, nil
				}
			}
			if err != nil {
				if errors.Is(err, base.ErrClusterMismatch) || errors.Is(err, base.ErrProtocolVersion) {
					return Status{}, fmt.Errorf("status: %w", err)
				}
				errs = append(errs, err)
			} else if fallback == nil {
				fallback = &st
			}
			if ctx.Err() != nil {
				break
			}
		}
		if fallback != nil && (round+1 >= statusRounds || ctx.Err() != nil) {
			return *fallback, nil
		}
		t := time.NewTimer(backoff + rand.N(backoff/2+1))
		select {
		case <-ctx.Done():
			t.Stop()
			if fallback != nil {
				return *fallback, nil
			}
			return Status{}, fmt.Errorf("%w: status: no master answered: %w", base.ErrUnavailable, errors.Join(errs...))
		case <-t.C:
		}
		backoff = min(2*backoff, c.cfg.MaxBackoff)
	}
}

// fromLeader reports whether the status is the leader's own view.
func (st *Status) fromLeader() bool {
	if st.Self == "" { // a master that predates Self: only the leader reports usage
		return st.UsageReported
	}
	return st.Leader == st.Self
}

// statusOrder returns the known masters, the leader guess first, then the others in order
// after it.
func (c *Client) statusOrder() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	ms := c.mu.masters
	start := max(slices.Index(ms, c.mu.leader), 0)
	return append(slices.Clone(ms[start:]), ms[:start]...)
}

// masterStatusWithin asks the master at addr for its status within its share of the time
// left, left masters (this one included) still to be asked.
func (c *Client) masterStatusWithin(ctx context.Context, addr string, left int) (Status, error) {
	actx, cancel := readAttempt(ctx, left)
	defer cancel()
	return c.MasterStatus(actx, addr)
}

// MasterStatus asks one master (by its RPC address) for its own view, leader or not: a
// follower reports its applied index and key count, which shows whether it has caught up.
func (c *Client) MasterStatus(ctx context.Context, addr string) (Status, error) {
	ctx, cancel := c.withTimeout(ctx)
	defer cancel()
	var resp transfer.StatusResponse
	if err := c.rpc.Call(ctx, addr, transfer.NewEmpty(transfer.OpStatus), &resp); err != nil {
		return Status{}, fmt.Errorf("status of %s: %w", addr, err)
	}
	st, err := ParseStatus(resp.JSON)
	if err != nil {
		return Status{}, fmt.Errorf("%w: status of %s: bad JSON: %v", base.ErrInternal, addr, err)
	}
	return st, nil
}
