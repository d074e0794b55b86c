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
	"github.com/mooncake-go/mooncake/server/config"
	"github.com/mooncake-go/mooncake/server/master"
	"github.com/mooncake-go/mooncake/server/rpcsrv"
)

// Defaults that the table (server/config) declares and the commands compose with.
var (
	// defaultStandaloneDir is standalone's --data_dir, and a lone mooncake_master's.
	defaultStandaloneDir = config.Lookup(config.KindStandalone, "data_dir").Default.(string)
	// defaultStandaloneWorker is standalone's worker id.
	defaultStandaloneWorker = config.WorkerDefaults.StandaloneWorkerID
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
	// flags are the table's settings as the flags gave them: what the fields above do not
	// compose reaches master.Config by name (config.Pass).
	flags config.Master
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
	// flags are the table's settings as the flags gave them: what the fields above do not
	// compose reaches worker.Config by name (config.Pass).
	flags config.Worker
}

// masterFlags are the flags of `mooncake master` and mooncake_master (Mooncake's flags
// included), or of the master half of standalone: the table's master settings, registered,
// defaulted and checked by package config.
type masterFlags struct {
	config.Master
}

// masterKind is the table's process kind of a master's flags.
func masterKind(standalone bool) config.Kind {
	if standalone {
		return config.KindStandalone
	}
	return config.KindMaster
}

func (f *masterFlags) register(fs *pflag.FlagSet, standalone bool) {
	config.Register(fs, masterKind(standalone), &f.Master, nil)
}

// resolve builds the master settings; standalone masters are a single voter on local_hostname.
func (f *masterFlags) resolve(fs *pflag.FlagSet, fc *fileConfig, standalone bool) (masterSettings, error) {
	host := pick(fs, "local_hostname", f.LocalHostname, fc.LocalHostname, "127.0.0.1")
	s := masterSettings{
		ID:                         f.ID,
		DataDir:                    f.DataDir,
		RPCAddress:                 f.RPCAddress,
		RaftAddress:                f.RaftAddress,
		ClusterID:                  pick(fs, "cluster_id", f.ClusterID, fc.ClusterID, base.DefaultClusterID),
		ClientTTL:                  f.ClientTTL,
		WorkerRestartGrace:         f.WorkerRestartGrace,
		ClientDisconnectGrace:      f.ClientDisconnectGrace,
		PutTimeout:                 f.PutTimeout,
		EvictionHighWatermarkRatio: f.EvictionHighWatermarkRatio,
		EvictionRatio:              f.EvictionRatio,
		MaxValueSize:               int64(f.MaxValueSize),
		RaftNoSync:                 !f.RaftFsync,
		flags:                      f.Master,
	}
	if err := config.Validate(masterKind(standalone), &f.Master, nil); err != nil {
		return s, err
	}
	var err error
	if s.KVEvents, err = kvEventsConfig(f.KVEvents); err != nil {
		return s, err
	}
	if !standalone {
		// Standalone's master takes the worker's connection limits.
		if s.Conns, err = connLimits(f.Conns); err != nil {
			return s, err
		}
	}
	if s.RPCAddress == "" {
		s.RPCAddress = net.JoinHostPort(host, strconv.Itoa(f.RPCPort))
	} else if bareHost(s.RPCAddress) {
		// Mooncake's --rpc_address is a host; the port is --rpc_port (or --port).
		s.RPCAddress = net.JoinHostPort(strings.Trim(s.RPCAddress, "[]"), strconv.Itoa(f.RPCPort))
	}
	if err := checkHostPort(s.RPCAddress, false); err != nil {
		return s, fmt.Errorf("--rpc_address: %w", err)
	}
	rpcHost, _, _ := net.SplitHostPort(s.RPCAddress)
	s.MetricsAddress = net.JoinHostPort(rpcHost, strconv.Itoa(f.MetricsPort))
	if standalone {
		s.ID = config.MasterDefaults.MasterID
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
		if f.Join {
			// A joining master must not bootstrap: with --peers (even naming only itself) an
			// empty data dir would start a second cluster instead of joining this one.
			if changed(fs, "peers") || changed(fs, "peer_rpc_addresses") {
				return s, usagef("master: --join and --peers (or --peer_rpc_addresses) exclude each other: a joining master is added by the leader with `mooncake master add`")
			}
			s.Join = true
		} else {
			peers, err := parsePeers(f.Peers, s.ID, s.RaftAddress)
			if err != nil {
				return s, err
			}
			if err := addPeerRPC(peers, f.PeerRPCAddresses, s.ID, s.RPCAddress); err != nil {
				return s, err
			}
			s.Peers = peers
		}
	}
	if err := validateClusterID(s.ClusterID); err != nil {
		return s, err
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

// workerFlags are the flags of `mooncake worker` and mooncake_client, or of the worker half
// of standalone: the table's worker settings, registered, defaulted and checked by package
// config.
type workerFlags struct {
	config.Worker
	// defaultRoot is the root_fs_dir when neither a flag nor the file names one: standalone's
	// <data_dir>/nvme unless --dram_only, "" (DRAM only) for `mooncake worker`.
	defaultRoot string
}

// workerKind is the table's process kind of a worker's flags.
func workerKind(standalone bool) config.Kind {
	if standalone {
		return config.KindStandalone
	}
	return config.KindWorker
}

func (f *workerFlags) register(fs *pflag.FlagSet, standalone bool) {
	config.Register(fs, workerKind(standalone), nil, &f.Worker)
}

// prefetchBudget maps --prefetch_budget to WorkerConfig.PrefetchBudget: 0 (off) is -1 there,
// where 0 means the default.
func prefetchBudget(b base.Bytes) int64 {
	if b == 0 {
		return -1
	}
	return int64(b)
}

// resolve builds the worker settings from the flags, the file (fc) and the defaults, in named
// steps: addresses, ids, the tier (persistence against root_fs_dir), the DRAM arena, and the
// root directory. Each step fills s in place, so on an error s holds what the steps before
// it settled.
func (f *workerFlags) resolve(fs *pflag.FlagSet, fc *fileConfig, standalone bool) (workerSettings, error) {
	s := workerSettings{
		WorkerID:          base.WorkerID(f.WorkerID),
		GlobalSegmentSize: int64(f.GlobalSegmentSize),
		RootFSDir:         pick(fs, "root_fs_dir", f.RootFSDir, fc.RootFSDir, f.defaultRoot),
		rootFromUser:      changed(fs, "root_fs_dir") || fc.RootFSDir != "",
		SSDCapacity:       int64(f.SSDCapacity),
		ShutdownTimeout:   f.ShutdownTimeout,
		WarmUp:            f.WarmUp,
		PrefetchBudget:    prefetchBudget(f.PrefetchBudget),
		PrivateArena:      !f.SharedMemory,
		Protocol:          tcpOnly(fc, "protocol", pick(fs, "protocol", f.Protocol, fc.Protocol, rpcsrv.DefaultProtocol)),
		ClusterID:         pick(fs, "cluster_id", f.ClusterID, fc.ClusterID, base.DefaultClusterID),
		flags:             f.Worker,
	}
	if err := config.Validate(workerKind(standalone), nil, &f.Worker); err != nil {
		return s, err
	}
	if !changed(fs, "global_segment_size") && fc.GlobalSegmentSize != nil {
		s.GlobalSegmentSize = int64(*fc.GlobalSegmentSize)
	}
	if err := f.resolveAddresses(&s, fs, fc, standalone); err != nil {
		return s, err
	}
	if err := checkWorkerIDs(&s); err != nil {
		return s, err
	}
	if err := f.resolveTier(&s, fs, standalone); err != nil {
		return s, err
	}
	if err := f.resolveArena(&s); err != nil {
		return s, err
	}
	// NB: not `return s, f.resolveRoot(&s, fs)`: Go leaves unspecified whether s is read
	// before or after the call.
	err := f.resolveRoot(&s, fs)
	return s, err
}

// resolveAddresses sets the worker's address (standalone's listens on port 0) and, outside
// standalone, its metrics address and the masters' addresses (flag, then the environment,
// then the file, then the default); standalone's worker takes the standalone worker id.
func (f *workerFlags) resolveAddresses(s *workerSettings, fs *pflag.FlagSet, fc *fileConfig, standalone bool) error {
	host := pick(fs, "local_hostname", f.LocalHostname, fc.LocalHostname, "127.0.0.1")
	s.Address = f.WorkerAddress
	if s.Address == "" {
		port := config.WorkerDefaults.WorkerPort
		if standalone {
			port = 0
		}
		s.Address = net.JoinHostPort(host, strconv.Itoa(port))
	}
	if err := checkHostPort(s.Address, false); err != nil {
		return fmt.Errorf("--worker_address: %w", err)
	}
	if standalone {
		s.WorkerID = base.WorkerID(defaultStandaloneWorker)
		return nil
	}
	addrHost, _, _ := net.SplitHostPort(s.Address)
	s.MetricsAddress = net.JoinHostPort(addrHost, strconv.Itoa(f.MetricsPort))
	switch {
	case changed(fs, "master_server_address"):
		m, err := parseAddressList(f.MasterServerAddress)
		if err != nil {
			return fmt.Errorf("--master_server_address: %w", err)
		}
		s.MasterAddresses = m
	case len(fc.EnvMasters) > 0:
		s.MasterAddresses = fc.EnvMasters
	case len(fc.MasterServerAddress) > 0:
		s.MasterAddresses = fc.MasterServerAddress
	default:
		s.MasterAddresses = []string{client.DefaultMasterAddress}
	}
	return nil
}

// checkWorkerIDs validates the worker id, when one is set, and the cluster id.
func checkWorkerIDs(s *workerSettings) error {
	// Without --worker_id the server derives one from the address and, with root_fs_dir,
	// persists it there, so a restart finds its NVMe directory again.
	if s.WorkerID != "" {
		if err := base.ValidateWorkerID(s.WorkerID); err != nil {
			return fmt.Errorf("--worker_id: %w", err)
		}
	}
	return validateClusterID(s.ClusterID)
}

// resolveTier sets the persistence and refuses what needs an NVMe tier without one (and an
// NVMe tier with --dram_only).
func (f *workerFlags) resolveTier(s *workerSettings, fs *pflag.FlagSet, standalone bool) error {
	p, err := base.ParsePersistence(f.Persistence)
	if err != nil {
		return fmt.Errorf("--persistence: %w", err)
	}
	s.Persistence = p
	needRoot := "--root_fs_dir (the NVMe tier)"
	if standalone {
		needRoot = "the NVMe tier (standalone has one unless --dram_only)"
	}
	switch {
	case f.DRAMOnly && s.rootFromUser:
		return usagef("--dram_only and root_fs_dir both given: choose DRAM only or an NVMe tier")
	case s.RootFSDir == "" && (p == base.PersistenceSpill || p == base.PersistenceDurable):
		return usagef("--persistence %s needs %s", p, needRoot)
	case s.RootFSDir == "" && changed(fs, "ssd_capacity"):
		return usagef("--ssd_capacity needs %s", needRoot)
	case s.RootFSDir == "" && s.WarmUp:
		return usagef("--warm_up needs %s", needRoot)
	}
	return nil
}

// resolveArena sets the connection limits and how the DRAM arena is mapped and served.
func (f *workerFlags) resolveArena(s *workerSettings) error {
	var err error
	if s.Conns, err = connLimits(f.Conns); err != nil {
		return err
	}
	hp, err := dram.ParseHugePages(f.HugePages)
	if err != nil {
		return fmt.Errorf("--huge_pages: %w", err)
	}
	s.HugePages = hp
	s.PrefaultArena = f.PrefaultArena
	s.PopulateArena = f.PopulateArena
	s.TCPSendfile = f.TCPSendfile
	return nil
}

// resolveRoot makes root_fs_dir absolute and, for standalone's default NVMe directory (no
// root_fs_dir nor --ssd_capacity given), sizes the tier from the disk under it.
func (f *workerFlags) resolveRoot(s *workerSettings, fs *pflag.FlagSet) error {
	if s.RootFSDir != "" {
		abs, err := filepath.Abs(s.RootFSDir)
		if err != nil {
			return fmt.Errorf("--root_fs_dir: %w", err)
		}
		s.RootFSDir = abs
	}
	if s.RootFSDir != "" && !s.rootFromUser && f.defaultRoot != "" && !changed(fs, "ssd_capacity") {
		var err error
		if s.SSDCapacity, err = standaloneNVMeDefault(s.RootFSDir); err != nil {
			return err
		}
	}
	return nil
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
			s, err := resolveMooncakeMaster(cmd.Flags(), &f, e, false)
			if err != nil {
				return err
			}
			e.fileNotices("master")
			return runMaster(cmd.Context(), e, s)
		},
	}
	f.register(cmd.Flags(), false)
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
			wf.ClusterID, wf.LocalHostname = mf.ClusterID, mf.LocalHostname
			if !wf.DRAMOnly {
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
	// The worker registers first: the flags both halves take (the connection limits) are
	// bound to it.
	wf.register(cmd.Flags(), true)
	mf.register(cmd.Flags(), true)
	return cmd
}

// shutdownCtx gives a server its SIGTERM budget, detached from the cancelled run context.
func shutdownCtx(d time.Duration) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), d)
}
