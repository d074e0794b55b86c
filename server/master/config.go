package master

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"strconv"
	"strings"
	"time"

	"github.com/mooncake-go/mooncake/internal/base"
	"github.com/mooncake-go/mooncake/raftmeta"
	"github.com/mooncake-go/mooncake/server/config"
	"github.com/mooncake-go/mooncake/server/lifecycle"
	"github.com/mooncake-go/mooncake/server/rpcsrv"
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
	// DefaultEvictionHighWatermarkRatio is Mooncake's --eviction_high_watermark_ratio default.
	DefaultEvictionHighWatermarkRatio = config.MasterDefaults.EvictionHighWatermarkRatio
	// DefaultEvictionRatio is Mooncake's --eviction_ratio default.
	DefaultEvictionRatio = config.MasterDefaults.EvictionRatio
	// DefaultMaxValueSize bounds one value (--max_value_size).
	DefaultMaxValueSize = int64(config.MasterDefaults.MaxValueSize)
	// DefaultSummaryInterval is how often the leader logs its "Master Metrics:" line.
	DefaultSummaryInterval = config.MasterDefaults.SummaryInterval
	// DefaultMasterID names a master when Config.ID is empty (a standalone master).
	DefaultMasterID = config.MasterDefaults.MasterID
)

// Config configures one master. A zero field takes the default its comment names.
// Call EnsureDefaults, then Validate (NewMaster does both).
type Config struct {
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
	// Defaults: see rpcsrv.ConnLimits.
	Conns rpcsrv.ConnLimits
	// KVEvents is Mooncake's KV event publisher (kvevents.go). Default off.
	KVEvents KVEventsConfig
	// DefaultTenantQuotaBytes (Mooncake's --default_tenant_quota_bytes) seeds the default
	// tenant quota, the DRAM quota of every tenant without its own: a leader commits it when
	// the raft state never had a default quota (master_tenants.go). Once one was set (by any
	// master's flag, the CLI or PUT /tenants/quota/_default), the raft state rules and this
	// is ignored. Default 0: no seed.
	DefaultTenantQuotaBytes base.Bytes
	// Logger receives every log line. Default slog.Default().
	Logger *slog.Logger

	// Test holds the cluster tests' hooks (package server builds masters and workers
	// together, so they cannot be this package's tests); zero in production.
	Test TestKnobs
}

// TestKnobs are hooks for tests, nil/false in production.
type TestKnobs struct {
	Raft         func(*raftmeta.Config) // adjusts raft timing for loopback tests
	NoBootstrap  bool                   // the test bootstraps the cluster itself (port-0 peers)
	OnWorkerDead func(base.WorkerID)    // called after MarkWorkerLost committed
	// Lifecycle adjusts the leader's lifecycle bounds (paged registrations, drops per
	// heartbeat answer).
	Lifecycle func(*lifecycle.Config)
	// BeforeRegisterPage is called as each page of a paged registration arrives, before
	// the master looks at it.
	BeforeRegisterPage func(m *Master, id base.WorkerID, session uint64, page uint32)
	// BeforeCall is called as each RPC call arrives, before it is served (a test makes
	// the master silent by blocking in it).
	BeforeCall func(ctx context.Context, req transfer.Message)
	// BeforeCopy is called as each copy order (repair, drain, task) starts, before the
	// source worker is asked to copy (a test holds a copy in flight by blocking in it).
	BeforeCopy func(o lifecycle.CopyOrder)
	// AfterLeaderTick is called at the end of each leader-loop tick while leading (a test
	// waits for the leader's periodic duties, such as seeding the default tenant quota).
	AfterLeaderTick func(m *Master)
}

// EnsureDefaults fills every zero field with its documented default.
func (c *Config) EnsureDefaults() {
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
		c.PutTimeout = rpcsrv.DefaultPutTimeout
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
func (c *Config) Validate() error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: master config: "+format, append([]any{base.ErrInvalidParams}, args...)...)
	}
	switch {
	case c.DataDir == "":
		return bad("data_dir is required")
	case !rpcsrv.ValidHostPort(c.RPCAddress):
		return bad("rpc_address %q is not host:port", c.RPCAddress)
	case !rpcsrv.ValidHostPort(c.RaftAddress):
		return bad("raft_address %q is not host:port", c.RaftAddress)
	case c.MetricsAddress != "" && !rpcsrv.ValidHostPort(c.MetricsAddress):
		return bad("metrics address %q is not host:port", c.MetricsAddress)
	}
	if err := config.CheckEach(config.KindMaster, "master config: ", "client_ttl", c.ClientTTL, "worker_restart_grace", c.WorkerRestartGrace,
		"client_disconnect_grace", c.ClientDisconnectGrace, "eviction_high_watermark_ratio", c.EvictionHighWatermarkRatio,
		"eviction_ratio", c.EvictionRatio, "put_timeout", c.PutTimeout, "max_value_size", c.MaxValueSize,
		"summary_interval", c.SummaryInterval, "default_tenant_quota_bytes", c.DefaultTenantQuotaBytes); err != nil {
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
			if p.ID == "" || !rpcsrv.ValidHostPort(p.RaftAddr) {
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
func (c *Config) logAttrs() []any {
	peers := make([]string, len(c.Peers))
	for i, p := range c.Peers {
		peers[i] = p.ID + "=" + p.RaftAddr
	}
	return config.LogAttrs(&config.Master{}, c, []string{"id"},
		"metrics_address", c.MetricsAddress, "peers", strings.Join(peers, ","), "raft_fsync", !c.RaftNoSync,
		"enable_kv_events", c.KVEvents.Enabled, "size_units", base.SizeUnits)
}
