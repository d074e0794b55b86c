package main

import (
	"fmt"
	"net"
	"strings"

	"github.com/spf13/pflag"

	"github.com/mooncake-go/mooncake/internal/base"
	"github.com/mooncake-go/mooncake/server/config"
)

// noteNoEffect records one notice for each of Mooncake's flags without effect (of the table,
// server/config) that the command kind was given with a value other than Mooncake's
// default: "accepted, no effect here: <why>". skip names flags whose notice the caller
// words itself.
func noteNoEffect(fs *pflag.FlagSet, fc *fileConfig, kind config.Kind, skip ...string) {
	for _, line := range config.NoEffect(fs, kind, skip...) {
		fc.note(false, "%s", line)
	}
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
	{[]string{"MOONCAKE_TENANT_ID"}, "tenant_id", "read, then noted as without effect (tenants are not separated yet)"},
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
