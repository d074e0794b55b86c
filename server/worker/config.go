package worker

import (
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/mooncake-go/mooncake/dram"
	"github.com/mooncake-go/mooncake/internal/base"
	"github.com/mooncake-go/mooncake/server/config"
	"github.com/mooncake-go/mooncake/server/rpcsrv"
)

// Config configures one worker. A zero field takes the default its comment names.
// Call EnsureDefaults, then Validate (NewWorker does both).
type Config struct {
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
	// PopulateArena faults the arena in after start from a background goroutine that
	// uses at most half a core, ahead of the allocator (dram.Options.Populate): puts mostly find their
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
	// first Write. Default rpcsrv.DefaultPutTimeout (60 s), matching the master's PutTimeout.
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
	// rpcsrv.ConnLimits.
	Conns rpcsrv.ConnLimits
	// Logger receives every log line. Default slog.Default().
	Logger *slog.Logger
	// Ephemeral marks a worker that will not come back after Shutdown (the worker the C
	// library embeds in an application process): Shutdown then unmounts it from the leader
	// (LeaveWorker) instead of asking for a restart grace, so when Shutdown returns no put
	// goes to it and the objects only it held are gone from the metadata, as Mooncake's
	// close unmounts a client's segment. Default false.
	Ephemeral bool

	// Test holds the cluster tests' hooks (package server builds masters and workers
	// together, so they cannot be this package's tests); zero in production.
	Test TestKnobs
}

// TestKnobs are hooks for tests, zero in production.
type TestKnobs struct {
	// ResyncInterval overrides minResyncInterval (test hook; 0 in production).
	ResyncInterval time.Duration
	// NoLeavingBeat makes Shutdown skip its final (leaving) heartbeat or its unmount, as a
	// crashed worker would (test hook; false in production).
	NoLeavingBeat bool
	// BeforeAttach runs before each AttachWorker call (test hook; nil in production).
	BeforeAttach func()
	// RegisterPageObjects overrides registerPageObjects, the objects in one registration
	// page (test hook; 0 in production).
	RegisterPageObjects int
	// LoseHeartbeatAnswer runs on each heartbeat answer before it is applied; true discards
	// it as an answer lost on the way would be (the call fails). Test hook; nil in production.
	LoseHeartbeatAnswer func(drops []base.KeyVersion) bool
	// BeforeRegister runs at the start of each registration attempt, and may block it (test
	// hook; nil in production).
	BeforeRegister func()
}

// EnsureDefaults fills every zero field with its documented default (WorkerID is resolved
// later, once the address is bound and RootFSDir is read).
func (c *Config) EnsureDefaults() {
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
		c.Protocol = rpcsrv.DefaultProtocol
	}
	if c.HeartbeatInterval == 0 {
		c.HeartbeatInterval = rpcsrv.DefaultHeartbeatInterval
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

// DefaultGlobalSegmentSize is Config.GlobalSegmentSize's default: the DRAM arena when none is
// configured.
var DefaultGlobalSegmentSize = int64(config.WorkerDefaults.GlobalSegmentSize) // the config table's default (server/config)

// DefaultPrefetchBudget is Config.PrefetchBudget's default.
var DefaultPrefetchBudget = int64(config.WorkerDefaults.PrefetchBudget) // the config table's default (server/config)

// DefaultShmLeaseTTL is Config.ShmLeaseTTL's default.
var DefaultShmLeaseTTL = config.WorkerDefaults.ShmLeaseTTL // the config table's default (server/config)

// Validate reports the first invalid field as an error wrapping base.ErrInvalidParams (or
// base.ErrNotSupported for a protocol this build lacks). It presumes EnsureDefaults.
func (c *Config) Validate() error {
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
	case !rpcsrv.ValidHostPort(c.Address):
		return bad("address %q is not host:port", c.Address)
	case c.MetricsAddress != "" && !rpcsrv.ValidHostPort(c.MetricsAddress):
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
		if !rpcsrv.ValidHostPort(a) {
			return bad("master address %q is not host:port", a)
		}
	}
	if c.Protocol != rpcsrv.DefaultProtocol {
		return fmt.Errorf("%w: worker config: protocol %q (this build has tcp only)", base.ErrNotSupported, c.Protocol)
	}
	return nil
}

func (c *Config) logAttrs() []any {
	return config.LogAttrs(&config.Worker{}, c, []string{"worker_id"},
		"master_server_address", strings.Join(c.MasterAddresses, ","), "address", c.Address, "metrics_address", c.MetricsAddress,
		"persistence", c.Persistence.String(), "hugepages", c.HugePages.String(), "shared_arena", !c.PrivateArena,
		"size_units", base.SizeUnits)
}
