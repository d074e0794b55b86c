package config

import (
	"strconv"
	"time"

	"github.com/mooncake-go/mooncake/internal/base"
	"github.com/mooncake-go/mooncake/transfer"
)

// Values more than one setting starts from, each written once.
const (
	// rpcPort is the master's client RPC port (--rpc_port, and Mooncake's --port).
	rpcPort = 50051
	// putTimeout bounds a put between PutStart and PutEnd; the worker drops bytes written
	// but never committed after as long. 60 s leaves room for a multi-GiB value over a slow
	// link; a stuck client holds arena bytes at most this long.
	putTimeout = 60 * time.Second
	// metadataHost and metadataPort are where Mooncake's HTTP metadata store listens
	// (mooncake_master --http_metadata_server_*, mooncake_http_metadata_server).
	metadataHost = "0.0.0.0"
	metadataPort = 8080
	// workerPort is a worker's data port when --worker_address names none.
	workerPort = 12300
	// standaloneDir is standalone's data directory, and a lone mooncake_master's.
	standaloneDir = "./mooncake-data"
)

// Reasons shared by several of Mooncake's flags without effect here.
const (
	whyThreads = "the RPC server serves each connection on its own goroutine, over every core"
	whyHA      = "masters replicate their metadata with raft: run three with --id, --raft_address and --peers, no etcd/redis/k8s"
	whyNoLease = "there are no leases: a worker pins an object only while it sends it, so eviction never waits on a lease"
	whySnap    = "the metadata is a raft log with raft snapshots under --data_dir, restored at every start"
	whyTasks   = "there is no task manager: repair and drain copies run on the leader (docs/operations.md)"
	whyCXL     = "CXL memory is not supported"
	whyOffload = "each worker spills to and promotes from its own NVMe tier under root_fs_dir"
	whyLog     = "logs go to stderr; use --log_level or -v"
	whyTCP     = "this build moves bytes over TCP"
)

// Kind sets used below.
const (
	master     = KindMaster
	masterAll  = KindMaster | KindStandalone
	worker     = KindWorker
	workerAll  = KindWorker | KindStandalone
	standalone = KindStandalone
	mcClient   = KindMooncakeClient
	glog       = KindMaster | KindMooncakeClient
	api        = KindAPI
	file       = KindFile
	embedded   = KindEmbedded
)

// mm is Mooncake's mooncake_master flag; mc its mooncake_client flag; mg glog's (both).
func mm(typ, def, ours, why string) *Mooncake {
	return &Mooncake{Bins: []string{BinMaster}, Type: typ, Default: def, Ours: ours, Why: why}
}
func mc(typ, def, ours, why string) *Mooncake {
	return &Mooncake{Bins: []string{BinClient}, Type: typ, Default: def, Ours: ours, Why: why}
}
func mg(typ, def, ours, why string) *Mooncake {
	return &Mooncake{Bins: []string{BinMaster, BinClient}, Type: typ, Default: def, Ours: ours, Why: why}
}

// noEffect declares a Mooncake flag accepted with no effect here (Mooncake.Why says why).
func noEffect(kinds Kind, name string, m *Mooncake) Setting {
	return Setting{Name: name, Kinds: kinds, Mooncake: m}
}

// fileKey declares a key of Mooncake's client config accepted with no effect here.
func fileKey(key, why string) Setting {
	return Setting{Name: key, Kinds: KindFile, JSON: key, Status: why}
}

// envVars declares MOONCAKE_* variables accepted with no effect here.
func envVars(why string, names ...string) Setting {
	return Setting{Name: names[0], Kinds: KindFile, Env: names, Status: why}
}

// table is every setting, declared once. Order: the master's, the worker's, the Go API's,
// then Mooncake's flags without effect (master, client, glog).
var table = []Setting{
	// The master: `mooncake master` (+ mooncake_master), and standalone's master half.
	{Name: "id", Kinds: master, Default: "", Help: "this master's id, one of --peers (required), e.g. m1",
		Master: func(m *Master) any { return &m.ID }},
	{Name: "rpc_address", Kinds: master, Default: "", Help: "client RPC address host:port (default <local_hostname>:<rpc_port>)",
		Mooncake: mm("string", "0.0.0.0", "", "the host the RPC port binds; a lone mooncake_master binds every interface, as Mooncake's"),
		Master:   func(m *Master) any { return &m.RPCAddress }},
	{Name: "raft_address", Kinds: master, Default: "", Help: "raft address host:port of this master (required)",
		Master: func(m *Master) any { return &m.RaftAddress }},
	{Name: "peers", Kinds: master, Default: "", Help: "the initial masters, id=raft_host:port,... (default: this master alone)",
		Master: func(m *Master) any { return &m.Peers }},
	{Name: "peer_rpc_addresses", Kinds: master, Default: "", Help: "optional: the masters' client RPC addresses, id=host:port,... (followers register their own address with the leader, so this is rarely needed)",
		Master: func(m *Master) any { return &m.PeerRPCAddresses }},
	{Name: "data_dir", Kinds: master, Default: "", Help: "directory of the raft log, stable store and snapshots (required)",
		Master: func(m *Master) any { return &m.DataDir }},
	{Name: "data_dir", Kinds: standalone, Default: standaloneDir, Help: "directory of the metadata (raft log and snapshots)",
		Master: func(m *Master) any { return &m.DataDir }},
	{Name: "join", Kinds: master, Default: false, Help: "start without bootstrapping a cluster and wait to be added with `mooncake master add` (a new or replacement master; not with --peers)",
		Master: func(m *Master) any { return &m.Join }},
	{Name: "rpc_port", Kinds: masterAll, Unit: "port", Default: rpcPort, Check: port, Help: "client RPC port (used when --rpc_address is not given)",
		Mooncake: mm("int32", "0", "", "the client RPC port; 0 means --port, as in Mooncake (our default is 50051)"),
		Master:   func(m *Master) any { return &m.RPCPort }},
	{Name: "metrics_port", Kinds: masterAll, Unit: "port", Default: 9003, Check: portOrZero, Help: "HTTP port of /metrics, /health and /api/v1/status (0: a free port)",
		Mooncake: mm("int32", "9003", "", "the HTTP port of /metrics, /health and Mooncake's admin endpoints"),
		Master:   func(m *Master) any { return &m.MetricsPort }},
	{Name: "cluster_id", Kinds: masterAll, Default: "", Check: clusterID, Help: "cluster id; masters, workers and clients must agree (default " + base.DefaultClusterID + ")",
		Mooncake: mm("string", base.DefaultClusterID, "", "masters, workers and clients must agree; it names the NVMe directory"),
		Master:   func(m *Master) any { return &m.ClusterID }},
	{Name: "local_hostname", Kinds: masterAll | worker, Default: "", Help: "host to bind and advertise (default: the config file's, else 127.0.0.1)",
		Master: func(m *Master) any { return &m.LocalHostname }, Worker: func(w *Worker) any { return &w.LocalHostname }},
	{Name: "client_ttl", Kinds: masterAll, Unit: "s", Default: 10 * time.Second, Check: positive,
		// Ten missed heartbeats at heartbeat_interval; Mooncake's default too.
		Help:     "a worker silent this long is marked dead and its replicas dropped; a plain number is seconds, as in Mooncake",
		Mooncake: mm("int64", "10", "", "seconds a silent worker stays alive (Go durations such as 10s accepted too)"),
		Master:   func(m *Master) any { return &m.ClientTTL }},
	// Two minutes covers a spill of a large DRAM arena, the process restart and the reopening
	// of a large NVMe index (about 10 s for a million objects), with room to spare; it is
	// short enough that the replicas of a worker decommissioned rather than restarted are
	// dropped soon. During the grace lookups still list the worker: clients fail over to
	// other replicas, or get an error for objects held only there, until it is back.
	{Name: "worker_restart_grace", Kinds: masterAll, Default: 2 * time.Minute, Check: nonNegative,
		Help:   "a worker stopped with SIGTERM (which tells the leader it is restarting) keeps its replicas this long instead of client_ttl (0: no grace)",
		Master: func(m *Master) any { return &m.WorkerRestartGrace }},
	// 2 s covers a reconnect after a transient reset (the worker redials within 500 ms) and
	// is five times shorter than client_ttl, which still bounds a worker that hangs with its
	// connection open.
	{Name: "client_disconnect_grace", Kinds: masterAll, Unit: "s", Default: 2 * time.Second, Check: positive,
		Help:   "a worker whose connection to the leader closes (its process killed, its host gone) gets no new puts at once and is marked dead this long after unless it reconnects; client_ttl still bounds a worker that hangs; a plain number is seconds",
		Master: func(m *Master) any { return &m.ClientDisconnectGrace }},
	{Name: "put_timeout", Kinds: masterAll, Default: putTimeout, Check: nonNegative,
		Help:   "a put not ended within this time is dropped, and the workers drop its pending bytes",
		Master: func(m *Master) any { return &m.PutTimeout }},
	{Name: "eviction_high_watermark_ratio", Kinds: masterAll, Unit: "ratio", Default: 0.95, Check: ratioUpTo1,
		Help:     "DRAM fill ratio at which workers start evicting",
		Mooncake: mm("double", "0.95", "", "the DRAM fill at which workers evict; workers take it from the master"),
		Master:   func(m *Master) any { return &m.EvictionHighWatermarkRatio }},
	{Name: "eviction_ratio", Kinds: masterAll, Unit: "ratio", Default: 0.05, Check: ratioBelow1,
		Help:     "fraction of DRAM an eviction round frees",
		Mooncake: mm("double", "0.05", "", "the fraction of DRAM an eviction pass frees; workers take it from the master"),
		Master:   func(m *Master) any { return &m.EvictionRatio }},
	{Name: "default_tenant_quota_bytes", Kinds: masterAll, Unit: "bytes", Default: base.Bytes(0), Check: nonNegative,
		Help:     "DRAM quota of every tenant without its own, e.g. 64GB (0: none); seeds the default quota kept in raft when none was ever set, after which `mooncake tenant quota set _default` and PUT /tenants/quota/_default change it",
		Mooncake: mm("uint64", "0", "", "the default quota of tenants without their own; kept in raft: the flag seeds it when none was ever set"),
		Master:   func(m *Master) any { return &m.DefaultTenantQuotaBytes }},
	// 64 GiB: far above a KV-cache block and still a bound every length check can use.
	{Name: "max_value_size", Kinds: masterAll, Unit: "bytes", Default: base.Bytes(64 << 30), Check: nonNegative,
		Help:   "largest value a put may store, e.g. 4GiB",
		Master: func(m *Master) any { return &m.MaxValueSize }},
	{Name: "raft_fsync", Kinds: masterAll, Default: true,
		Help:   "fsync the raft log before acknowledging a write; false: faster small puts, and an acknowledged put survives master process crashes but not an OS crash or power loss of a quorum of master hosts at once",
		Master: func(m *Master) any { return &m.RaftFsync }},
	{Name: "summary_interval", Kinds: masterAll, Default: 10 * time.Second, Check: positive, Help: "how often the leader logs its \"Master Metrics:\" line (--enable_metric_reporting=false: never)",
		Master: func(m *Master) any { return &m.SummaryInterval }},
	{Name: "enable_kv_events", Kinds: masterAll, Default: false, Help: "publish KV events (object stored/removed/cleared) over ZMQ from the leader, in Mooncake's format (docs/operations.md)",
		Mooncake: mm("bool", "false", "", "the leader publishes KV events over ZMQ in Mooncake's format, numbered by a sequence that continues across leaders (docs/operations.md)"),
		Master:   func(m *Master) any { return &m.KVEvents.Enabled }},
	{Name: "kv_events_bind_endpoint", Kinds: masterAll, Default: "", Help: "the ZMQ PUB address each master binds, e.g. tcp://0.0.0.0:5557 (required with --enable_kv_events)",
		Mooncake: mm("string", "", "", "the ZMQ PUB address every master binds; only the leader sends"),
		Master:   func(m *Master) any { return &m.KVEvents.BindEndpoint }},
	{Name: "kv_events_backend_id", Kinds: masterAll, Default: "", Help: "the backend name written into every event (required with --enable_kv_events)",
		Mooncake: mm("string", "", "", "required with --enable_kv_events (an error at start, where Mooncake disables the publisher)"),
		Master:   func(m *Master) any { return &m.KVEvents.BackendID }},
	{Name: "kv_events_model_name", Kinds: masterAll, Default: "", Help: "the model written into events of objects whose put named none",
		Mooncake: mm("string", "", "", "the model of objects whose put named none (a put's model wins)"),
		Master:   func(m *Master) any { return &m.KVEvents.ModelName }},
	{Name: "kv_events_block_size", Kinds: masterAll, Default: uint32(0), Help: "tokens per block written into events (0 sends nil)",
		Mooncake: mm("uint32", "0", "", "written into events; 0 sends nil"),
		Master:   func(m *Master) any { return &m.KVEvents.BlockSize }},
	{Name: "kv_events_lora_name", Kinds: masterAll, Default: "", Help: "LoRA name written into events (empty sends nil)",
		Mooncake: mm("string", "", "", "written into events; empty sends nil"),
		Master:   func(m *Master) any { return &m.KVEvents.LoraName }},
	{Name: "kv_events_additional_salt", Kinds: masterAll, Default: "", Help: "salt written into events (empty sends nil)",
		Mooncake: mm("string", "", "", "written into events; empty sends nil"),
		Master:   func(m *Master) any { return &m.KVEvents.AdditionalSalt }},
	{Name: "kv_events_dp_rank", Kinds: masterAll, Default: uint32(0), Help: "data-parallel rank written into every event and batch",
		Mooncake: mm("uint32", "0", "", "written into every event and batch"),
		Master:   func(m *Master) any { return &m.KVEvents.DPRank }},
	{Name: "kv_events_emit_object_key", Kinds: masterAll, Default: true, Help: "add object_key to object events; false skips object events (as Mooncake does)",
		Mooncake: mm("bool", "true", "", "false skips object events, as in Mooncake"),
		Master:   func(m *Master) any { return &m.KVEvents.EmitObjectKey }},
	{Name: "kv_events_emit_legacy_compat", Kinds: masterAll, Default: true, Help: "add the legacy vLLM fields type, block_hashes and parent_block_hash",
		Mooncake: mm("bool", "true", "", "adds type, block_hashes and parent_block_hash"),
		Master:   func(m *Master) any { return &m.KVEvents.EmitLegacyCompat }},

	// mooncake_master's flags beyond ours that have an effect here (`mooncake master` takes
	// them too).
	{Name: "config_path", Kinds: master, Default: "", Help: "a master config file (JSON) with Mooncake's keys; flags given on the command line win",
		Mooncake: mm("string", "", "", "a JSON file of Mooncake's master keys (client_live_ttl_sec for client_ttl); flags given on the command line win"),
		Master:   func(m *Master) any { return &m.ConfigPath }},
	{Name: "port", Kinds: master, Unit: "port", Default: rpcPort, Check: port, Help: "Mooncake's name for --rpc_port",
		Mooncake: mm("int32", "50051", "--rpc_port", "the client RPC port; --rpc_port wins when both are set"),
		Master:   func(m *Master) any { return &m.Port }},
	{Name: "root_fs_dir", Kinds: master, Default: "", Help: "NVMe directory handed to workers that set none of their own",
		Mooncake: mm("string", "", "", "the NVMe directory handed to workers that set none"),
		Master:   func(m *Master) any { return &m.RootFSDir }},
	{Name: "metrics_host", Kinds: master, Default: "", Help: "host the metrics port binds (default: the RPC host)",
		Master: func(m *Master) any { return &m.MetricsHost }},
	{Name: "enable_metric_reporting", Kinds: master, Default: true, Help: "log the \"Master Metrics:\" line every 10 s",
		Mooncake: mm("bool", "true", "", "the \"Master Metrics:\" line every 10 s"),
		Master:   func(m *Master) any { return &m.EnableMetricReporting }},
	{Name: "enable_http_metadata_server", Kinds: master, Default: false, Help: "also serve Mooncake's HTTP metadata store (not needed by this build)",
		Mooncake: mm("bool", "false", "", "also serve Mooncake's HTTP metadata store (this build needs none)"),
		Master:   func(m *Master) any { return &m.EnableHTTPMetadataServer }},
	{Name: "http_metadata_server_port", Kinds: master, Unit: "port", Default: metadataPort, Help: "port of the HTTP metadata store",
		Mooncake: mm("int32", "8080", "", "its port"),
		Master:   func(m *Master) any { return &m.HTTPMetadataServerPort }},
	{Name: "http_metadata_server_host", Kinds: master, Default: metadataHost, Help: "host of the HTTP metadata store",
		Mooncake: mm("string", "0.0.0.0", "", "its host"),
		Master:   func(m *Master) any { return &m.HTTPMetadataServerHost }},
	{Name: "put_start_discard_timeout_sec", Kinds: master, Unit: "s", Default: 30 * time.Second, Check: positive, Help: "Mooncake's name for --put_timeout (seconds)",
		Mooncake: mm("uint64", "30", "--put_timeout", "seconds a put may take between PutStart and PutEnd (--put_timeout wins when both are set)"),
		Master:   func(m *Master) any { return &m.PutStartDiscardTimeout }},
	{Name: "rpc_interface", Kinds: master, Default: "", Help: "a network interface whose IPv4 address becomes --rpc_address (Mooncake's)",
		Mooncake: mm("string", "", "--rpc_address", "the IPv4 address of this network interface becomes --rpc_address"),
		Master:   func(m *Master) any { return &m.RPCInterface }},
	{Name: "rpc_conn_timeout_seconds", Kinds: master, Default: 0, Check: nonNegative, Help: "above 0: Mooncake's name for --conn_idle_timeout, in seconds (0: ours)",
		Mooncake: mm("int32", "0", "--conn_idle_timeout", "above 0, a client connection idle this many seconds is closed; 0 keeps ours (--conn_idle_timeout), which bounds idle connections where Mooncake keeps them forever"),
		Master:   func(m *Master) any { return &m.RPCConnTimeoutSeconds }},
	{Name: "v", Short: "v", Kinds: glog, Default: 0, Help: "glog verbosity: 1 or more logs at debug level",
		Mooncake: mg("int32", "0", "-v", "1 or more logs at debug level"),
		Master:   func(m *Master) any { return &m.Verbosity }, Worker: func(w *Worker) any { return &w.Verbosity }},

	// The connection limits of a server's RPC port: the master's (`mooncake master`), the
	// worker's, and standalone's two servers share the worker's.
	{Name: "conn_idle_timeout", Kinds: master | workerAll, Default: transfer.DefaultIdleTimeout, Check: connLimit,
		Help:   "close a client connection with no request for this long (at least 100ms; negative: never)",
		Master: func(m *Master) any { return &m.Conns.IdleTimeout }, Worker: func(w *Worker) any { return &w.Conns.IdleTimeout }},
	{Name: "conn_frame_timeout", Kinds: master | workerAll, Default: transfer.DefaultFrameTimeout, Check: connLimit,
		Help:   "close a client connection whose request stops arriving: each 64 KiB of it must arrive within this long (negative: never)",
		Master: func(m *Master) any { return &m.Conns.FrameTimeout }, Worker: func(w *Worker) any { return &w.Conns.FrameTimeout }},
	{Name: "max_conns_per_peer", Kinds: master | workerAll, Default: transfer.DefaultMaxConnsPerPeer, Check: connLimit,
		Help:   "most client connections open from one IP address (negative: no limit)",
		Master: func(m *Master) any { return &m.Conns.MaxConnsPerPeer }, Worker: func(w *Worker) any { return &w.Conns.MaxConnsPerPeer }},

	// The worker: `mooncake worker` (+ mooncake_client), and standalone's worker half.
	{Name: "global_segment_size", Kinds: workerAll | file, Unit: "bytes", Default: base.Bytes(1 << 30), Check: segmentSize,
		Help:     "DRAM this worker contributes, e.g. 256MiB or 4GB",
		Mooncake: mc("string", "4 GB", "", "the DRAM the worker contributes (GB = 2^30); our default is 1 GiB, modest for a first run"),
		JSON:     "global_segment_size", Env: []string{"MOONCAKE_GLOBAL_SEGMENT_SIZE"}, EnvHelp: "the DRAM a worker contributes",
		Worker: func(w *Worker) any { return &w.GlobalSegmentSize }, File: func(f *File) any { return &f.GlobalSegmentSize }},
	{Name: "root_fs_dir", Kinds: workerAll | file, Default: "", Help: "directory of the NVMe tier; objects persist under <root_fs_dir>/<cluster_id>/<worker_id> (default: DRAM only)",
		JSON:   "root_fs_dir",
		Worker: func(w *Worker) any { return &w.RootFSDir }, File: func(f *File) any { return &f.RootFSDir }},
	{Name: "persistence", Kinds: workerAll, Default: "", Help: "cache, spill or durable (default: spill with --root_fs_dir, else cache)",
		Worker: func(w *Worker) any { return &w.Persistence }},
	{Name: "ssd_capacity", Kinds: workerAll, Unit: "bytes", Default: base.Bytes(0), Check: nonNegative, Help: "bytes the NVMe tier may use (default 90% of the free disk)",
		Worker: func(w *Worker) any { return &w.SSDCapacity }},
	{Name: "huge_pages", Kinds: workerAll, Default: "auto", Help: "DRAM arena pages: auto (hugetlb, else THP, else plain), off, or require",
		Worker: func(w *Worker) any { return &w.HugePages }},
	{Name: "prefault_arena", Kinds: workerAll, Default: false, Help: "fault in the whole DRAM arena at start: puts never wait for first-touch page faults, but RSS is global_segment_size from the start and start takes ~0.3-1 s per GiB",
		Worker: func(w *Worker) any { return &w.PrefaultArena }},
	{Name: "populate_arena", Kinds: workerAll, Default: true, Help: "fault in the DRAM arena in the background after start, using at most half a core, ahead of the allocator, so puts seldom wait for first-touch page faults while start stays fast (RSS grows to global_segment_size within seconds per GiB); --prefault_arena does it before start instead",
		Worker: func(w *Worker) any { return &w.PopulateArena }},
	{Name: "tcp_sendfile", Kinds: workerAll, Default: false, Help: "send the DRAM bytes of TCP reads to checksum-verifying clients with sendfile from the shared arena (by reference) instead of copying them; off by default: it cost more worker CPU than the copy where measured (docs/benchmarks.md)",
		Worker: func(w *Worker) any { return &w.TCPSendfile }},
	{Name: "shutdown_timeout", Kinds: workerAll, Default: 30 * time.Second, Check: positive, Help: "on SIGTERM, time allowed to spill DRAM to the NVMe tier before exit",
		Worker: func(w *Worker) any { return &w.ShutdownTimeout }},
	{Name: "prefetch_budget", Kinds: workerAll, Unit: "bytes", Default: base.Bytes(64 << 20), Help: "bytes of prefetches (is_exist with prefetch_to_memory: promote NVMe objects to DRAM) in flight at once; more are dropped and counted; 0 turns prefetch off",
		Worker: func(w *Worker) any { return &w.PrefetchBudget }},
	{Name: "warm_up", Kinds: workerAll, Default: false, Help: "with --root_fs_dir: at start, copy objects found on NVMe back into DRAM (in the background)",
		Worker: func(w *Worker) any { return &w.WarmUp }},
	{Name: "shared_memory", Kinds: workerAll, Default: true, Help: "let clients on this host (same uid, or root) map the DRAM arena read-only and copy objects out of it instead of reading over TCP, and put through a staging area this worker copies from",
		Worker: func(w *Worker) any { return &w.SharedMemory }},
	{Name: "worker_address", Kinds: standalone, Default: "", Help: "worker data address host:port (default: a free port on 127.0.0.1)",
		Worker: func(w *Worker) any { return &w.WorkerAddress }},
	{Name: "dram_only", Kinds: standalone, Default: false, Help: "no NVMe tier: objects live in DRAM only and are lost on a restart (default: an NVMe tier under <data_dir>/nvme, capped at 25% of the free disk)",
		Worker: func(w *Worker) any { return &w.DRAMOnly }},
	{Name: "master_server_address", Kinds: worker | file | embedded, Default: "", Help: "the masters, host:port,host:port (default $MOONCAKE_MASTER, else the config file's, else 127.0.0.1:" + strconv.Itoa(rpcPort) + ")",
		Mooncake: mc("string", "127.0.0.1:50051", "", "the masters, host:port,host:port"),
		JSON:     "master_server_address",
		Worker:   func(w *Worker) any { return &w.MasterServerAddress }, File: func(f *File) any { return &f.MasterServerAddress }},
	{Name: "worker_address", Kinds: worker, Default: "", Help: "worker data address host:port (default <local_hostname>:" + strconv.Itoa(workerPort) + ")",
		Worker: func(w *Worker) any { return &w.WorkerAddress }},
	{Name: "worker_id", Kinds: worker, Default: "", Help: "worker id, stable across restarts (default: derived from --worker_address, kept under --root_fs_dir)",
		Worker: func(w *Worker) any { return &w.WorkerID }},
	{Name: "metrics_port", Kinds: worker, Unit: "port", Default: 0, Check: portOrZero, Help: "HTTP port of /metrics, /health and /api/v1/status (0: a free port)",
		Worker: func(w *Worker) any { return &w.MetricsPort }},
	{Name: "cluster_id", Kinds: worker | file | embedded, Default: "", Check: clusterID, Help: "cluster id (default: the config file's, else " + base.DefaultClusterID + ")",
		JSON:   "cluster_id",
		Worker: func(w *Worker) any { return &w.ClusterID }, File: func(f *File) any { return &f.ClusterID }},
	{Name: "protocol", Kinds: worker | file, Default: "", Help: "transport: tcp; Mooncake's rdma and others run over tcp with a warning (default: the config file's, else tcp)",
		Mooncake: mc("string", "tcp", "", "tcp; rdma and the others run over TCP with a warning"),
		JSON:     "protocol", Env: []string{"MOONCAKE_PROTOCOL"}, EnvHelp: "tcp; others run over TCP with a warning",
		Worker: func(w *Worker) any { return &w.Protocol }, File: func(f *File) any { return &f.Protocol }},

	// mooncake_client's flags beyond the worker's that have an effect here.
	{Name: "host", Kinds: mcClient, Default: "", Help: "Mooncake's name for --local_hostname",
		Mooncake: mc("string", "0.0.0.0", "--local_hostname", "the host the worker advertises (an unspecified address keeps --local_hostname's)"),
		Worker:   func(w *Worker) any { return &w.Host }},
	{Name: "port", Kinds: mcClient, Unit: "port", Default: 0, Check: portOrZero, Help: "Mooncake's client port: the worker's data port here (--worker_address)",
		Mooncake: mc("int32", "50052", "--worker_address", "the worker's data port"),
		Worker:   func(w *Worker) any { return &w.Port }},
	{Name: "enable_offload", Kinds: mcClient, Default: false, Help: "use an NVMe tier: root_fs_dir from the flag, the config file or the master",
		Mooncake: mc("bool", "false", "--root_fs_dir", "use an NVMe tier: root_fs_dir from the flag, the config file or the master"),
		Worker:   func(w *Worker) any { return &w.EnableOffload }},
	{Name: "enable_http_server", Kinds: mcClient, Default: true, Help: "serve /metrics and /health (false: no HTTP port)",
		Mooncake: mc("bool", "true", "--metrics_port", "false: no HTTP port (/metrics, /health)"),
		Worker:   func(w *Worker) any { return &w.EnableHTTPServer }},
	{Name: "http_port", Kinds: mcClient, Unit: "port", Default: 0, Check: portOrZero, Help: "Mooncake's name for --metrics_port",
		Mooncake: mc("uint32", "9003", "--metrics_port", "the port of /metrics and /health"),
		Worker:   func(w *Worker) any { return &w.HTTPPort }},

	// Mooncake's client config (mooncake.json, MooncakeConfig, setup's keywords) and its
	// MOONCAKE_* variables, beyond the flags' keys above. A variable fills what the file
	// does not set; a flag given on the command line beats both.
	{Name: "mooncake.json", Kinds: file, Env: []string{EnvConfigPath}, EnvHelp: "the config file every command reads"},
	{Name: "master_server_address", Kinds: file, Env: []string{EnvMaster}, EnvHelp: "the masters, when no flag or file names them",
		File: func(f *File) any { return &f.EnvMasters }},
	{Name: "local_hostname", Kinds: file, Check: hostNoPort, Help: "the host to advertise",
		JSON: "local_hostname", Env: []string{"MOONCAKE_LOCAL_HOSTNAME"}, EnvParse: hostFromEnv,
		EnvHelp: "the host to advertise (a port is dropped: the worker's is its own flag)",
		File:    func(f *File) any { return &f.LocalHostname }},
	{Name: "local_buffer_size", Kinds: file, Check: nonNegative, Status: "the Go client reads into the caller's buffers",
		JSON: "local_buffer_size", Env: []string{"MOONCAKE_LOCAL_BUFFER_SIZE"}, EnvParse: bytesOrNothing,
		EnvHelp: "read, then noted as without effect (clients read into the caller's buffers)",
		File:    func(f *File) any { return &f.LocalBufferSize }},
	{Name: "device_name", Kinds: file, Status: "it names an RDMA device and " + whyTCP,
		JSON: "device_name", Env: []string{"MOONCAKE_DEVICE"}, EnvHelp: "read, then noted as without effect (this build moves bytes over TCP)",
		File: func(f *File) any { return &f.DeviceName }},
	{Name: "metadata_server", Kinds: file, Status: "the masters keep metadata with raft, no metadata server is needed",
		JSON: "metadata_server", Env: []string{"MOONCAKE_TE_META_DATA_SERVER"}, EnvHelp: "read, then noted as without effect (no metadata server is needed)",
		File: func(f *File) any { return &f.MetadataServer }},
	{Name: "tenant_id", Kinds: file, Status: "a worker holds every tenant's objects; a client's tenant is its setup's tenant_id",
		JSON: "tenant_id", Env: []string{"MOONCAKE_TENANT_ID"}, EnvHelp: "read, then noted as without effect (a worker holds every tenant's objects)",
		File: func(f *File) any { return &f.TenantID }},
	// MOONCAKE_OFFLOAD_ENABLED is the current Python package's name, MOONCAKE_ENABLE_SSD_OFFLOAD
	// an older one.
	{Name: "enable_ssd_offload", Kinds: file, Help: "with ssd_offload_path, the worker's NVMe tier (root_fs_dir)",
		JSON: "enable_ssd_offload", Env: []string{"MOONCAKE_OFFLOAD_ENABLED", "MOONCAKE_ENABLE_SSD_OFFLOAD"},
		EnvHelp: "with MOONCAKE_OFFLOAD_FILE_STORAGE_PATH, the worker's NVMe tier (root_fs_dir)",
		File:    func(f *File) any { return &f.EnableSSDOffload }},
	{Name: "ssd_offload_path", Kinds: file, Help: "the NVMe tier's directory (root_fs_dir)",
		JSON: "ssd_offload_path", Env: []string{"MOONCAKE_OFFLOAD_FILE_STORAGE_PATH"},
		File: func(f *File) any { return &f.SSDOffloadPath }},
	fileKey("master_metrics_port", "each master serves its metrics on its own --metrics_port"),
	fileKey("check_server", "clients check the masters when they connect"),
	fileKey("standalone_storage", "the Go client talks to masters and workers directly (no separate client service)"),
	fileKey("client_server_address", "the Go client talks to masters and workers directly (no separate client service)"),
	fileKey("preferred_segment", "placement picks the worker with the most free room; a put may name a preferred worker"),
	fileKey("prefer_alloc_in_same_node", "placement picks the worker with the most free room; a put may name a preferred worker"),
	fileKey("replica_num", "the replica count is set per put (--replicas, ReplicateConfig)"),
	fileKey("transfer_timeout", "calls use the client's --timeout"),
	fileKey("enable_ssd_prefetch", "a client setup option: is_exist(key, prefetch_to_memory=True) has the worker promote the object; workers bound it with --prefetch_budget"),
	fileKey("prefetch_threshold", "workers promote objects read from NVMe back to DRAM on their own"),
	fileKey("rdma_devices", whyTCP),
	fileKey("master_server_addr", "use master_server_address"),
	// vLLM's MooncakeStoreConfig keys.
	fileKey("mode", "the cluster's DRAM always comes from its workers (mooncake worker / mooncake_client), as in Mooncake's standalone-store mode"),
	fileKey("enable_offload", "a worker with root_fs_dir (or ssd_offload_path with enable_ssd_offload, or the master's --root_fs_dir) spills to NVMe on its own"),
	fileKey("device_name_per_gpu", whyTCP),
	// Keys of Mooncake's current client config (MooncakeConfig, setup's keywords).
	fileKey("enable_client_http_server", "a client has no HTTP endpoint of its own; workers and masters serve /metrics and /health on --metrics_port"),
	fileKey("client_http_port", "a client has no HTTP endpoint of its own; workers and masters serve /metrics and /health on --metrics_port"),
	fileKey("ipc_socket_path", "there is no separate client process to reach over a socket: clients talk to masters and workers directly"),
	// Mooncake's other variables (the Python package's mooncake_config.py,
	// client_environment_variables.h and master_environment_variables.h): accepted, each
	// one set noted once at start, by name only (some hold credentials).
	envVars("a worker is named by --worker_id (kept under root_fs_dir), not by host", "MOONCAKE_HOST_ID"),
	envVars("every byte is checksummed with HighwayHash, always", "MOONCAKE_STORE_CHECKSUM"),
	envVars("the NVMe tier is the worker's own (a Pebble index and extent files under root_fs_dir), with no separate offload service",
		"MOONCAKE_OFFLOAD_STORAGE_BACKEND_DESCRIPTOR", "MOONCAKE_OFFLOAD_LOCAL_BUFFER_SIZE_BYTES",
		"MOONCAKE_OFFLOAD_SCANMETA_ITERATOR_KEYS_LIMIT", "MOONCAKE_SCANMETA_ITERATOR_KEYS_LIMIT", "MOONCAKE_OFFLOAD_TOTAL_KEYS_LIMIT",
		"MOONCAKE_OFFLOAD_HEARTBEAT_INTERVAL_SECONDS", "MOONCAKE_OFFLOAD_CLIENT_BUFFER_GC_INTERVAL_SECONDS",
		"MOONCAKE_OFFLOAD_CLIENT_BUFFER_GC_TTL_MS", "MOONCAKE_OFFLOAD_USE_URING", "MOONCAKE_USE_URING", "MOONCAKE_OFFLOAD_FSDIR",
		"MOONCAKE_OFFLOAD_ENABLE_EVICTION"),
	envVars("bound the NVMe tier with the worker's --ssd_capacity", "MOONCAKE_OFFLOAD_TOTAL_SIZE_LIMIT_BYTES"),
	envVars("a full NVMe tier refuses new objects (NO_SPACE) rather than evicting persisted ones (docs/persistence.md)",
		"MOONCAKE_OFFLOAD_ENABLE_DISK_WATERMARK_EVICTION", "MOONCAKE_OFFLOAD_DISK_EVICTION_HIGH_WATERMARK_RATIO",
		"MOONCAKE_DISK_EVICTION_HIGH_WATERMARK_RATIO", "MOONCAKE_OFFLOAD_DISK_EVICTION_LOW_WATERMARK_RATIO",
		"MOONCAKE_DISK_EVICTION_LOW_WATERMARK_RATIO"),
	envVars("the NVMe tier has no bucket backend: values are framed records in extent files",
		"MOONCAKE_OFFLOAD_BUCKET_KEYS_LIMIT", "MOONCAKE_OFFLOAD_BUCKET_SIZE_LIMIT_BYTES", "MOONCAKE_OFFLOAD_BUCKET_MAX_TOTAL_SIZE",
		"MOONCAKE_BUCKET_MAX_TOTAL_SIZE", "MOONCAKE_OFFLOAD_BUCKET_MAX_PHYSICAL_BYTES", "MOONCAKE_OFFLOAD_BUCKET_DISK_SCAN_CACHE_MS",
		"MOONCAKE_OFFLOAD_BUCKET_EVICTION_POLICY", "MOONCAKE_BUCKET_EVICTION_POLICY"),
	envVars("the NVMe tier has no offset-allocator backend; every record carries a checksum",
		"MOONCAKE_OFFSET_EVICTION_POLICY", "MOONCAKE_OFFSET_HIGH_RATIO", "MOONCAKE_OFFSET_LOW_RATIO", "MOONCAKE_OFFSET_MAX_CAPACITY_NODES",
		"MOONCAKE_OFFSET_MAX_EVICT_PER_OFFLOAD", "MOONCAKE_OFFSET_PERSIST_MODE", "MOONCAKE_OFFSET_PERSIST_INTERVAL_SECONDS",
		"MOONCAKE_OFFSET_RECORD_CRC"),
	envVars("object storage (OSS) is not a tier here",
		"MOONCAKE_OSS_ENDPOINT", "MOONCAKE_OSS_BUCKET", "MOONCAKE_OSS_REGION", "MOONCAKE_OSS_ACCESS_KEY_ID", "MOONCAKE_OSS_ACCESS_KEY_SECRET",
		"MOONCAKE_OSS_SECURITY_TOKEN", "MOONCAKE_OSS_PATH_STYLE", "MOONCAKE_OSS_ANONYMOUS", "MOONCAKE_OSS_MAX_CONNECTIONS",
		"MOONCAKE_OSS_RECEIVE_BUFFER_SIZE", "MOONCAKE_OSS_UPLOAD_BUFFER_SIZE"),
	envVars("the NVMe tier uses files under root_fs_dir, not NVMe KV devices",
		"MOONCAKE_NVME_KV_DEVICE_PATH", "MOONCAKE_NVME_KV_NSID", "MOONCAKE_NVME_KV_QUEUE_DEPTH", "MOONCAKE_NVME_KV_RUNTIME_TRANSFER_LIMIT",
		"MOONCAKE_NVME_KV_TRANSPORT", "MOONCAKE_NVME_KV_TRANSFER_ALIGNMENT_BYTES", "MOONCAKE_NVME_KV_VALUE_BLOCK_UNIT_BYTES",
		"MOONCAKE_NVME_KV_PROTOCOL_MAX_VALUE_SIZE", "MOONCAKE_NVME_KV_READ_PLAN_BATCH_SIZE", "MOONCAKE_NVME_KV_MAX_IO_CONCURRENCY",
		"MOONCAKE_NVME_KV_IO_CONCURRENCY", "MOONCAKE_NVME_KV_BATCH_SUBMIT_CONCURRENCY", "MOONCAKE_NVME_KV_ROOT_SUBMIT_CONCURRENCY",
		"MOONCAKE_NVME_KV_PREPARE_CONCURRENCY"),
	envVars("DFS (3FS/NFS) is not a tier here", "MOONCAKE_ENABLE_DFS", "MOONCAKE_DFS_ENABLED"),
	envVars("master snapshots are raft snapshots under --data_dir, not uploaded",
		"MOONCAKE_SNAPSHOT_LOCAL_PATH", "MOONCAKE_AWS_REGION", "MOONCAKE_AWS_S3_ENDPOINT", "MOONCAKE_AWS_BUCKET_NAME", "MOONCAKE_AWS_ACCESS_KEY_ID",
		"MOONCAKE_AWS_SECRET_ACCESS_KEY", "MOONCAKE_AWS_USE_VIRTUAL_ADDRESSING", "MOONCAKE_AWS_USE_HTTPS",
		"MOONCAKE_AWS_REQUEST_CHECKSUM_CALCULATION", "MOONCAKE_AWS_RESPONSE_CHECKSUM_VALIDATION", "MOONCAKE_AWS_CONNECT_TIMEOUT_MS",
		"MOONCAKE_AWS_REQUEST_TIMEOUT_MS"),

	// Defaults of the Go API (master.Config, worker.Config) no flag sets.
	{Name: "master_id", Kinds: api, Default: "m1", Help: "the id of a master configured without one (standalone's)",
		Master: func(m *Master) any { return &m.MasterID }},
	{Name: "raft_port", Kinds: api, Default: 7001, Help: "the raft port of a master configured without a raft address (port 0 when its RPC port is 0)",
		Master: func(m *Master) any { return &m.RaftPort }},
	{Name: "worker_port", Kinds: api, Default: workerPort, Help: "the data port of a worker given no --worker_address",
		Worker: func(w *Worker) any { return &w.WorkerPort }},
	{Name: "standalone_worker_id", Kinds: api, Default: "standalone", Help: "the id of standalone's worker",
		Worker: func(w *Worker) any { return &w.StandaloneWorkerID }},
	{Name: "heartbeat_interval", Kinds: api, Default: time.Second, Check: nonNegative, Help: "how often a worker heartbeats the leader",
		Worker: func(w *Worker) any { return &w.HeartbeatInterval }},
	{Name: "pending_write_timeout", Kinds: api, Default: putTimeout, Check: nonNegative, Help: "bytes written but never committed are dropped this long after the first write (the master's put_timeout)",
		Worker: func(w *Worker) any { return &w.PendingWriteTimeout }},
	{Name: "shm_lease_ttl", Kinds: api, Default: 30 * time.Second, Check: nonNegative, Help: "how long a client on the worker's host may keep an object pinned (ShmPin) without releasing it",
		Worker: func(w *Worker) any { return &w.ShmLeaseTTL }},

	// mooncake_http_metadata_server's flags.
	{Name: "host", Kinds: KindMetadataHTTP, Default: metadataHost, Help: "address to bind",
		Master: func(m *Master) any { return &m.HTTPMetadataServerHost }},
	{Name: "port", Kinds: KindMetadataHTTP, Unit: "port", Default: metadataPort, Check: portOrZero, Help: "port to listen on",
		Master: func(m *Master) any { return &m.HTTPMetadataServerPort }},

	// Mooncake's mooncake_master flags without effect here, in its source's order.
	noEffect(master, "max_threads", mm("int32", "4", "", whyThreads)),
	noEffect(master, "default_kv_lease_ttl", mm("string", "5000", "", whyNoLease)),
	noEffect(master, "default_kv_soft_pin_ttl", mm("string", "1800000", "", "a soft pin's TTL is given with each put (soft_pin_ttl)")),
	noEffect(master, "allow_evict_soft_pinned_objects", mm("bool", "true", "", "workers evict soft-pinned objects as Mooncake does by default: only after every unpinned one (docs/tier.md); there is no switch to forbid it")),
	noEffect(master, "rpc_thread_num", mm("int32", "0", "", whyThreads)),
	noEffect(master, "rpc_enable_tcp_no_delay", mm("bool", "true", "", "TCP_NODELAY is always on")),
	noEffect(master, "enable_ha", mm("bool", "false", "", whyHA)),
	noEffect(master, "enable_offload", mm("bool", "false", "", whyOffload)),
	noEffect(master, "ha_backend_type", mm("string", "etcd", "", whyHA)),
	noEffect(master, "ha_backend_connstring", mm("string", "", "", whyHA)),
	noEffect(master, "etcd_endpoints", mm("string", "", "", whyHA)),
	noEffect(master, "global_file_segment_size", mm("int64", "9223372036854775807", "", "each worker's NVMe tier is bounded by its own --ssd_capacity (default 90% of the free disk)")),
	noEffect(master, "memory_allocator", mm("string", "offset", "", "workers use one offset allocator over a hugepage arena")),
	noEffect(master, "allocation_strategy", mm("string", "random", "", "placement picks the workers with the most free room, with randomness")),
	noEffect(master, "enable_metadata_cleanup_on_timeout", mm("bool", "false", "", "the HTTP metadata store holds nothing this build reads")),
	noEffect(master, "put_start_release_timeout_sec", mm("uint64", "600", "", "the workers free a discarded put's bytes at once")),
	noEffect(master, "enable_disk_eviction", mm("bool", "true", "", whyOffload)),
	noEffect(master, "quota_bytes", mm("uint64", "0", "", "each worker bounds its NVMe tier with --ssd_capacity")),
	noEffect(master, "snapshot_backup_dir", mm("string", "", "", whySnap)),
	noEffect(master, "enable_snapshot_restore", mm("bool", "false", "", whySnap)),
	noEffect(master, "enable_snapshot", mm("bool", "false", "", whySnap)),
	noEffect(master, "snapshot_interval_seconds", mm("uint64", "600", "", whySnap)),
	noEffect(master, "snapshot_child_timeout_seconds", mm("uint64", "300", "", whySnap)),
	noEffect(master, "snapshot_retention_count", mm("uint32", "2", "", whySnap)),
	noEffect(master, "snapshot_object_store_type", mm("string", "", "", whySnap)),
	noEffect(master, "snapshot_payload_store_type", mm("string", "", "", whySnap)),
	noEffect(master, "snapshot_payload_backend_type", mm("string", "", "", whySnap)),
	noEffect(master, "snapshot_catalog_store_type", mm("string", "", "", whySnap)),
	noEffect(master, "snapshot_catalog_backend_type", mm("string", "", "", whySnap)),
	noEffect(master, "snapshot_catalog_store_connstring", mm("string", "", "", whySnap)),
	noEffect(master, "snapshot_catalog_backend_connstring", mm("string", "", "", whySnap)),
	noEffect(master, "max_total_finished_tasks", mm("uint32", "10000", "", whyTasks)),
	noEffect(master, "max_total_pending_tasks", mm("uint32", "10000", "", whyTasks)),
	noEffect(master, "max_total_processing_tasks", mm("uint32", "10000", "", whyTasks)),
	noEffect(master, "pending_task_timeout_sec", mm("uint64", "300", "", whyTasks)),
	noEffect(master, "processing_task_timeout_sec", mm("uint64", "300", "", whyTasks)),
	noEffect(master, "max_retry_attempts", mm("uint32", "10", "", whyTasks)),
	noEffect(master, "cxl_path", mm("string", "/dev/dax0.0", "", whyCXL)),
	noEffect(master, "cxl_size", mm("uint64", "8589934592", "", whyCXL)),
	noEffect(master, "enable_cxl", mm("bool", "false", "", whyCXL)),
	noEffect(master, "kv_events_tenant_id", mm("string", "default", "", "every event carries the tenant of its key (tenant_id of the client that stored it)")),
	noEffect(master, "kv_events_queue_capacity", mm("uint32", "65536", "", "events are not queued: the leader sends them from the last 4096 committed batches each master keeps, and a publisher that falls behind them shows a gap in the sequence")),

	// Mooncake's mooncake_client flags without effect here.
	noEffect(mcClient, "metadata_server", mc("string", "http://127.0.0.1:8080/metadata", "", "the masters keep metadata with raft; no metadata server is needed")),
	noEffect(mcClient, "device_names", mc("string", "", "", whyTCP)),
	noEffect(mcClient, "local_buffer_size", mc("string", "0", "", "clients read into the caller's buffers")),
	noEffect(mcClient, "threads", mc("int32", "1", "", "the worker serves each connection on its own goroutine")),
	noEffect(mcClient, "tenant_id", mc("string", "default", "", "a worker holds every tenant's objects; a client's tenant is its setup's tenant_id")),
	noEffect(mcClient, "start_offload_rpc_server", mc("bool", "true", "", "a worker serves its NVMe objects on its data port")),
	noEffect(mcClient, "graceful_unmount_seconds", mc("uint32", "0", "", "on SIGTERM a worker tells the leader first (no new placements) and keeps serving reads while it spills DRAM to NVMe (--shutdown_timeout)")),

	// glog's flags, which both of Mooncake's binaries take (-v is above).
	noEffect(glog, "logtostderr", mg("bool", "false", "", whyLog)),
	noEffect(glog, "alsologtostderr", mg("bool", "false", "", whyLog)),
	noEffect(glog, "colorlogtostderr", mg("bool", "false", "", whyLog)),
	noEffect(glog, "log_dir", mg("string", "", "", whyLog)),
	noEffect(glog, "minloglevel", mg("int32", "0", "", whyLog)),
	noEffect(glog, "stderrthreshold", mg("int32", "2", "", whyLog)),
	noEffect(glog, "vmodule", mg("string", "", "", whyLog)),
}
