package main

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/mooncake-go/mooncake/client"
	"github.com/mooncake-go/mooncake/dram"
	"github.com/mooncake-go/mooncake/internal/base"
	"github.com/mooncake-go/mooncake/server/master"
	"github.com/mooncake-go/mooncake/server/rpcsrv"
	"github.com/mooncake-go/mooncake/server/worker"
)

// Defaults of the server flags (Mooncake's where it has one).
const (
	defaultRPCPort          = 50051
	defaultMetricsPort      = 9003
	defaultWorkerPort       = 12300
	defaultSegmentSize      = base.Bytes(1 << 30)
	defaultClientTTL        = 10 * time.Second
	defaultRestartGrace     = 2 * time.Minute // master.DefaultWorkerRestartGrace
	defaultDisconnectGrace  = 2 * time.Second // master.DefaultClientDisconnectGrace
	defaultEvictHigh        = 0.95            // Mooncake's eviction_high_watermark_ratio
	defaultEvictRatio       = 0.05            // Mooncake's eviction_ratio
	defaultShutdownTimeout  = 30 * time.Second
	defaultStandaloneDir    = "./mooncake-data"
	defaultStandaloneWorker = "standalone"
)

// peer is one entry of --peers; RPCAddr comes from --peer_rpc_addresses ("" unknown).
type peer struct{ ID, RaftAddr, RPCAddr string }

// masterSettings is the effective configuration of a master, after flags, file and defaults.
// Its fields map one to one onto master.Config.
type masterSettings struct {
	ID, DataDir, RPCAddress, RaftAddress, MetricsAddress, ClusterID string
	Peers                                                           []peer
	// Join: bootstrap nothing, wait to be added by the leader (`mooncake master add`); Peers
	// is then empty.
	Join                  bool
	ClientTTL, PutTimeout time.Duration
	// WorkerRestartGrace: 0 means none (a worker that announced leaving gets ClientTTL).
	WorkerRestartGrace time.Duration
	// ClientDisconnectGrace: a worker whose connection to the leader broke is dead this long
	// after, unless it attaches again (master.Config.ClientDisconnectGrace).
	ClientDisconnectGrace                     time.Duration
	EvictionHighWatermarkRatio, EvictionRatio float64
	MaxValueSize                              int64
	// RaftNoSync: --raft_fsync=false (master.Config.RaftNoSync).
	RaftNoSync bool
	// RootFSDir is handed to workers without their own (Mooncake's master --root_fs_dir).
	RootFSDir string
	// NoSummary turns the "Master Metrics:" line off (--enable_metric_reporting=false).
	NoSummary bool
	// Conns bounds the master's idle and stalled client connections.
	Conns rpcsrv.ConnLimits
	// KVEvents is the KV event publisher (--enable_kv_events, kv_events_*).
	KVEvents master.KVEventsConfig
}

// workerSettings is the effective configuration of a worker; it maps onto worker.Config.
type workerSettings struct {
	WorkerID                base.WorkerID
	ClusterID               string
	MasterAddresses         []string
	Address, MetricsAddress string
	GlobalSegmentSize       int64
	RootFSDir               string
	Persistence             base.Persistence
	SSDCapacity             int64
	Protocol                string
	HugePages               dram.HugePages
	PrefaultArena           bool
	PopulateArena           bool
	ShutdownTimeout         time.Duration
	WarmUp                  bool
	// PrefetchBudget: worker.Config.PrefetchBudget (0 from the flag: off, -1 here).
	PrefetchBudget int64
	PrivateArena   bool
	TCPSendfile    bool
	// HighWatermark, LowWatermark: DRAM eviction watermarks, from the master's eviction flags
	// (inheritFromMaster); 0 means the tier's defaults.
	HighWatermark, LowWatermark float64
	// rootFromUser: the root_fs_dir came from a flag, the file or the environment, so the
	// master's is not taken.
	rootFromUser bool
	// Conns bounds the worker's idle and stalled connections.
	Conns rpcsrv.ConnLimits
}

// masterFlags are the flags of `mooncake master` (and the master half of standalone).
type masterFlags struct {
	id, dataDir, rpcAddress, raftAddress, peers, peerRPC, clusterID, localHostname string
	rpcPort, metricsPort                                                           int
	clientTTL, putTimeout, restartGrace, disconnectGrace                           time.Duration
	evictHigh, evictRatio                                                          float64
	maxValueSize                                                                   base.Bytes
	join, raftFsync                                                                bool
	// conns is registered by `mooncake master` only; standalone's master takes the worker's.
	conns connFlags
	kv    kvEventFlags
}

func (f *masterFlags) register(fs *pflag.FlagSet, standalone bool) {
	if !standalone {
		fs.StringVar(&f.id, "id", "", "this master's id, one of --peers (required), e.g. m1")
		fs.StringVar(&f.rpcAddress, "rpc_address", "", "client RPC address host:port (default <local_hostname>:<rpc_port>)")
		fs.StringVar(&f.raftAddress, "raft_address", "", "raft address host:port of this master (required)")
		fs.StringVar(&f.peers, "peers", "", "the initial masters, id=raft_host:port,... (default: this master alone)")
		fs.StringVar(&f.peerRPC, "peer_rpc_addresses", "", "optional: the masters' client RPC addresses, id=host:port,... (followers register their own address with the leader, so this is rarely needed)")
		fs.StringVar(&f.dataDir, "data_dir", "", "directory of the raft log, stable store and snapshots (required)")
		f.conns.register(fs)
		fs.BoolVar(&f.join, "join", false, "start without bootstrapping a cluster and wait to be added with `mooncake master add` (a new or replacement master; not with --peers)")
	} else {
		fs.StringVar(&f.dataDir, "data_dir", defaultStandaloneDir, "directory of the metadata (raft log and snapshots)")
	}
	fs.IntVar(&f.rpcPort, "rpc_port", defaultRPCPort, "client RPC port (used when --rpc_address is not given)")
	fs.IntVar(&f.metricsPort, "metrics_port", defaultMetricsPort, "HTTP port of /metrics, /health and /api/v1/status (0: a free port)")
	fs.StringVar(&f.clusterID, "cluster_id", "", "cluster id; masters, workers and clients must agree (default "+base.DefaultClusterID+")")
	fs.StringVar(&f.localHostname, "local_hostname", "", "host to bind and advertise (default: the config file's, else 127.0.0.1)")
	f.clientTTL = defaultClientTTL
	fs.Var((*secondsDuration)(&f.clientTTL), "client_ttl", "a worker silent this long is marked dead and its replicas dropped; a plain number is seconds, as in Mooncake (default 10s)")
	fs.DurationVar(&f.restartGrace, "worker_restart_grace", defaultRestartGrace, "a worker stopped with SIGTERM (which tells the leader it is restarting) keeps its replicas this long instead of client_ttl (0: no grace)")
	f.disconnectGrace = defaultDisconnectGrace
	fs.Var((*secondsDuration)(&f.disconnectGrace), "client_disconnect_grace", "a worker whose connection to the leader closes (its process killed, its host gone) gets no new puts at once and is marked dead this long after unless it reconnects; client_ttl still bounds a worker that hangs; a plain number is seconds (default 2s)")
	fs.DurationVar(&f.putTimeout, "put_timeout", 0, "a put not ended within this time is dropped (default: the server's)")
	fs.Float64Var(&f.evictHigh, "eviction_high_watermark_ratio", defaultEvictHigh, "DRAM fill ratio at which workers start evicting")
	fs.Float64Var(&f.evictRatio, "eviction_ratio", defaultEvictRatio, "fraction of DRAM an eviction round frees")
	fs.Var(&f.maxValueSize, "max_value_size", "largest value a put may store, e.g. 4GiB (default: the server's)")
	f.kv.register(fs)
	fs.BoolVar(&f.raftFsync, "raft_fsync", true, "fsync the raft log before acknowledging a write; false: faster small puts, and an acknowledged put survives master process crashes but not an OS crash or power loss of a quorum of master hosts at once")
}

// resolve builds the master settings; standalone masters are a single voter on local_hostname.
func (f *masterFlags) resolve(fs *pflag.FlagSet, fc *fileConfig, standalone bool) (masterSettings, error) {
	host := pick(fs, "local_hostname", f.localHostname, fc.LocalHostname, "127.0.0.1")
	s := masterSettings{
		ID:                         f.id,
		DataDir:                    f.dataDir,
		RPCAddress:                 f.rpcAddress,
		RaftAddress:                f.raftAddress,
		ClusterID:                  pick(fs, "cluster_id", f.clusterID, fc.ClusterID, base.DefaultClusterID),
		ClientTTL:                  f.clientTTL,
		WorkerRestartGrace:         f.restartGrace,
		ClientDisconnectGrace:      f.disconnectGrace,
		PutTimeout:                 f.putTimeout,
		EvictionHighWatermarkRatio: f.evictHigh,
		EvictionRatio:              f.evictRatio,
		MaxValueSize:               int64(f.maxValueSize),
		RaftNoSync:                 !f.raftFsync,
	}
	var err error
	if s.KVEvents, err = f.kv.config(); err != nil {
		return s, err
	}
	if err := checkPort("--rpc_port", f.rpcPort, false); err != nil {
		return s, err
	}
	if err := checkPort("--metrics_port", f.metricsPort, true); err != nil {
		return s, err
	}
	if s.RPCAddress == "" {
		s.RPCAddress = net.JoinHostPort(host, strconv.Itoa(f.rpcPort))
	} else if bareHost(s.RPCAddress) {
		// Mooncake's --rpc_address is a host; the port is --rpc_port (or --port).
		s.RPCAddress = net.JoinHostPort(strings.Trim(s.RPCAddress, "[]"), strconv.Itoa(f.rpcPort))
	}
	if err := checkHostPort(s.RPCAddress, false); err != nil {
		return s, fmt.Errorf("--rpc_address: %w", err)
	}
	rpcHost, _, _ := net.SplitHostPort(s.RPCAddress)
	s.MetricsAddress = net.JoinHostPort(rpcHost, strconv.Itoa(f.metricsPort))
	if standalone {
		s.ID = "m1"
		s.RaftAddress = net.JoinHostPort(rpcHost, "0")
	} else {
		switch {
		case s.ID == "":
			return s, usagef("master: --id is required (e.g. --id m1; mooncake_master without --id runs a one-master cluster)")
		case s.DataDir == "":
			return s, usagef("master: --data_dir is required")
		case s.RaftAddress == "":
			return s, usagef("master: --raft_address is required (e.g. --raft_address 127.0.0.1:7001)")
		}
		if err := validateMasterID(s.ID); err != nil {
			return s, fmt.Errorf("--id: %w", err)
		}
		if err := checkHostPort(s.RaftAddress, true); err != nil {
			return s, fmt.Errorf("--raft_address: %w", err)
		}
		if f.join {
			// A joining master must not bootstrap: with --peers (even naming only itself) an
			// empty data dir would start a second cluster instead of joining this one.
			if changed(fs, "peers") || changed(fs, "peer_rpc_addresses") {
				return s, usagef("master: --join and --peers (or --peer_rpc_addresses) exclude each other: a joining master is added by the leader with `mooncake master add`")
			}
			s.Join = true
		} else {
			peers, err := parsePeers(f.peers, s.ID, s.RaftAddress)
			if err != nil {
				return s, err
			}
			if err := addPeerRPC(peers, f.peerRPC, s.ID, s.RPCAddress); err != nil {
				return s, err
			}
			s.Peers = peers
		}
	}
	if err := validateClusterID(s.ClusterID); err != nil {
		return s, err
	}
	switch {
	case s.ClientTTL <= 0:
		return s, fmt.Errorf("%w: --client_ttl must be positive", base.ErrInvalidParams)
	case s.WorkerRestartGrace < 0:
		return s, fmt.Errorf("%w: --worker_restart_grace must not be negative", base.ErrInvalidParams)
	case s.ClientDisconnectGrace <= 0:
		return s, fmt.Errorf("%w: --client_disconnect_grace must be positive", base.ErrInvalidParams)
	case s.PutTimeout < 0:
		return s, fmt.Errorf("%w: --put_timeout must not be negative", base.ErrInvalidParams)
	case !(s.EvictionHighWatermarkRatio > 0 && s.EvictionHighWatermarkRatio <= 1):
		return s, fmt.Errorf("%w: --eviction_high_watermark_ratio must be in (0, 1], got %v", base.ErrInvalidParams, s.EvictionHighWatermarkRatio)
	case !(s.EvictionRatio > 0 && s.EvictionRatio < 1):
		return s, fmt.Errorf("%w: --eviction_ratio must be in (0, 1), got %v", base.ErrInvalidParams, s.EvictionRatio)
	case s.MaxValueSize < 0:
		return s, fmt.Errorf("%w: --max_value_size must not be negative", base.ErrInvalidParams)
	}
	return s, nil
}

// parsePeers parses "m1=host:7001,m2=host:7002". An empty list means this master alone. The
// list must contain this master with its own raft address.
func parsePeers(s, self, selfRaft string) ([]peer, error) {
	if strings.TrimSpace(s) == "" {
		return []peer{{ID: self, RaftAddr: selfRaft}}, nil
	}
	var out []peer
	seen := map[string]bool{}
	found := false
	for _, item := range strings.Split(s, ",") {
		item = strings.TrimSpace(item)
		id, addr, ok := strings.Cut(item, "=")
		if !ok || id == "" || addr == "" {
			return nil, fmt.Errorf("%w: --peers entry %q: want id=host:port", base.ErrInvalidParams, item)
		}
		if err := validateMasterID(id); err != nil {
			return nil, fmt.Errorf("--peers: %w", err)
		}
		if err := checkHostPort(addr, true); err != nil {
			return nil, fmt.Errorf("--peers entry %q: %w", item, err)
		}
		if seen[id] {
			return nil, fmt.Errorf("%w: --peers names %q twice", base.ErrInvalidParams, id)
		}
		seen[id] = true
		if id == self {
			if addr != selfRaft {
				return nil, fmt.Errorf("%w: --peers gives %s the raft address %s but --raft_address is %s", base.ErrInvalidParams, id, addr, selfRaft)
			}
			found = true
		}
		out = append(out, peer{ID: id, RaftAddr: addr})
	}
	if !found {
		return nil, fmt.Errorf("%w: --peers does not list this master (--id %s)", base.ErrInvalidParams, self)
	}
	return out, nil
}

// addPeerRPC sets the RPC address of the peers listed in --peer_rpc_addresses
// ("m1=host:port,..."); this master's must equal its own RPC address.
func addPeerRPC(peers []peer, s, self, selfRPC string) error {
	if strings.TrimSpace(s) == "" {
		return nil
	}
	for _, item := range strings.Split(s, ",") {
		item = strings.TrimSpace(item)
		id, addr, ok := strings.Cut(item, "=")
		if !ok {
			return fmt.Errorf("%w: --peer_rpc_addresses entry %q: want id=host:port", base.ErrInvalidParams, item)
		}
		if err := checkHostPort(addr, true); err != nil {
			return fmt.Errorf("--peer_rpc_addresses entry %q: %w", item, err)
		}
		i := slices.IndexFunc(peers, func(p peer) bool { return p.ID == id })
		switch {
		case i < 0:
			return fmt.Errorf("%w: --peer_rpc_addresses names %q, which --peers does not list", base.ErrInvalidParams, id)
		case peers[i].RPCAddr != "":
			return fmt.Errorf("%w: --peer_rpc_addresses names %q twice", base.ErrInvalidParams, id)
		case id == self && addr != selfRPC:
			return fmt.Errorf("%w: --peer_rpc_addresses gives %s the address %s but --rpc_address is %s", base.ErrInvalidParams, id, addr, selfRPC)
		}
		peers[i].RPCAddr = addr
	}
	return nil
}

// workerFlags are the flags of `mooncake worker` (and the worker half of standalone).
type workerFlags struct {
	workerID, masters, address, rootFSDir, persistence, clusterID, protocol, hugePages, localHostname string
	metricsPort                                                                                       int
	segmentSize, ssdCapacity                                                                          base.Bytes
	prefetchBudget                                                                                    base.Bytes
	shutdownTimeout                                                                                   time.Duration
	warmUp, sharedMemory, prefaultArena, tcpSendfile                                                  bool
	conns                                                                                             connFlags
	populateArena                                                                                     bool
	// dramOnly (standalone only): no NVMe tier, objects are lost on a restart.
	dramOnly bool
	// defaultRoot is the root_fs_dir when neither a flag nor the file names one: standalone's
	// <data_dir>/nvme unless --dram_only, "" (DRAM only) for `mooncake worker`.
	defaultRoot string
}

func (f *workerFlags) register(fs *pflag.FlagSet, standalone bool) {
	f.segmentSize = defaultSegmentSize
	fs.Var(&f.segmentSize, "global_segment_size", "DRAM this worker contributes, e.g. 256MiB or 4GB (default 1GiB)")
	fs.StringVar(&f.rootFSDir, "root_fs_dir", "", "directory of the NVMe tier; objects persist under <root_fs_dir>/<cluster_id>/<worker_id> (default: DRAM only)")
	fs.StringVar(&f.persistence, "persistence", "", "cache, spill or durable (default: spill with --root_fs_dir, else cache)")
	fs.Var(&f.ssdCapacity, "ssd_capacity", "bytes the NVMe tier may use (default 90% of the free disk)")
	fs.StringVar(&f.hugePages, "huge_pages", "auto", "DRAM arena pages: auto (hugetlb, else THP, else plain), off, or require")
	fs.BoolVar(&f.prefaultArena, "prefault_arena", false, "fault in the whole DRAM arena at start: puts never wait for first-touch page faults, but RSS is global_segment_size from the start and start takes ~0.3-1 s per GiB")
	fs.BoolVar(&f.populateArena, "populate_arena", true, "fault in the DRAM arena in the background after start, at low priority and ahead of the allocator, so puts seldom wait for first-touch page faults while start stays fast (RSS grows to global_segment_size within seconds per GiB); --prefault_arena does it before start instead")
	fs.BoolVar(&f.tcpSendfile, "tcp_sendfile", false, "send the DRAM bytes of TCP reads to checksum-verifying clients with sendfile from the shared arena (by reference) instead of copying them; off by default: it cost more worker CPU than the copy where measured (docs/benchmarks.md)")
	fs.DurationVar(&f.shutdownTimeout, "shutdown_timeout", defaultShutdownTimeout, "on SIGTERM, time allowed to spill DRAM to the NVMe tier before exit")
	f.prefetchBudget = worker.DefaultPrefetchBudget
	fs.Var(&f.prefetchBudget, "prefetch_budget", "bytes of prefetches (is_exist with prefetch_to_memory: promote NVMe objects to DRAM) in flight at once; more are dropped and counted; 0 turns prefetch off")
	fs.BoolVar(&f.warmUp, "warm_up", false, "with --root_fs_dir: at start, copy objects found on NVMe back into DRAM (in the background)")
	f.conns.register(fs)
	fs.BoolVar(&f.sharedMemory, "shared_memory", true, "let clients on this host (same uid, or root) map the DRAM arena read-only and copy objects out of it instead of reading over TCP, and put through a staging area this worker copies from")
	if standalone {
		fs.StringVar(&f.address, "worker_address", "", "worker data address host:port (default: a free port on 127.0.0.1)")
		fs.BoolVar(&f.dramOnly, "dram_only", false, "no NVMe tier: objects live in DRAM only and are lost on a restart (default: an NVMe tier under <data_dir>/nvme, capped at 25% of the free disk)")
		return
	}
	fs.StringVar(&f.masters, "master_server_address", "", "the masters, host:port,host:port (default $"+envMaster+", else the config file's, else "+client.DefaultMasterAddress+")")
	fs.StringVar(&f.address, "worker_address", "", "worker data address host:port (default <local_hostname>:12300)")
	fs.StringVar(&f.workerID, "worker_id", "", "worker id, stable across restarts (default: derived from --worker_address, kept under --root_fs_dir)")
	fs.IntVar(&f.metricsPort, "metrics_port", 0, "HTTP port of /metrics, /health and /api/v1/status (0: a free port)")
	fs.StringVar(&f.clusterID, "cluster_id", "", "cluster id (default: the config file's, else "+base.DefaultClusterID+")")
	fs.StringVar(&f.protocol, "protocol", "", "transport: tcp; Mooncake's rdma and others run over tcp with a warning (default: the config file's, else tcp)")
	fs.StringVar(&f.localHostname, "local_hostname", "", "host to bind and advertise (default: the config file's, else 127.0.0.1)")
}

// prefetchBudget maps --prefetch_budget to WorkerConfig.PrefetchBudget: 0 (off) is -1 there,
// where 0 means the default.
func prefetchBudget(b base.Bytes) int64 {
	if b == 0 {
		return -1
	}
	return int64(b)
}

func (f *workerFlags) resolve(fs *pflag.FlagSet, fc *fileConfig, standalone bool) (workerSettings, error) {
	s := workerSettings{
		WorkerID:          base.WorkerID(f.workerID),
		GlobalSegmentSize: int64(f.segmentSize),
		RootFSDir:         pick(fs, "root_fs_dir", f.rootFSDir, fc.RootFSDir, f.defaultRoot),
		rootFromUser:      changed(fs, "root_fs_dir") || fc.RootFSDir != "",
		SSDCapacity:       int64(f.ssdCapacity),
		ShutdownTimeout:   f.shutdownTimeout,
		WarmUp:            f.warmUp,
		PrefetchBudget:    prefetchBudget(f.prefetchBudget),
		PrivateArena:      !f.sharedMemory,
		Protocol:          tcpOnly(fc, "protocol", pick(fs, "protocol", f.protocol, fc.Protocol, "tcp")),
		ClusterID:         pick(fs, "cluster_id", f.clusterID, fc.ClusterID, base.DefaultClusterID),
	}
	if !changed(fs, "global_segment_size") && fc.GlobalSegmentSize != nil {
		s.GlobalSegmentSize = int64(*fc.GlobalSegmentSize)
	}
	host := pick(fs, "local_hostname", f.localHostname, fc.LocalHostname, "127.0.0.1")
	s.Address = f.address
	if s.Address == "" {
		port := defaultWorkerPort
		if standalone {
			port = 0
		}
		s.Address = net.JoinHostPort(host, strconv.Itoa(port))
	}
	if err := checkHostPort(s.Address, false); err != nil {
		return s, fmt.Errorf("--worker_address: %w", err)
	}
	addrHost, _, _ := net.SplitHostPort(s.Address)
	if !standalone {
		if err := checkPort("--metrics_port", f.metricsPort, true); err != nil {
			return s, err
		}
		s.MetricsAddress = net.JoinHostPort(addrHost, strconv.Itoa(f.metricsPort))
		switch {
		case changed(fs, "master_server_address"):
			m, err := parseAddressList(f.masters)
			if err != nil {
				return s, fmt.Errorf("--master_server_address: %w", err)
			}
			s.MasterAddresses = m
		case len(fc.envMasters) > 0:
			s.MasterAddresses = fc.envMasters
		case len(fc.MasterServerAddress) > 0:
			s.MasterAddresses = fc.MasterServerAddress
		default:
			s.MasterAddresses = []string{client.DefaultMasterAddress}
		}
	} else {
		s.WorkerID = defaultStandaloneWorker
	}
	// Without --worker_id the server derives one from the address and, with root_fs_dir,
	// persists it there, so a restart finds its NVMe directory again.
	if s.WorkerID != "" {
		if err := base.ValidateWorkerID(s.WorkerID); err != nil {
			return s, fmt.Errorf("--worker_id: %w", err)
		}
	}
	if err := validateClusterID(s.ClusterID); err != nil {
		return s, err
	}
	p, err := base.ParsePersistence(f.persistence)
	if err != nil {
		return s, fmt.Errorf("--persistence: %w", err)
	}
	s.Persistence = p
	needRoot := "--root_fs_dir (the NVMe tier)"
	if standalone {
		needRoot = "the NVMe tier (standalone has one unless --dram_only)"
	}
	switch {
	case f.dramOnly && s.rootFromUser:
		return s, usagef("--dram_only and root_fs_dir both given: choose DRAM only or an NVMe tier")
	case s.GlobalSegmentSize <= 0:
		return s, fmt.Errorf("%w: --global_segment_size must be positive", base.ErrInvalidParams)
	case s.SSDCapacity < 0:
		return s, fmt.Errorf("%w: --ssd_capacity must not be negative", base.ErrInvalidParams)
	case s.RootFSDir == "" && (p == base.PersistenceSpill || p == base.PersistenceDurable):
		return s, usagef("--persistence %s needs %s", p, needRoot)
	case s.RootFSDir == "" && changed(fs, "ssd_capacity"):
		return s, usagef("--ssd_capacity needs %s", needRoot)
	case s.RootFSDir == "" && s.WarmUp:
		return s, usagef("--warm_up needs %s", needRoot)
	case s.ShutdownTimeout <= 0:
		return s, fmt.Errorf("%w: --shutdown_timeout must be positive", base.ErrInvalidParams)
	}
	if s.Conns, err = f.conns.resolve(); err != nil {
		return s, err
	}
	hp, err := dram.ParseHugePages(f.hugePages)
	if err != nil {
		return s, fmt.Errorf("--huge_pages: %w", err)
	}
	s.HugePages = hp
	s.PrefaultArena = f.prefaultArena
	s.PopulateArena = f.populateArena
	s.TCPSendfile = f.tcpSendfile
	if s.RootFSDir != "" {
		abs, err := filepath.Abs(s.RootFSDir)
		if err != nil {
			return s, fmt.Errorf("--root_fs_dir: %w", err)
		}
		s.RootFSDir = abs
	}
	if s.RootFSDir != "" && !s.rootFromUser && f.defaultRoot != "" && !changed(fs, "ssd_capacity") {
		if s.SSDCapacity, err = standaloneNVMeDefault(s.RootFSDir); err != nil {
			return s, err
		}
	}
	return s, nil
}

// pick returns the flag's value when given on the command line, else the file's, else def.
func pick(fs *pflag.FlagSet, name, flagVal, fileVal, def string) string {
	switch {
	case changed(fs, name):
		return flagVal
	case fileVal != "":
		return fileVal
	case flagVal != "":
		return flagVal
	}
	return def
}

func checkPort(name string, p int, zeroOK bool) error {
	if p < 0 || p > 65535 || (!zeroOK && p == 0) {
		return fmt.Errorf("%w: %s %d is not a port", base.ErrInvalidParams, name, p)
	}
	return nil
}

// fileNotices logs what the config file holds that this build accepts but does not use: at
// info level for servers (once at start), at debug level for client commands (whose stderr
// a user reads).
func (e *env) fileNotices(cmd string) {
	fc, log := e.file, e.logger()
	if fc == nil {
		return
	}
	if fc.path == "" {
		e.printNotices(cmd)
		return
	}
	level := slog.LevelInfo
	if cmd == "client" {
		level = slog.LevelDebug
	}
	ctx := context.Background()
	log.Log(ctx, level, "read config file", "path", fc.path, "command", cmd)
	if len(fc.MetadataServer) > 0 {
		log.Log(ctx, level, "config: metadata_server is ignored: the masters keep metadata with raft, no metadata server is needed")
	}
	if fc.DeviceName != "" && !fc.devicesWarned {
		log.Log(ctx, level, "config: device_name is ignored: it names an RDMA device and this build moves bytes over TCP", "device_name", fc.DeviceName)
	}
	if fc.LocalBufferSize != nil {
		log.Log(ctx, level, "config: local_buffer_size is ignored: the Go client reads into the caller's buffers", "local_buffer_size", fc.LocalBufferSize.String())
	}
	e.printNotices(cmd)
}

func newMasterCmd(e *env) *cobra.Command {
	var f masterFlags
	var mf mooncakeMasterFlags
	cmd := &cobra.Command{
		Use:   "master --id m1 --data_dir DIR --rpc_address HOST:PORT --raft_address HOST:PORT --peers m1=HOST:PORT,... | --join",
		Short: "Run one master (metadata replicated with raft); master add|remove|list change and show the masters",
		Long: `master runs one master. A new cluster: give every master the same --peers. A master added to a
running cluster (a replacement): start it with --join instead of --peers, then run
"mooncake master add" against the cluster. The subcommands add, remove and list are client
commands that change and show the masters of a running cluster.`,
		Args: exactArgs(0, "no arguments"),
		RunE: func(cmd *cobra.Command, _ []string) error {
			// Mooncake's master flags are accepted here too (compat.go); a master of this
			// command is always a raft member with an id (mooncake_master also runs alone).
			s, err := resolveMooncakeMaster(cmd.Flags(), &f, &mf, e, false)
			if err != nil {
				return err
			}
			e.fileNotices("master")
			return runMaster(cmd.Context(), e, s)
		},
	}
	f.register(cmd.Flags(), false)
	mf.register(cmd.Flags())
	addMasterCmds(cmd, e)
	return cmd
}

func newWorkerCmd(e *env) *cobra.Command {
	var f workerFlags
	cmd := &cobra.Command{
		Use:   "worker --master_server_address HOST:PORT,... --worker_address HOST:PORT --global_segment_size 256MiB",
		Short: "Run one worker (contributes DRAM and an optional NVMe tier)",
		Args:  exactArgs(0, "no arguments"),
		RunE: func(cmd *cobra.Command, _ []string) error {
			s, err := f.resolve(cmd.Flags(), e.file, false)
			if err != nil {
				return err
			}
			e.fileNotices("worker")
			s = inheritFromMaster(cmd.Context(), e, s)
			return runWorker(cmd.Context(), e, s)
		},
	}
	f.register(cmd.Flags(), false)
	addWorkerCmds(cmd, e)
	return cmd
}

func newStandaloneCmd(e *env) *cobra.Command {
	var mf masterFlags
	var wf workerFlags
	cmd := &cobra.Command{
		Use:   "standalone",
		Short: "Run one master and one worker in one process, data under ./mooncake-data (metadata, and an NVMe tier that keeps objects across restarts)",
		Args:  exactArgs(0, "no arguments"),
		RunE: func(cmd *cobra.Command, _ []string) error {
			ms, err := mf.resolve(cmd.Flags(), e.file, true)
			if err != nil {
				return err
			}
			// The shared flags (--cluster_id, --local_hostname) are bound to the master half.
			wf.clusterID, wf.localHostname = mf.clusterID, mf.localHostname
			if !wf.dramOnly {
				wf.defaultRoot = filepath.Join(ms.DataDir, standaloneNVMeSubdir)
			}
			ws, err := wf.resolve(cmd.Flags(), e.file, true)
			if err != nil {
				return err
			}
			ws.ClusterID = ms.ClusterID
			ws.MasterAddresses = []string{ms.RPCAddress}
			ms.Conns = ws.Conns
			ws.HighWatermark, ws.LowWatermark = watermarks(ms.EvictionHighWatermarkRatio, ms.EvictionRatio)
			e.fileNotices("standalone")
			return runStandalone(cmd.Context(), e, ms, ws)
		},
	}
	mf.register(cmd.Flags(), true)
	wf.register(cmd.Flags(), true)
	return cmd
}

// shutdownCtx gives a server its SIGTERM budget, detached from the cancelled run context.
func shutdownCtx(d time.Duration) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), d)
}
