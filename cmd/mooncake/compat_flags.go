package main

import (
	"fmt"
	"math"
	"net"
	"slices"
	"strconv"
	"strings"

	"github.com/spf13/pflag"

	"github.com/mooncake-go/mooncake/internal/base"
)

// mooncakeFlag is one flag of Mooncake's mooncake_master or mooncake_client binary, as its
// source declares it (gflags DEFINE_*), and what it does here. The table below is the one
// place each of Mooncake's flags is declared: those without an equivalent are registered from
// it; those with one name the flag or setting that implements them, and a test checks that
// the command registers them. docs/config.md's "Mooncake's flags" section is generated from it
// (TestMooncakeFlagDocs).
type mooncakeFlag struct {
	bin  string // nameMaster or nameClient
	name string
	// kind is the gflags type: bool, int32, int64, uint32, uint64, double, string. Values are
	// checked against it, so a typo is an error here as it is in Mooncake.
	kind string
	def  string // Mooncake's default
	// ours is what the flag sets here ("" none: it is accepted, and listed once at start as
	// "accepted, no effect here: <why>" when given a value other than Mooncake's default).
	ours string
	why  string // how it maps, or why it has no effect
}

// Reasons shared by several flags.
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

// mooncakeFlags lists every flag of Mooncake's mooncake_master (mooncake-store/src/master.cpp)
// and mooncake_client (mooncake-store/src/real_client_main.cpp) with glog's logging flags,
// in their source order.
var mooncakeFlags = []mooncakeFlag{
	{nameMaster, "config_path", "string", "", "--config_path", "a JSON file of Mooncake's master keys (client_live_ttl_sec for client_ttl); flags given on the command line win"},
	{nameMaster, "port", "int32", "50051", "--rpc_port", "the client RPC port; --rpc_port wins when both are set"},
	{nameMaster, "max_threads", "int32", "4", "", whyThreads},
	{nameMaster, "enable_metric_reporting", "bool", "true", "--enable_metric_reporting", "the \"Master Metrics:\" line every 10 s"},
	{nameMaster, "metrics_port", "int32", "9003", "--metrics_port", "the HTTP port of /metrics, /health and Mooncake's admin endpoints"},
	{nameMaster, "default_kv_lease_ttl", "string", "5000", "", whyNoLease},
	{nameMaster, "default_kv_soft_pin_ttl", "string", "1800000", "", "a soft pin's TTL is given with each put (soft_pin_ttl)"},
	{nameMaster, "allow_evict_soft_pinned_objects", "bool", "true", "", "workers evict soft-pinned objects as Mooncake does by default: only after every unpinned one (docs/tier.md); there is no switch to forbid it"},
	{nameMaster, "eviction_ratio", "double", "0.05", "--eviction_ratio", "the fraction of DRAM an eviction pass frees; workers take it from the master"},
	{nameMaster, "eviction_high_watermark_ratio", "double", "0.95", "--eviction_high_watermark_ratio", "the DRAM fill at which workers evict; workers take it from the master"},
	{nameMaster, "rpc_thread_num", "int32", "0", "", whyThreads},
	{nameMaster, "rpc_port", "int32", "0", "--rpc_port", "the client RPC port; 0 means --port, as in Mooncake (our default is 50051)"},
	{nameMaster, "rpc_address", "string", "0.0.0.0", "--rpc_address", "the host the RPC port binds; a lone mooncake_master binds every interface, as Mooncake's"},
	{nameMaster, "rpc_interface", "string", "", "--rpc_address", "the IPv4 address of this network interface becomes --rpc_address"},
	{nameMaster, "rpc_conn_timeout_seconds", "int32", "0", "--conn_idle_timeout", "above 0, a client connection idle this many seconds is closed; 0 keeps ours (--conn_idle_timeout), which bounds idle connections where Mooncake keeps them forever"},
	{nameMaster, "rpc_enable_tcp_no_delay", "bool", "true", "", "TCP_NODELAY is always on"},
	{nameMaster, "enable_ha", "bool", "false", "", whyHA},
	{nameMaster, "enable_offload", "bool", "false", "", whyOffload},
	{nameMaster, "ha_backend_type", "string", "etcd", "", whyHA},
	{nameMaster, "ha_backend_connstring", "string", "", "", whyHA},
	{nameMaster, "etcd_endpoints", "string", "", "", whyHA},
	{nameMaster, "client_ttl", "int64", "10", "--client_ttl", "seconds a silent worker stays alive (Go durations such as 10s accepted too)"},
	{nameMaster, "root_fs_dir", "string", "", "--root_fs_dir", "the NVMe directory handed to workers that set none"},
	{nameMaster, "global_file_segment_size", "int64", "9223372036854775807", "", "each worker's NVMe tier is bounded by its own --ssd_capacity (default 90% of the free disk)"},
	{nameMaster, "cluster_id", "string", "mooncake_cluster", "--cluster_id", "masters, workers and clients must agree; it names the NVMe directory"},
	{nameMaster, "memory_allocator", "string", "offset", "", "workers use one offset allocator over a hugepage arena"},
	{nameMaster, "allocation_strategy", "string", "random", "", "placement picks the workers with the most free room, with randomness"},
	{nameMaster, "enable_http_metadata_server", "bool", "false", "--enable_http_metadata_server", "also serve Mooncake's HTTP metadata store (this build needs none)"},
	{nameMaster, "http_metadata_server_port", "int32", "8080", "--http_metadata_server_port", "its port"},
	{nameMaster, "http_metadata_server_host", "string", "0.0.0.0", "--http_metadata_server_host", "its host"},
	{nameMaster, "enable_metadata_cleanup_on_timeout", "bool", "false", "", "the HTTP metadata store holds nothing this build reads"},
	{nameMaster, "put_start_discard_timeout_sec", "uint64", "30", "--put_timeout", "seconds a put may take between PutStart and PutEnd (--put_timeout wins when both are set)"},
	{nameMaster, "put_start_release_timeout_sec", "uint64", "600", "", "the workers free a discarded put's bytes at once"},
	{nameMaster, "enable_disk_eviction", "bool", "true", "", whyOffload},
	{nameMaster, "quota_bytes", "uint64", "0", "", "each worker bounds its NVMe tier with --ssd_capacity"},
	{nameMaster, "snapshot_backup_dir", "string", "", "", whySnap},
	{nameMaster, "enable_snapshot_restore", "bool", "false", "", whySnap},
	{nameMaster, "enable_snapshot", "bool", "false", "", whySnap},
	{nameMaster, "snapshot_interval_seconds", "uint64", "600", "", whySnap},
	{nameMaster, "snapshot_child_timeout_seconds", "uint64", "300", "", whySnap},
	{nameMaster, "snapshot_retention_count", "uint32", "2", "", whySnap},
	{nameMaster, "snapshot_object_store_type", "string", "", "", whySnap},
	{nameMaster, "snapshot_payload_store_type", "string", "", "", whySnap},
	{nameMaster, "snapshot_payload_backend_type", "string", "", "", whySnap},
	{nameMaster, "snapshot_catalog_store_type", "string", "", "", whySnap},
	{nameMaster, "snapshot_catalog_backend_type", "string", "", "", whySnap},
	{nameMaster, "snapshot_catalog_store_connstring", "string", "", "", whySnap},
	{nameMaster, "snapshot_catalog_backend_connstring", "string", "", "", whySnap},
	{nameMaster, "max_total_finished_tasks", "uint32", "10000", "", whyTasks},
	{nameMaster, "max_total_pending_tasks", "uint32", "10000", "", whyTasks},
	{nameMaster, "max_total_processing_tasks", "uint32", "10000", "", whyTasks},
	{nameMaster, "pending_task_timeout_sec", "uint64", "300", "", whyTasks},
	{nameMaster, "processing_task_timeout_sec", "uint64", "300", "", whyTasks},
	{nameMaster, "max_retry_attempts", "uint32", "10", "", whyTasks},
	{nameMaster, "cxl_path", "string", "/dev/dax0.0", "", whyCXL},
	{nameMaster, "cxl_size", "uint64", "8589934592", "", whyCXL},
	{nameMaster, "enable_cxl", "bool", "false", "", whyCXL},
	{nameMaster, "enable_kv_events", "bool", "false", "--enable_kv_events", "the leader publishes KV events over ZMQ in Mooncake's format, numbered by a sequence that continues across leaders (docs/operations.md)"},
	{nameMaster, "kv_events_bind_endpoint", "string", "", "--kv_events_bind_endpoint", "the ZMQ PUB address every master binds; only the leader sends"},
	{nameMaster, "kv_events_backend_id", "string", "", "--kv_events_backend_id", "required with --enable_kv_events (an error at start, where Mooncake disables the publisher)"},
	{nameMaster, "kv_events_model_name", "string", "", "--kv_events_model_name", "the model of objects whose put named none (a put's model wins)"},
	{nameMaster, "kv_events_block_size", "uint32", "0", "--kv_events_block_size", "written into events; 0 sends nil"},
	{nameMaster, "kv_events_lora_name", "string", "", "--kv_events_lora_name", "written into events; empty sends nil"},
	{nameMaster, "kv_events_additional_salt", "string", "", "--kv_events_additional_salt", "written into events; empty sends nil"},
	{nameMaster, "kv_events_dp_rank", "uint32", "0", "--kv_events_dp_rank", "written into every event and batch"},
	{nameMaster, "kv_events_tenant_id", "string", "default", "", "every event carries the tenant of its key (tenant_id of the client that stored it)"},
	{nameMaster, "kv_events_emit_object_key", "bool", "true", "--kv_events_emit_object_key", "false skips object events, as in Mooncake"},
	{nameMaster, "kv_events_emit_legacy_compat", "bool", "true", "--kv_events_emit_legacy_compat", "adds type, block_hashes and parent_block_hash"},
	{nameMaster, "kv_events_queue_capacity", "uint32", "65536", "", "events are not queued: the leader sends them from the last 4096 committed batches each master keeps, and a publisher that falls behind them shows a gap in the sequence"},

	{nameClient, "host", "string", "0.0.0.0", "--local_hostname", "the host the worker advertises (an unspecified address keeps --local_hostname's)"},
	{nameClient, "metadata_server", "string", "http://127.0.0.1:8080/metadata", "", "the masters keep metadata with raft; no metadata server is needed"},
	{nameClient, "device_names", "string", "", "", whyTCP},
	{nameClient, "master_server_address", "string", "127.0.0.1:50051", "--master_server_address", "the masters, host:port,host:port"},
	{nameClient, "protocol", "string", "tcp", "--protocol", "tcp; rdma and the others run over TCP with a warning"},
	{nameClient, "port", "int32", "50052", "--worker_address", "the worker's data port"},
	{nameClient, "global_segment_size", "string", "4 GB", "--global_segment_size", "the DRAM the worker contributes (GB = 2^30); our default is 1 GiB, modest for a first run"},
	{nameClient, "local_buffer_size", "string", "0", "", "clients read into the caller's buffers"},
	{nameClient, "threads", "int32", "1", "", "the worker serves each connection on its own goroutine"},
	{nameClient, "tenant_id", "string", "default", "", "a worker holds every tenant's objects; a client's tenant is its setup's tenant_id"},
	{nameClient, "enable_offload", "bool", "false", "--root_fs_dir", "use an NVMe tier: root_fs_dir from the flag, the config file or the master"},
	{nameClient, "start_offload_rpc_server", "bool", "true", "", "a worker serves its NVMe objects on its data port"},
	{nameClient, "graceful_unmount_seconds", "uint32", "0", "", "on SIGTERM a worker tells the leader first (no new placements) and keeps serving reads while it spills DRAM to NVMe (--shutdown_timeout)"},
	{nameClient, "enable_http_server", "bool", "true", "--metrics_port", "false: no HTTP port (/metrics, /health)"},
	{nameClient, "http_port", "uint32", "9003", "--metrics_port", "the port of /metrics and /health"},
}

// glogFlags are glog's flags, which both of Mooncake's binaries take.
var glogFlags = []mooncakeFlag{
	{"", "v", "int32", "0", "-v", "1 or more logs at debug level"},
	{"", "logtostderr", "bool", "false", "", whyLog},
	{"", "alsologtostderr", "bool", "false", "", whyLog},
	{"", "colorlogtostderr", "bool", "false", "", whyLog},
	{"", "log_dir", "string", "", "", whyLog},
	{"", "minloglevel", "int32", "0", "", whyLog},
	{"", "stderrthreshold", "int32", "2", "", whyLog},
	{"", "vmodule", "string", "", "", whyLog},
}

// mooncakeFlagsOf returns bin's flags: its own, then glog's.
func mooncakeFlagsOf(bin string) []mooncakeFlag {
	var out []mooncakeFlag
	for _, f := range mooncakeFlags {
		if f.bin == bin {
			out = append(out, f)
		}
	}
	for _, f := range glogFlags {
		f.bin = bin
		out = append(out, f)
	}
	return out
}

// gflagValue holds a flag without effect: any value of its gflags type.
type gflagValue struct {
	kind, val string
}

func (v *gflagValue) String() string { return v.val }
func (v *gflagValue) Type() string   { return v.kind }
func (v *gflagValue) Set(s string) error {
	if err := checkGflag(v.kind, s); err != nil {
		return err
	}
	v.val = s
	return nil
}

// checkGflag reports whether s is a value of the gflags type kind.
func checkGflag(kind, s string) error {
	var err error
	switch kind {
	case "bool":
		_, err = strconv.ParseBool(s)
	case "int32":
		_, err = strconv.ParseInt(s, 0, 32)
	case "int64":
		_, err = strconv.ParseInt(s, 0, 64)
	case "uint32":
		_, err = strconv.ParseUint(s, 0, 32)
	case "uint64":
		_, err = strconv.ParseUint(s, 0, 64)
	case "double":
		_, err = strconv.ParseFloat(s, 64)
	}
	if err != nil {
		return fmt.Errorf("want a %s", kind)
	}
	return nil
}

// sameGflag reports whether a and b are the same value of kind ("1" and "true", "0.50" and
// "0.5" are).
func sameGflag(kind, a, b string) bool {
	switch kind {
	case "bool":
		x, e1 := strconv.ParseBool(a)
		y, e2 := strconv.ParseBool(b)
		return e1 == nil && e2 == nil && x == y
	case "string":
		return a == b
	}
	x, e1 := strconv.ParseFloat(a, 64)
	y, e2 := strconv.ParseFloat(b, 64)
	return e1 == nil && e2 == nil && (x == y || math.Abs(x-y) < 1e-12)
}

// registerNoEffect registers bin's flags without effect here (those of the table with no
// equivalent) that fs does not have yet, each at Mooncake's default.
func registerNoEffect(fs *pflag.FlagSet, bin string) {
	for _, f := range mooncakeFlagsOf(bin) {
		if f.ours != "" || fs.Lookup(f.name) != nil {
			continue
		}
		fs.Var(&gflagValue{kind: f.kind, val: f.def}, f.name, "Mooncake's flag, accepted; no effect here: "+f.why)
		if f.kind == "bool" {
			fs.Lookup(f.name).NoOptDefVal = "true"
		}
	}
}

// noteNoEffect records one notice for each flag of bin without effect that was given a value
// other than Mooncake's default: "accepted, no effect here: <why>". skip names flags whose
// notice the caller words itself.
func noteNoEffect(fs *pflag.FlagSet, fc *fileConfig, bin string, skip ...string) {
	for _, f := range mooncakeFlagsOf(bin) {
		fl := fs.Lookup(f.name)
		if f.ours != "" || fl == nil || !fl.Changed || slices.Contains(skip, f.name) || sameGflag(f.kind, fl.Value.String(), f.def) {
			continue
		}
		fc.note(false, "--%s=%s: accepted, no effect here: %s", f.name, fl.Value.String(), f.why)
	}
}

// mooncakeFlagDocs renders the docs/config.md table of bin's flags.
func mooncakeFlagDocs(bin string) string {
	var b strings.Builder
	b.WriteString("| flag | type | Mooncake's default | here |\n|---|---|---|---|\n")
	for _, f := range mooncakeFlagsOf(bin) {
		def := "`" + f.def + "`"
		if f.def == "" {
			def = `""`
		}
		here := "accepted, no effect: " + f.why
		if f.ours != "" {
			here = "`" + f.ours + "`: " + f.why
		}
		fmt.Fprintf(&b, "| `--%s` | %s | %s | %s |\n", f.name, f.kind, def, strings.ReplaceAll(here, "|", `\|`))
	}
	return b.String()
}

// rpcInterfaceAddr returns the first IPv4 address of the network interface name (Mooncake's
// --rpc_interface).
func rpcInterfaceAddr(name string, addrs func(string) ([]string, error)) (string, error) {
	as, err := addrs(name)
	if err != nil {
		return "", fmt.Errorf("%w: --rpc_interface %s: %v", base.ErrInvalidParams, name, err)
	}
	for _, a := range as {
		ip, _, _ := strings.Cut(a, "/")
		if strings.Count(ip, ".") == 3 {
			return ip, nil
		}
	}
	return "", fmt.Errorf("%w: --rpc_interface %s has no IPv4 address", base.ErrInvalidParams, name)
}

// interfaceAddrs lists the addresses (CIDR) of the network interface name.
func interfaceAddrs(name string) ([]string, error) {
	ifi, err := net.InterfaceByName(name)
	if err != nil {
		return nil, err
	}
	as, err := ifi.Addrs()
	if err != nil {
		return nil, err
	}
	out := make([]string, len(as))
	for i, a := range as {
		out[i] = a.String()
	}
	return out, nil
}

// mooncakeEnv is a group of Mooncake's MOONCAKE_* environment variables (the Python
// package's mooncake_config.py, mooncake-store/src/config/client_environment_variables.h and
// master_environment_variables.h) and what they do here. Those with an equivalent are read by
// applyMooncake (compat.go); each of the others that is set is listed once at start as
// "accepted, no effect here" (its value is not printed: some hold credentials).
type mooncakeEnv struct {
	names []string
	ours  string // what it sets here ("" none)
	why   string
}

var mooncakeEnvVars = []mooncakeEnv{
	{[]string{envConfigPath}, "mooncake.json", "the config file every command reads"},
	{[]string{envMaster}, "master_server_address", "the masters, when no flag or file names them"},
	{[]string{"MOONCAKE_LOCAL_HOSTNAME"}, "local_hostname", "the host to advertise (a port is dropped: the worker's is its own flag)"},
	{[]string{"MOONCAKE_GLOBAL_SEGMENT_SIZE"}, "global_segment_size", "the DRAM a worker contributes"},
	{[]string{"MOONCAKE_LOCAL_BUFFER_SIZE"}, "local_buffer_size", "read, then noted as without effect (clients read into the caller's buffers)"},
	{[]string{"MOONCAKE_PROTOCOL"}, "protocol", "tcp; others run over TCP with a warning"},
	{[]string{"MOONCAKE_DEVICE"}, "device_name", "read, then noted as without effect (this build moves bytes over TCP)"},
	{[]string{"MOONCAKE_TE_META_DATA_SERVER"}, "metadata_server", "read, then noted as without effect (no metadata server is needed)"},
	{[]string{"MOONCAKE_TENANT_ID"}, "tenant_id", "read, then noted as without effect (a worker holds every tenant's objects)"},
	{[]string{"MOONCAKE_OFFLOAD_ENABLED", "MOONCAKE_ENABLE_SSD_OFFLOAD"}, "enable_ssd_offload", "with MOONCAKE_OFFLOAD_FILE_STORAGE_PATH, the worker's NVMe tier (root_fs_dir)"},
	{[]string{"MOONCAKE_OFFLOAD_FILE_STORAGE_PATH"}, "ssd_offload_path", "the NVMe tier's directory (root_fs_dir)"},
	{[]string{"MOONCAKE_HOST_ID"}, "", "a worker is named by --worker_id (kept under root_fs_dir), not by host"},
	{[]string{"MOONCAKE_STORE_CHECKSUM"}, "", "every byte is checksummed with HighwayHash, always"},
	{[]string{"MOONCAKE_OFFLOAD_STORAGE_BACKEND_DESCRIPTOR", "MOONCAKE_OFFLOAD_LOCAL_BUFFER_SIZE_BYTES",
		"MOONCAKE_OFFLOAD_SCANMETA_ITERATOR_KEYS_LIMIT", "MOONCAKE_SCANMETA_ITERATOR_KEYS_LIMIT", "MOONCAKE_OFFLOAD_TOTAL_KEYS_LIMIT",
		"MOONCAKE_OFFLOAD_HEARTBEAT_INTERVAL_SECONDS", "MOONCAKE_OFFLOAD_CLIENT_BUFFER_GC_INTERVAL_SECONDS",
		"MOONCAKE_OFFLOAD_CLIENT_BUFFER_GC_TTL_MS", "MOONCAKE_OFFLOAD_USE_URING", "MOONCAKE_USE_URING", "MOONCAKE_OFFLOAD_FSDIR",
		"MOONCAKE_OFFLOAD_ENABLE_EVICTION"}, "", "the NVMe tier is the worker's own (a Pebble index and extent files under root_fs_dir), with no separate offload service"},
	{[]string{"MOONCAKE_OFFLOAD_TOTAL_SIZE_LIMIT_BYTES"}, "", "bound the NVMe tier with the worker's --ssd_capacity"},
	{[]string{"MOONCAKE_OFFLOAD_ENABLE_DISK_WATERMARK_EVICTION", "MOONCAKE_OFFLOAD_DISK_EVICTION_HIGH_WATERMARK_RATIO",
		"MOONCAKE_DISK_EVICTION_HIGH_WATERMARK_RATIO", "MOONCAKE_OFFLOAD_DISK_EVICTION_LOW_WATERMARK_RATIO",
		"MOONCAKE_DISK_EVICTION_LOW_WATERMARK_RATIO"}, "", "a full NVMe tier refuses new objects (NO_SPACE) rather than evicting persisted ones (docs/persistence.md)"},
	{[]string{"MOONCAKE_OFFLOAD_BUCKET_KEYS_LIMIT", "MOONCAKE_OFFLOAD_BUCKET_SIZE_LIMIT_BYTES", "MOONCAKE_OFFLOAD_BUCKET_MAX_TOTAL_SIZE",
		"MOONCAKE_BUCKET_MAX_TOTAL_SIZE", "MOONCAKE_OFFLOAD_BUCKET_MAX_PHYSICAL_BYTES", "MOONCAKE_OFFLOAD_BUCKET_DISK_SCAN_CACHE_MS",
		"MOONCAKE_OFFLOAD_BUCKET_EVICTION_POLICY", "MOONCAKE_BUCKET_EVICTION_POLICY"}, "", "the NVMe tier has no bucket backend: values are framed records in extent files"},
	{[]string{"MOONCAKE_OFFSET_EVICTION_POLICY", "MOONCAKE_OFFSET_HIGH_RATIO", "MOONCAKE_OFFSET_LOW_RATIO", "MOONCAKE_OFFSET_MAX_CAPACITY_NODES",
		"MOONCAKE_OFFSET_MAX_EVICT_PER_OFFLOAD", "MOONCAKE_OFFSET_PERSIST_MODE", "MOONCAKE_OFFSET_PERSIST_INTERVAL_SECONDS",
		"MOONCAKE_OFFSET_RECORD_CRC"}, "", "the NVMe tier has no offset-allocator backend; every record carries a checksum"},
	{[]string{"MOONCAKE_OSS_ENDPOINT", "MOONCAKE_OSS_BUCKET", "MOONCAKE_OSS_REGION", "MOONCAKE_OSS_ACCESS_KEY_ID", "MOONCAKE_OSS_ACCESS_KEY_SECRET",
		"MOONCAKE_OSS_SECURITY_TOKEN", "MOONCAKE_OSS_PATH_STYLE", "MOONCAKE_OSS_ANONYMOUS", "MOONCAKE_OSS_MAX_CONNECTIONS",
		"MOONCAKE_OSS_RECEIVE_BUFFER_SIZE", "MOONCAKE_OSS_UPLOAD_BUFFER_SIZE"}, "", "object storage (OSS) is not a tier here"},
	{[]string{"MOONCAKE_NVME_KV_DEVICE_PATH", "MOONCAKE_NVME_KV_NSID", "MOONCAKE_NVME_KV_QUEUE_DEPTH", "MOONCAKE_NVME_KV_RUNTIME_TRANSFER_LIMIT",
		"MOONCAKE_NVME_KV_TRANSPORT", "MOONCAKE_NVME_KV_TRANSFER_ALIGNMENT_BYTES", "MOONCAKE_NVME_KV_VALUE_BLOCK_UNIT_BYTES",
		"MOONCAKE_NVME_KV_PROTOCOL_MAX_VALUE_SIZE", "MOONCAKE_NVME_KV_READ_PLAN_BATCH_SIZE", "MOONCAKE_NVME_KV_MAX_IO_CONCURRENCY",
		"MOONCAKE_NVME_KV_IO_CONCURRENCY", "MOONCAKE_NVME_KV_BATCH_SUBMIT_CONCURRENCY", "MOONCAKE_NVME_KV_ROOT_SUBMIT_CONCURRENCY",
		"MOONCAKE_NVME_KV_PREPARE_CONCURRENCY"}, "", "the NVMe tier uses files under root_fs_dir, not NVMe KV devices"},
	{[]string{"MOONCAKE_ENABLE_DFS", "MOONCAKE_DFS_ENABLED"}, "", "DFS (3FS/NFS) is not a tier here"},
	{[]string{"MOONCAKE_SNAPSHOT_LOCAL_PATH", "MOONCAKE_AWS_REGION", "MOONCAKE_AWS_S3_ENDPOINT", "MOONCAKE_AWS_BUCKET_NAME", "MOONCAKE_AWS_ACCESS_KEY_ID",
		"MOONCAKE_AWS_SECRET_ACCESS_KEY", "MOONCAKE_AWS_USE_VIRTUAL_ADDRESSING", "MOONCAKE_AWS_USE_HTTPS",
		"MOONCAKE_AWS_REQUEST_CHECKSUM_CALCULATION", "MOONCAKE_AWS_RESPONSE_CHECKSUM_VALIDATION", "MOONCAKE_AWS_CONNECT_TIMEOUT_MS",
		"MOONCAKE_AWS_REQUEST_TIMEOUT_MS"}, "", "master snapshots are raft snapshots under --data_dir, not uploaded"},
}

// noteEnvNoEffect records one notice for each MOONCAKE_* variable without effect that is set.
func (fc *fileConfig) noteEnvNoEffect(getenv func(string) string) {
	for _, g := range mooncakeEnvVars {
		if g.ours != "" {
			continue
		}
		for _, n := range g.names {
			if strings.TrimSpace(getenv(n)) != "" {
				fc.note(false, "$%s: accepted, no effect here: %s", n, g.why)
			}
		}
	}
}

// mooncakeEnvDocs renders the docs/config.md table of the MOONCAKE_* variables.
func mooncakeEnvDocs() string {
	var b strings.Builder
	b.WriteString("| variable | here |\n|---|---|\n")
	for _, g := range mooncakeEnvVars {
		names := make([]string, len(g.names))
		for i, n := range g.names {
			names[i] = "`" + n + "`"
		}
		here := "accepted, no effect: " + g.why
		if g.ours != "" {
			here = "`" + g.ours + "`: " + g.why
		}
		fmt.Fprintf(&b, "| %s | %s |\n", strings.Join(names, ", "), here)
	}
	return b.String()
}

// parseMooncakeBool parses a boolean as Mooncake's Python package does: true/false, 1/0,
// yes/no, on/off, in any case.
func parseMooncakeBool(s string) (bool, error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "true", "1", "yes", "on":
		return true, nil
	case "false", "0", "no", "off":
		return false, nil
	}
	return false, fmt.Errorf("not a boolean: %q", s)
}
