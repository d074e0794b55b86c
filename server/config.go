package server

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"strconv"
	"strings"
	"time"

	"github.com/mooncake-go/mooncake/dram"
	"github.com/mooncake-go/mooncake/internal/base"
	"github.com/mooncake-go/mooncake/raftmeta"
	"github.com/mooncake-go/mooncake/server/config"
	"github.com/mooncake-go/mooncake/server/lifecycle"
	"github.com/mooncake-go/mooncake/transfer"
)

// Defaults, as the config table (server/config) declares them: these names read it, none
// writes a value of its own. Each is documented, with the evidence for it, at its Setting.
var (
	// DefaultClientTTL: a worker silent this long is marked dead (--client_ttl).
	DefaultClientTTL = config.MasterDefaults.ClientTTL
	// DefaultWorkerRestartGrace: a worker that announced a graceful shutdown is kept this long
	// (--worker_restart_grace).
	DefaultWorkerRestartGrace = config.MasterDefaults.WorkerRestartGrace
	// DefaultClientDisconnectGrace: a worker whose connection to the leader broke is marked
	// dead this long after (--client_disconnect_grace).
	DefaultClientDisconnectGrace = config.MasterDefaults.ClientDisconnectGrace
	// DefaultHeartbeatInterval is how often a worker heartbeats the leader.
	DefaultHeartbeatInterval = config.WorkerDefaults.HeartbeatInterval
	// DefaultPutTimeout bounds a put between PutStart and PutEnd (--put_timeout).
	DefaultPutTimeout = config.MasterDefaults.PutTimeout
	// DefaultEvictionHighWatermarkRatio is Mooncake's --eviction_high_watermark_ratio default.
	DefaultEvictionHighWatermarkRatio = config.MasterDefaults.EvictionHighWatermarkRatio
	// DefaultEvictionRatio is Mooncake's --eviction_ratio default.
	DefaultEvictionRatio = config.MasterDefaults.EvictionRatio
	// DefaultMaxValueSize bounds one value (--max_value_size).
	DefaultMaxValueSize = int64(config.MasterDefaults.MaxValueSize)
	// DefaultSummaryInterval is how often the leader logs its "Master Metrics:" line.
	DefaultSummaryInterval = config.MasterDefaults.SummaryInterval
	// DefaultGlobalSegmentSize is the worker's DRAM arena when none is configured.
	DefaultGlobalSegmentSize = int64(config.WorkerDefaults.GlobalSegmentSize)
	// DefaultMasterID names a master when MasterConfig.ID is empty (a standalone master).
	DefaultMasterID = config.MasterDefaults.MasterID
	// DefaultPrefetchBudget is WorkerConfig.PrefetchBudget's default (--prefetch_budget).
	DefaultPrefetchBudget = int64(config.WorkerDefaults.PrefetchBudget)
	// DefaultShmLeaseTTL is WorkerConfig.ShmLeaseTTL's default.
	DefaultShmLeaseTTL = config.WorkerDefaults.ShmLeaseTTL
)

// DefaultProtocol is the only transfer protocol this build implements.
const DefaultProtocol = "tcp"

// MasterConfig configures one master. A zero field takes the default its comment names.
// Call EnsureDefaults, then Validate (NewMaster does both).
type MasterConfig struct {
	// ID is this master's raft server id. Default "m1".
	ID string
	// DataDir holds the raft log, stable store and snapshots. Required.
	DataDir string
	// RPCAddress is where clients and workers reach this master (host:port; port 0 picks a
	// free one, read it back with Master.Addr). Default "127.0.0.1:50051".
	RPCAddress string
	// RaftAddress is the raft transport address. Default: the RPCAddress host, port 7001
	// (or port 0 when RPCAddress uses port 0). It must match this master's entry in Peers.
	RaftAddress string
	// MetricsAddress serves /metrics, /health, /api/v1/status and the dashboard.
	// Default "" means no metrics server (cmd/ passes ":9003", Mooncake's --metrics_port).
	MetricsAddress string
	// Peers are the initial voters, this master included, used only to bootstrap a new
	// DataDir. Default: this master alone (a single-voter cluster, as in standalone).
	Peers []raftmeta.Peer
	// Join starts the master without bootstrapping anything: with an empty DataDir it waits,
	// with no leader, until the leader of an existing cluster adds it (the AddMaster call,
	// `mooncake master add`); with raft state it resumes like any restart. It must not be
	// combined with Peers. Default false: an empty DataDir bootstraps Peers (or this master
	// alone), which for a replacement master would start a second, separate cluster.
	Join bool
	// ClusterID must match the workers'. Default base.DefaultClusterID ("mooncake_cluster").
	ClusterID string
	// ClientTTL: a worker silent this long is marked dead and its replicas dropped. Default 10 s.
	ClientTTL time.Duration
	// WorkerRestartGrace: a worker whose last heartbeat announced a graceful shutdown (leaving
	// to restart) is marked dead only once this long has passed since that heartbeat (or
	// ClientTTL, whichever ends later); its re-registration ends the grace. Leader soft state:
	// a new leader gives every worker a fresh ClientTTL from its election instead. A value at
	// or under ClientTTL gives no grace. Default DefaultWorkerRestartGrace (2 min); see there
	// why.
	WorkerRestartGrace time.Duration
	// ClientDisconnectGrace: a worker whose connection to the leader broke (the AttachWorker
	// call it holds open ended with the connection) gets no new puts from then on and is
	// marked dead this long after, unless it attaches again; at or over ClientTTL it changes
	// nothing but the placements. Leader soft state. Default DefaultClientDisconnectGrace
	// (2 s).
	ClientDisconnectGrace time.Duration
	// Repair bounds the copies repair and drain make, worker to worker (copies in flight,
	// bytes per second, tasks queued). Zero fields take lifecycle's defaults (4 in flight,
	// 128 MiB/s).
	Repair lifecycle.RepairConfig
	// EvictionHighWatermarkRatio: a worker whose DRAM is fuller than this ratio gets no new
	// replicas while another worker has free room under it (the worker's own tier engine
	// evicts). Default 0.95. Range (0, 1].
	EvictionHighWatermarkRatio float64
	// EvictionRatio is the share of DRAM a worker frees when it evicts. Default 0.05.
	// Range (0, 1). Reported in status; the worker's tier engine applies its own watermarks.
	EvictionRatio float64
	// PutTimeout: a reservation not ended by PutEnd this long after PutStart is dropped, and
	// the workers told to drop the pending bytes. Default 60 s.
	PutTimeout time.Duration
	// MaxValueSize bounds one value in bytes. Default 64 GiB.
	MaxValueSize int64
	// RaftNoSync skips the fsync of the raft log (raftmeta.Config.NoSync): a put is
	// acknowledged once its PutEnd entry is written to a quorum's page cache, not its disk.
	// Such a put survives a crash of any number of master processes, but not an operating
	// system crash or power loss of a quorum of master hosts at once. Default false: every
	// acknowledged put's metadata is fsynced on a quorum.
	RaftNoSync bool
	// SummaryInterval is the period of the leader's "Master Metrics:" log line. Default 10 s.
	SummaryInterval time.Duration
	// NoSummary turns the "Master Metrics:" line off (Mooncake's
	// --enable_metric_reporting=false). Default false.
	NoSummary bool
	// RootFSDir is the NVMe directory this master hands to workers that set none of their own
	// (Mooncake's master --root_fs_dir): it is in Status, which a worker reads at start.
	// Default "": workers without one are DRAM only.
	RootFSDir string
	// Conns bound the client connections kept open and doing nothing, as on the worker.
	// Defaults: see ConnLimits.
	Conns ConnLimits
	// KVEvents is Mooncake's KV event publisher (kvevents.go). Default off.
	KVEvents KVEventsConfig
	// Logger receives every log line. Default slog.Default().
	Logger *slog.Logger

	// Test hooks, nil/false in production.
	testRaft     func(*raftmeta.Config) // adjusts raft timing for loopback tests
	noBootstrap  bool                   // the test bootstraps the cluster itself (port-0 peers)
	onWorkerDead func(base.WorkerID)    // called after MarkWorkerLost committed
	// testRegisterLimits adjusts the bounds of paged registrations.
	testRegisterLimits func(*lifecycle.SessionLimits)
	// testBeforeRegisterPage is called as each page of a paged registration arrives, before
	// the master looks at it.
	testBeforeRegisterPage func(m *Master, id base.WorkerID, session uint64, page uint32)
	// testBeforeCall is called as each RPC call arrives, before it is served (a test makes
	// the master silent by blocking in it).
	testBeforeCall func(ctx context.Context, req transfer.Message)
}

// EnsureDefaults fills every zero field with its documented default.
func (c *MasterConfig) EnsureDefaults() {
	if c.ID == "" {
		c.ID = DefaultMasterID
	}
	if c.RPCAddress == "" {
		c.RPCAddress = net.JoinHostPort("127.0.0.1", strconv.Itoa(config.MasterDefaults.RPCPort))
	}
	if c.RaftAddress == "" {
		host, port, err := net.SplitHostPort(c.RPCAddress)
		if err == nil {
			if port == "0" {
				c.RaftAddress = net.JoinHostPort(host, "0")
			} else {
				c.RaftAddress = net.JoinHostPort(host, strconv.Itoa(config.MasterDefaults.RaftPort))
			}
		}
	}
	if c.ClusterID == "" {
		c.ClusterID = base.DefaultClusterID
	}
	if c.ClientTTL == 0 {
		c.ClientTTL = DefaultClientTTL
	}
	if c.WorkerRestartGrace == 0 {
		c.WorkerRestartGrace = DefaultWorkerRestartGrace
	}
	if c.ClientDisconnectGrace == 0 {
		c.ClientDisconnectGrace = DefaultClientDisconnectGrace
	}
	if c.EvictionHighWatermarkRatio == 0 {
		c.EvictionHighWatermarkRatio = DefaultEvictionHighWatermarkRatio
	}
	if c.EvictionRatio == 0 {
		c.EvictionRatio = DefaultEvictionRatio
	}
	if c.PutTimeout == 0 {
		c.PutTimeout = DefaultPutTimeout
	}
	if c.MaxValueSize == 0 {
		c.MaxValueSize = DefaultMaxValueSize
	}
	if c.SummaryInterval == 0 {
		c.SummaryInterval = DefaultSummaryInterval
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
}

// Validate reports the first invalid field as an error wrapping base.ErrInvalidParams.
// It presumes EnsureDefaults has been called.
func (c *MasterConfig) Validate() error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: master config: "+format, append([]any{base.ErrInvalidParams}, args...)...)
	}
	switch {
	case c.DataDir == "":
		return bad("data_dir is required")
	case !validHostPort(c.RPCAddress):
		return bad("rpc_address %q is not host:port", c.RPCAddress)
	case !validHostPort(c.RaftAddress):
		return bad("raft_address %q is not host:port", c.RaftAddress)
	case c.MetricsAddress != "" && !validHostPort(c.MetricsAddress):
		return bad("metrics address %q is not host:port", c.MetricsAddress)
	}
	if err := config.CheckEach(config.KindMaster, "master config: ", "client_ttl", c.ClientTTL, "worker_restart_grace", c.WorkerRestartGrace,
		"client_disconnect_grace", c.ClientDisconnectGrace, "eviction_high_watermark_ratio", c.EvictionHighWatermarkRatio,
		"eviction_ratio", c.EvictionRatio, "put_timeout", c.PutTimeout, "max_value_size", c.MaxValueSize,
		"summary_interval", c.SummaryInterval); err != nil {
		return err
	}
	if err := c.Conns.Validate(); err != nil {
		return err
	}
	if err := c.KVEvents.Validate(); err != nil {
		return fmt.Errorf("%w: master config: %w", base.ErrInvalidParams, err)
	}
	if c.Join && len(c.Peers) > 0 {
		return bad("join and peers exclude each other: a joining master is added by the leader, it bootstraps nothing")
	}
	if peers := c.Peers; len(peers) > 0 {
		self := false
		seen := map[string]bool{}
		for _, p := range peers {
			if p.ID == "" || !validHostPort(p.RaftAddr) {
				return bad("peer %q=%q: want id=host:port", p.ID, p.RaftAddr)
			}
			if seen[p.ID] {
				return bad("peer %q listed twice", p.ID)
			}
			seen[p.ID] = true
			if p.ID == c.ID {
				self = true
			}
		}
		if !self {
			return bad("peers do not include this master's id %q", c.ID)
		}
	}
	return nil
}

// logAttrs is the effective config as logged once at start: every setting of the config
// table this config has a field for (server/config's LogAttrs), then what the server
// composes; the id is on the logger itself.
func (c *MasterConfig) logAttrs() []any {
	peers := make([]string, len(c.Peers))
	for i, p := range c.Peers {
		peers[i] = p.ID + "=" + p.RaftAddr
	}
	return config.LogAttrs(&config.Master{}, c, []string{"id"},
		"metrics_address", c.MetricsAddress, "peers", strings.Join(peers, ","), "raft_fsync", !c.RaftNoSync,
		"enable_kv_events", c.KVEvents.Enabled, "size_units", base.SizeUnits)
}

// WorkerConfig configures one worker. A zero field takes the default its comment names.
// Call EnsureDefaults, then Validate (NewWorker does both).
type WorkerConfig struct {
	// WorkerID names the worker for its whole life. Default: the id persisted under
	// RootFSDir/<cluster_id>/worker_id.<address> by an earlier run, else one derived from
	// Address ("w-127.0.0.1-12300"; with port 0, a random suffix), persisted when RootFSDir is set,
	// so a restart keeps its NVMe directory and its replicas.
	WorkerID base.WorkerID
	// ClusterID must match the masters'. Default base.DefaultClusterID.
	ClusterID string
	// MasterAddresses are the masters' RPC addresses (Mooncake master_server_address). Required.
	MasterAddresses []string
	// Address is where clients reach this worker (Mooncake local_hostname + port).
	// Default "127.0.0.1:0" (a free port; Worker.Addr reads it back).
	Address string
	// MetricsAddress serves /metrics, /health and /api/v1/status. Default "" = none.
	MetricsAddress string
	// GlobalSegmentSize is the DRAM arena in bytes (Mooncake global_segment_size). Default 1 GiB.
	GlobalSegmentSize int64
	// RootFSDir holds the NVMe tier under RootFSDir/<cluster_id>/<worker_id>/. Default "":
	// DRAM only, and Persistence defaults to cache.
	RootFSDir string
	// Persistence is the worker's default mode. Default spill with RootFSDir, else cache.
	// spill and durable need RootFSDir.
	Persistence base.Persistence
	// SSDCapacity bounds the NVMe tier in bytes. Default: nvme's (90% of the free disk).
	SSDCapacity int64
	// Protocol is the transfer protocol. Default "tcp", the only one this build has.
	Protocol string
	// HugePages chooses the arena's page mode. Default dram.HugePagesAuto.
	HugePages dram.HugePages
	// PrefaultArena faults in the whole arena at start (dram.Options.Prefault): puts never
	// pay first-touch page faults, at the price of RSS = GlobalSegmentSize from the start
	// and a slower start. Default false.
	PrefaultArena bool
	// PopulateArena faults the arena in after start from a low-priority background
	// goroutine, ahead of the allocator (dram.Options.Populate): puts mostly find their
	// pages there, start is as fast as without. Ignored with PrefaultArena. Default false
	// here; the mooncake binary's --populate_arena is on by default.
	PopulateArena bool
	// HighWatermark and LowWatermark are the shares of the DRAM arena at which background
	// eviction starts and stops (cmd derives them from the master's
	// eviction_high_watermark_ratio and eviction_ratio). Default: tier's (0.95 / 0.85).
	HighWatermark, LowWatermark float64
	// HeartbeatInterval is the period of heartbeats to the leader. Default 1 s.
	HeartbeatInterval time.Duration
	// PendingWriteTimeout: bytes written but never committed are dropped this long after the
	// first Write. Default DefaultPutTimeout (60 s), matching the master's PutTimeout.
	PendingWriteTimeout time.Duration
	// WarmUp, with RootFSDir, copies objects found on NVMe at start back into DRAM in the
	// background (in key order, up to the tier's low watermark, never evicting), so a restart
	// serves from DRAM again sooner. Default false: objects are promoted when they are read.
	WarmUp bool
	// PrefetchBudget bounds the bytes of prefetches (prefetch on exist: a client's
	// is_exist(prefetch_to_memory) asking this worker to promote NVMe objects to DRAM) in
	// flight at once; a prefetch that does not fit is dropped and counted, never queued.
	// Default DefaultPrefetchBudget; negative: prefetch off (answered NOT_SUPPORTED).
	PrefetchBudget int64
	// PrivateArena keeps the DRAM arena private to the worker process. By default it is
	// a memfd that clients on the same host (same uid, or root) map read-only and copy
	// objects out of (ShmOpen/ShmPin: one copy, no TCP); with PrivateArena they read over TCP.
	PrivateArena bool
	// TCPSendfile sends the arena bytes of TCP reads to clients that verify checksums with
	// sendfile from the arena's memfd (by reference, transfer.ServerOptions.SendfileReads)
	// instead of copying them into the socket. Default false (see SendfileReads for why);
	// without a shared (memfd) arena it changes nothing.
	TCPSendfile bool
	// ShmLeaseTTL bounds how long a client on this host may keep an object pinned with ShmPin
	// without releasing it (a lease also ends with its connection). Default 30 s.
	ShmLeaseTTL time.Duration
	// Conns bound the connections clients keep open and do nothing with. Defaults: see
	// ConnLimits.
	Conns ConnLimits
	// Logger receives every log line. Default slog.Default().
	Logger *slog.Logger
	// Ephemeral marks a worker that will not come back after Shutdown (the worker the C
	// library embeds in an application process): Shutdown then unmounts it from the leader
	// (LeaveWorker) instead of asking for a restart grace, so when Shutdown returns no put
	// goes to it and the objects only it held are gone from the metadata, as Mooncake's
	// close unmounts a client's segment. Default false.
	Ephemeral bool

	// testResyncInterval overrides minResyncInterval (test hook; 0 in production).
	testResyncInterval time.Duration
	// testNoLeavingBeat makes Shutdown skip its final (leaving) heartbeat or its unmount, as a
	// crashed worker would (test hook; false in production).
	testNoLeavingBeat bool
	// testBeforeAttach runs before each AttachWorker call (test hook; nil in production).
	testBeforeAttach func()
	// testRegisterPageObjects overrides registerPageObjects, the objects in one registration
	// page (test hook; 0 in production).
	testRegisterPageObjects int
}

// EnsureDefaults fills every zero field with its documented default (WorkerID is resolved
// later, once the address is bound and RootFSDir is read).
func (c *WorkerConfig) EnsureDefaults() {
	if c.ClusterID == "" {
		c.ClusterID = base.DefaultClusterID
	}
	if c.Address == "" {
		c.Address = "127.0.0.1:0"
	}
	if c.GlobalSegmentSize == 0 {
		c.GlobalSegmentSize = DefaultGlobalSegmentSize
	}
	if c.Persistence == base.PersistenceDefault {
		if c.RootFSDir != "" {
			c.Persistence = base.PersistenceSpill
		} else {
			c.Persistence = base.PersistenceCache
		}
	}
	if c.Protocol == "" {
		c.Protocol = DefaultProtocol
	}
	if c.HeartbeatInterval == 0 {
		c.HeartbeatInterval = DefaultHeartbeatInterval
	}
	if c.PendingWriteTimeout == 0 {
		c.PendingWriteTimeout = config.WorkerDefaults.PendingWriteTimeout
	}
	if c.ShmLeaseTTL == 0 {
		c.ShmLeaseTTL = DefaultShmLeaseTTL
	}
	if c.PrefetchBudget == 0 {
		c.PrefetchBudget = DefaultPrefetchBudget
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
}

// Validate reports the first invalid field as an error wrapping base.ErrInvalidParams (or
// base.ErrNotSupported for a protocol this build lacks). It presumes EnsureDefaults.
func (c *WorkerConfig) Validate() error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: worker config: "+format, append([]any{base.ErrInvalidParams}, args...)...)
	}
	if c.WorkerID != "" {
		if err := base.ValidateWorkerID(c.WorkerID); err != nil {
			return fmt.Errorf("worker config: %w", err)
		}
	}
	if err := base.ValidateWorkerID(base.WorkerID(c.ClusterID)); err != nil {
		return bad("cluster_id %q must be a usable directory name (letters, digits, '.', '_', '-')", c.ClusterID)
	}
	if err := c.Conns.Validate(); err != nil {
		return fmt.Errorf("worker config: %w", err)
	}
	switch {
	case len(c.MasterAddresses) == 0:
		return bad("master_server_address is required")
	case !validHostPort(c.Address):
		return bad("address %q is not host:port", c.Address)
	case c.MetricsAddress != "" && !validHostPort(c.MetricsAddress):
		return bad("metrics address %q is not host:port", c.MetricsAddress)
	case c.HighWatermark < 0 || c.HighWatermark > 1 || c.LowWatermark < 0 || c.LowWatermark > 1 ||
		(c.HighWatermark > 0 && c.LowWatermark > c.HighWatermark):
		return bad("watermarks high %v, low %v: want 0 <= low <= high <= 1", c.HighWatermark, c.LowWatermark)
	case c.Persistence > base.PersistenceDurable:
		return bad("unknown persistence %d", c.Persistence)
	case c.RootFSDir == "" && c.Persistence != base.PersistenceCache:
		return bad("persistence %s needs root_fs_dir (without it the worker is DRAM only: use cache)", c.Persistence)
	}
	if err := config.CheckEach(config.KindWorker, "worker config: ", "global_segment_size", c.GlobalSegmentSize, "ssd_capacity", c.SSDCapacity,
		"heartbeat_interval", c.HeartbeatInterval, "pending_write_timeout", c.PendingWriteTimeout, "shm_lease_ttl", c.ShmLeaseTTL); err != nil {
		return err
	}
	for _, a := range c.MasterAddresses {
		if !validHostPort(a) {
			return bad("master address %q is not host:port", a)
		}
	}
	if c.Protocol != DefaultProtocol {
		return fmt.Errorf("%w: worker config: protocol %q (this build has tcp only)", base.ErrNotSupported, c.Protocol)
	}
	return nil
}

func (c *WorkerConfig) logAttrs() []any {
	return config.LogAttrs(&config.Worker{}, c, []string{"worker_id"},
		"master_server_address", strings.Join(c.MasterAddresses, ","), "address", c.Address, "metrics_address", c.MetricsAddress,
		"persistence", c.Persistence.String(), "hugepages", c.HugePages.String(), "shared_arena", !c.PrivateArena,
		"size_units", base.SizeUnits)
}

// validHostPort reports whether s is host:port with a numeric port (host may be empty).
func validHostPort(s string) bool {
	_, port, err := net.SplitHostPort(s)
	if err != nil || port == "" {
		return false
	}
	for _, r := range port {
		if r < '0' || r > '9' {
			return false
		}
	}
	return len(port) <= 5
}
