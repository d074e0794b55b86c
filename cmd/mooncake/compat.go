package main

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"math"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/mooncake-go/mooncake/client"
	"github.com/mooncake-go/mooncake/internal/base"
)

// Mooncake's own command lines, config files and environment, so that a Mooncake user's
// scripts run unchanged (issue 12): the binary answers to Mooncake's binary names, takes
// Mooncake's flags (gflags spelling included), reads every key of Mooncake's client config and
// its MOONCAKE_* variables. What has no effect here is accepted with one line saying why.

// The names this binary answers to when invoked under them (a link) or as subcommands.
const (
	nameMaster       = "mooncake_master"
	nameClient       = "mooncake_client"
	nameMetadataHTTP = "mooncake_http_metadata_server"
)

var mooncakeNames = []string{nameMaster, nameClient, nameMetadataHTTP}

// binaryName is this binary's own name.
const binaryName = "mooncake"

// compatArgs turns an invocation under a Mooncake binary name into the matching subcommand
// (`mooncake_master --port 1` runs as `mooncake mooncake_master --port 1`) and rewrites
// gflags spellings the Mooncake commands' users type (`-port=1`, `-v=1`) into pflag's.
func compatArgs(argv []string) []string {
	if len(argv) == 0 {
		return argv
	}
	// `mooncake mooncake master ...`: the container image's entrypoint is this binary, so
	// `docker run IMAGE mooncake master ...` (the program named twice) means `mooncake master`.
	if len(argv) > 1 && argv[1] == binaryName {
		argv = append([]string{argv[0]}, argv[2:]...)
	}
	name := strings.TrimSuffix(filepath.Base(argv[0]), ".exe")
	if slices.Contains(mooncakeNames, name) {
		return append([]string{argv[0], name}, gflagsArgs(argv[1:])...)
	}
	if len(argv) > 1 && slices.Contains(mooncakeNames, argv[1]) {
		return append([]string{argv[0], argv[1]}, gflagsArgs(argv[2:])...)
	}
	return argv
}

// gflagsArgs rewrites gflags' single-dash long flags (-port=10001, -enable_ha) as pflag's
// double-dash ones; one-letter flags (-v=1) and values that start with a dash and a digit (a
// negative number) are left alone. Everything after "--" is left alone.
func gflagsArgs(args []string) []string {
	out := make([]string, 0, len(args))
	for i, a := range args {
		if a == "--" {
			return append(out, args[i:]...)
		}
		if len(a) > 2 && a[0] == '-' && a[1] != '-' && (a[1] < '0' || a[1] > '9') && a[1] != '.' {
			name, _, _ := strings.Cut(a[1:], "=")
			if len(name) > 1 {
				a = "-" + a
			}
		}
		out = append(out, a)
	}
	return out
}

// secondsDuration is a duration flag that takes a plain number as seconds, as Mooncake's
// --client_ttl does, and Go durations ("10s", "1m") too.
type secondsDuration time.Duration

func (d *secondsDuration) String() string { return time.Duration(*d).String() }
func (d *secondsDuration) Type() string   { return "duration" }
func (d *secondsDuration) Set(s string) error {
	if n, err := strconv.ParseFloat(s, 64); err == nil {
		*d = secondsDuration(time.Duration(n * float64(time.Second)))
		return nil
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		return fmt.Errorf("want seconds (10) or a duration (10s, 1m)")
	}
	*d = secondsDuration(v)
	return nil
}

// bareHost reports whether a is a host without a port ("0.0.0.0", "[::1]", "node1").
func bareHost(a string) bool {
	if _, _, err := net.SplitHostPort(a); err == nil {
		return false
	}
	return !strings.Contains(strings.Trim(a, "[]"), ":") || strings.HasPrefix(a, "[")
}

// notice is one line about the configuration, printed once at start by printNotices.
type notice struct {
	warn bool
	msg  string
}

// note records a notice once (the same message twice is printed once).
func (fc *fileConfig) note(warn bool, format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	if !slices.ContainsFunc(fc.notices, func(n notice) bool { return n.msg == msg }) {
		fc.notices = append(fc.notices, notice{warn: warn, msg: msg})
	}
}

// printNotices logs the notices: warnings and infos for servers, at debug for client
// commands (whose stderr the user reads as the command's output).
func (e *env) printNotices(cmd string) {
	if e.file == nil {
		return
	}
	log := e.logger()
	for _, n := range e.file.notices {
		level := slog.LevelInfo
		if n.warn {
			level = slog.LevelWarn
		}
		if cmd == "client" {
			level = slog.LevelDebug
		}
		log.Log(context.Background(), level, n.msg)
	}
	e.file.notices = nil
}

// mooncakeOnlyKeys are keys of Mooncake's client config (mooncake.json, SGLang's and vLLM's
// extra config) that have no effect here; each is accepted with a notice saying why.
type mooncakeOnlyKeys struct {
	TenantID               json.RawMessage `json:"tenant_id"`
	MasterMetricsPort      json.RawMessage `json:"master_metrics_port"`
	CheckServer            json.RawMessage `json:"check_server"`
	StandaloneStorage      json.RawMessage `json:"standalone_storage"`
	ClientServerAddress    json.RawMessage `json:"client_server_address"`
	PreferredSegment       json.RawMessage `json:"preferred_segment"`
	PreferAllocInSameNode  json.RawMessage `json:"prefer_alloc_in_same_node"`
	ReplicaNum             json.RawMessage `json:"replica_num"`
	TransferTimeout        json.RawMessage `json:"transfer_timeout"`
	EnableSSDPrefetch      json.RawMessage `json:"enable_ssd_prefetch"`
	PrefetchThreshold      json.RawMessage `json:"prefetch_threshold"`
	RDMADevices            json.RawMessage `json:"rdma_devices"`
	MasterServerAddrLegacy json.RawMessage `json:"master_server_addr"`
	// vLLM's MooncakeStoreConfig keys.
	Mode             json.RawMessage `json:"mode"`
	EnableOffload    json.RawMessage `json:"enable_offload"`
	DeviceNamePerGPU json.RawMessage `json:"device_name_per_gpu"`
	// Keys of Mooncake's current client config (MooncakeConfig, setup's keywords).
	EnableClientHTTPServer json.RawMessage `json:"enable_client_http_server"`
	ClientHTTPPort         json.RawMessage `json:"client_http_port"`
	IPCSocketPath          json.RawMessage `json:"ipc_socket_path"`
}

// noEffect lists the mooncakeOnlyKeys that are set, with why they do nothing here.
func (k *mooncakeOnlyKeys) noEffect() [][2]string {
	var out [][2]string
	add := func(v json.RawMessage, key, why string) {
		if len(v) > 0 {
			out = append(out, [2]string{key, why})
		}
	}
	add(k.TenantID, "tenant_id", "a worker holds every tenant's objects; a client's tenant is its setup's tenant_id")
	add(k.MasterMetricsPort, "master_metrics_port", "each master serves its metrics on its own --metrics_port")
	add(k.CheckServer, "check_server", "clients check the masters when they connect")
	add(k.StandaloneStorage, "standalone_storage", "the Go client talks to masters and workers directly (no separate client service)")
	add(k.ClientServerAddress, "client_server_address", "the Go client talks to masters and workers directly (no separate client service)")
	add(k.PreferredSegment, "preferred_segment", "placement picks the worker with the most free room; a put may name a preferred worker")
	add(k.PreferAllocInSameNode, "prefer_alloc_in_same_node", "placement picks the worker with the most free room; a put may name a preferred worker")
	add(k.ReplicaNum, "replica_num", "the replica count is set per put (--replicas, ReplicateConfig)")
	add(k.TransferTimeout, "transfer_timeout", "calls use the client's --timeout")
	add(k.EnableSSDPrefetch, "enable_ssd_prefetch", "a client setup option: is_exist(key, prefetch_to_memory=True) has the worker promote the object; workers bound it with --prefetch_budget")
	add(k.PrefetchThreshold, "prefetch_threshold", "workers promote objects read from NVMe back to DRAM on their own")
	add(k.RDMADevices, "rdma_devices", "this build moves bytes over TCP")
	add(k.MasterServerAddrLegacy, "master_server_addr", "use master_server_address")
	add(k.Mode, "mode", "the cluster's DRAM always comes from its workers (mooncake worker / mooncake_client), as in Mooncake's standalone-store mode")
	add(k.EnableOffload, "enable_offload", "a worker with root_fs_dir (or ssd_offload_path with enable_ssd_offload, or the master's --root_fs_dir) spills to NVMe on its own")
	add(k.DeviceNamePerGPU, "device_name_per_gpu", "this build moves bytes over TCP")
	add(k.EnableClientHTTPServer, "enable_client_http_server", "a client has no HTTP endpoint of its own; workers and masters serve /metrics and /health on --metrics_port")
	add(k.ClientHTTPPort, "client_http_port", "a client has no HTTP endpoint of its own; workers and masters serve /metrics and /health on --metrics_port")
	add(k.IPCSocketPath, "ipc_socket_path", "there is no separate client process to reach over a socket: clients talk to masters and workers directly")
	return out
}

// applyMooncake fills what the file does not set from Mooncake's MOONCAKE_* variables, maps
// enable_ssd_offload and ssd_offload_path onto root_fs_dir, runs a non-TCP protocol over TCP
// with a warning, and records a notice for every key without effect.
func (fc *fileConfig) applyMooncake(getenv func(string) string) error {
	envSet := func(name string) (string, bool) {
		v := strings.TrimSpace(getenv(name))
		return v, v != ""
	}
	if v, ok := envSet(envMaster); ok {
		m, err := parseAddressList(v)
		if err != nil {
			return fmt.Errorf("$%s: %w", envMaster, err)
		}
		fc.envMasters = m
	}
	if v, ok := envSet("MOONCAKE_LOCAL_HOSTNAME"); ok && fc.LocalHostname == "" {
		if h, _, err := net.SplitHostPort(v); err == nil {
			v = h // Mooncake accepts host:port; the port is the worker's own flag here
		}
		if strings.ContainsAny(v, "/ ") {
			return fmt.Errorf("%w: $MOONCAKE_LOCAL_HOSTNAME %q is not a host name", base.ErrInvalidParams, v)
		}
		fc.LocalHostname = v
	}
	if v, ok := envSet("MOONCAKE_GLOBAL_SEGMENT_SIZE"); ok && fc.GlobalSegmentSize == nil {
		b, err := base.ParseBytes(v)
		if err != nil || b <= 0 {
			return fmt.Errorf("%w: $MOONCAKE_GLOBAL_SEGMENT_SIZE %q: want a positive size", base.ErrInvalidParams, v)
		}
		fc.GlobalSegmentSize = &b
	}
	if v, ok := envSet("MOONCAKE_LOCAL_BUFFER_SIZE"); ok && fc.LocalBufferSize == nil {
		if b, err := base.ParseBytes(v); err == nil {
			fc.LocalBufferSize = &b
		}
	}
	if v, ok := envSet("MOONCAKE_PROTOCOL"); ok && fc.Protocol == "" {
		fc.Protocol = v
	}
	if v, ok := envSet("MOONCAKE_DEVICE"); ok && fc.DeviceName == "" {
		fc.DeviceName = v
	}
	if v, ok := envSet("MOONCAKE_TE_META_DATA_SERVER"); ok && len(fc.MetadataServer) == 0 {
		fc.MetadataServer, _ = json.Marshal(v)
	}
	if v, ok := envSet("MOONCAKE_TENANT_ID"); ok && len(fc.TenantID) == 0 {
		fc.TenantID, _ = json.Marshal(v)
	}
	// MOONCAKE_OFFLOAD_ENABLED is the current Python package's name, MOONCAKE_ENABLE_SSD_OFFLOAD
	// an older one.
	for _, name := range []string{"MOONCAKE_OFFLOAD_ENABLED", "MOONCAKE_ENABLE_SSD_OFFLOAD"} {
		if v, ok := envSet(name); ok && fc.EnableSSDOffload == nil {
			on, err := parseMooncakeBool(v)
			if err != nil {
				return fmt.Errorf("%w: $%s %q: want true or false", base.ErrInvalidParams, name, v)
			}
			fc.EnableSSDOffload = &on
		}
	}
	if v, ok := envSet("MOONCAKE_OFFLOAD_FILE_STORAGE_PATH"); ok && fc.SSDOffloadPath == "" {
		fc.SSDOffloadPath = v
	}

	switch {
	case fc.EnableSSDOffload != nil && *fc.EnableSSDOffload:
		switch {
		case fc.RootFSDir == "" && fc.SSDOffloadPath == "":
			return fmt.Errorf("%w: enable_ssd_offload needs ssd_offload_path (or root_fs_dir): the directory of the NVMe tier", base.ErrInvalidParams)
		case fc.RootFSDir == "":
			fc.RootFSDir = fc.SSDOffloadPath
			fc.note(false, "config: enable_ssd_offload: objects spill to the NVMe tier under ssd_offload_path %s (root_fs_dir)", fc.SSDOffloadPath)
		case fc.SSDOffloadPath != "" && fc.SSDOffloadPath != fc.RootFSDir:
			fc.note(false, "config: ssd_offload_path %s is ignored: root_fs_dir %s holds the NVMe tier", fc.SSDOffloadPath, fc.RootFSDir)
		}
	case fc.SSDOffloadPath != "":
		fc.note(false, "config: ssd_offload_path is ignored without enable_ssd_offload")
	}
	fc.Protocol = tcpOnly(fc, "protocol", fc.Protocol)
	fc.noteEnvNoEffect(getenv)
	for _, kw := range fc.noEffect() {
		fc.note(false, "config: %s has no effect here: %s", kw[0], kw[1])
	}
	return nil
}

// tcpOnly returns "tcp" for any protocol and records one warning when p asked for another
// (Mooncake's rdma, nvlink, ...): this build moves bytes over TCP only.
func tcpOnly(fc *fileConfig, what, p string) string {
	if p == "" || strings.EqualFold(p, "tcp") {
		return p
	}
	dev := ""
	if fc.DeviceName != "" {
		dev = fmt.Sprintf(" (devices %s unused)", fc.DeviceName)
		fc.devicesWarned = true
	}
	fc.note(true, "%s %q runs over TCP%s: this build moves bytes over TCP only; RDMA and other transports are not supported yet", what, p, dev)
	return "tcp"
}

// inheritFromMaster takes from the masters what Mooncake's master hands its clients: the
// root_fs_dir of a worker that set none of its own, and the DRAM watermarks (from
// --eviction_high_watermark_ratio and --eviction_ratio). A master that cannot be reached
// within a few seconds leaves the worker's own settings, with a warning.
func inheritFromMaster(ctx context.Context, e *env, s workerSettings) workerSettings {
	log := e.logger()
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	c, err := client.Connect(ctx, client.Config{MasterAddresses: s.MasterAddresses, ClusterID: s.ClusterID,
		ConnectWait: 5 * time.Second, Timeout: 10 * time.Second, Logger: log})
	var st client.Status
	if err == nil {
		st, err = c.Status(ctx)
		c.Close()
	}
	if err != nil {
		log.Warn("could not read the master's settings (root_fs_dir, eviction watermarks); the worker uses its own", "err", err)
		return s
	}
	if !s.rootFromUser && s.RootFSDir == "" && st.RootFSDir != "" {
		s.RootFSDir = st.RootFSDir
		log.Info("root_fs_dir from the master (the worker set none)", "root_fs_dir", s.RootFSDir)
	}
	if st.EvictionHighWatermarkRatio > 0 {
		s.HighWatermark, s.LowWatermark = watermarks(st.EvictionHighWatermarkRatio, st.EvictionRatio)
		log.Info("DRAM watermarks from the master's eviction flags", "high", s.HighWatermark, "low", s.LowWatermark)
	}
	return s
}

// watermarks turns Mooncake's eviction flags into DRAM watermarks: eviction starts past
// high and frees ratio of the arena.
func watermarks(high, ratio float64) (hi, lo float64) {
	return high, math.Round(max(0, high-ratio)*1e6) / 1e6 // 0.95-0.05 is 0.8999999999999999 in floats
}

// mooncakeMasterFlags are mooncake_master's flags beyond `mooncake master`'s that have an
// effect here; the others are registered from the table in compat_flags.go.
type mooncakeMasterFlags struct {
	port, verbosity, httpMetaPort, rpcConnTimeout int
	configPath, rootFSDir, metricsHost            string
	httpMetaHost, rpcInterface                    string
	enableMetricReporting, httpMeta               bool
	putStartDiscard                               secondsDuration
}

func (f *mooncakeMasterFlags) register(fs *pflag.FlagSet) {
	fs.IntVar(&f.port, "port", defaultRPCPort, "Mooncake's name for --rpc_port")
	fs.IntVarP(&f.verbosity, "v", "v", 0, "glog verbosity: 1 or more logs at debug level")
	fs.StringVar(&f.configPath, "config_path", "", "a master config file (JSON) with Mooncake's keys; flags given on the command line win")
	fs.StringVar(&f.rootFSDir, "root_fs_dir", "", "NVMe directory handed to workers that set none of their own")
	fs.StringVar(&f.metricsHost, "metrics_host", "", "host the metrics port binds (default: the RPC host)")
	fs.BoolVar(&f.enableMetricReporting, "enable_metric_reporting", true, "log the \"Master Metrics:\" line every 10 s")
	fs.BoolVar(&f.httpMeta, "enable_http_metadata_server", false, "also serve Mooncake's HTTP metadata store (not needed by this build)")
	fs.IntVar(&f.httpMetaPort, "http_metadata_server_port", 8080, "port of the HTTP metadata store")
	fs.StringVar(&f.httpMetaHost, "http_metadata_server_host", "0.0.0.0", "host of the HTTP metadata store")
	fs.Var(&f.putStartDiscard, "put_start_discard_timeout_sec", "Mooncake's name for --put_timeout (seconds)")
	fs.StringVar(&f.rpcInterface, "rpc_interface", "", "a network interface whose IPv4 address becomes --rpc_address (Mooncake's)")
	fs.IntVar(&f.rpcConnTimeout, "rpc_conn_timeout_seconds", 0, "above 0: Mooncake's name for --conn_idle_timeout, in seconds (0: ours)")
	registerNoEffect(fs, nameMaster)
}

// masterConfigKeys maps the keys of Mooncake's master config file to flag names.
var masterConfigKeys = map[string]string{"client_live_ttl_sec": "client_ttl"}

// applyMasterConfigFile sets, from a Mooncake master config file, every flag not given on the
// command line. Unknown keys are errors.
func applyMasterConfigFile(fs *pflag.FlagSet, path string) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("--config_path: %w", err)
	}
	var kv map[string]json.RawMessage
	if err := json.Unmarshal(data, &kv); err != nil {
		return fmt.Errorf("%w: --config_path %s: want a JSON object of Mooncake's master keys: %v", base.ErrInvalidParams, path, err)
	}
	keys := make([]string, 0, len(kv))
	for k := range kv {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		name := k
		if n, ok := masterConfigKeys[k]; ok {
			name = n
		}
		fl := fs.Lookup(name)
		if fl == nil || name == "config_path" {
			return fmt.Errorf("%w: --config_path %s: unknown key %q", base.ErrInvalidParams, path, k)
		}
		if fl.Changed {
			continue // the command line wins
		}
		var v any
		if err := json.Unmarshal(kv[k], &v); err != nil {
			return fmt.Errorf("%w: --config_path %s: key %q: %v", base.ErrInvalidParams, path, k, err)
		}
		s := fmt.Sprint(v)
		if f, ok := v.(float64); ok {
			s = strconv.FormatFloat(f, 'f', -1, 64)
		}
		if err := fs.Set(name, s); err != nil {
			return fmt.Errorf("%w: --config_path %s: key %q: %v", base.ErrInvalidParams, path, k, err)
		}
	}
	return nil
}

func newMooncakeMasterCmd(e *env) *cobra.Command {
	var f masterFlags
	var mf mooncakeMasterFlags
	cmd := &cobra.Command{
		Use:   nameMaster + " [--port 50051] [--root_fs_dir DIR] [--cluster_id ID] [Mooncake's other flags]",
		Short: "Run a master with Mooncake's flags; with no --id/--peers a one-master cluster with data under ./mooncake-data",
		Long: `mooncake_master runs a master as Mooncake's binary of that name does: Mooncake's flags
(gflags spelling too: -port=50051, -v=1), data under --data_dir (default ./mooncake-data).
Without --id, --raft_address and --peers it is a one-master cluster. For HA start three with
--id, --raft_address and --peers (raft replaces etcd). Flags of Mooncake's master that have no
effect here are accepted with one line saying why.`,
		Args: exactArgs(0, "no arguments"),
		RunE: func(cmd *cobra.Command, _ []string) error {
			fs := cmd.Flags()
			s, err := resolveMooncakeMaster(fs, &f, &mf, e, true)
			if err != nil {
				return err
			}
			e.mooncakeLines = true
			e.fileNotices("master")
			if mf.httpMeta {
				stop, err := startMetadataServer(e, net.JoinHostPort(mf.httpMetaHost, strconv.Itoa(mf.httpMetaPort)))
				if err != nil {
					return err
				}
				defer stop()
			}
			return runMaster(cmd.Context(), e, s)
		},
	}
	f.register(cmd.Flags(), false)
	mf.register(cmd.Flags())
	return cmd
}

// resolveMooncakeMaster turns mooncake_master's flags into master settings. With mayRunAlone
// (mooncake_master) a master without --id, --raft_address, --peers and --join is a one-master
// cluster with its data under ./mooncake-data; without it (mooncake master) those stay required.
func resolveMooncakeMaster(fs *pflag.FlagSet, f *masterFlags, mf *mooncakeMasterFlags, e *env, mayRunAlone bool) (masterSettings, error) {
	if mf.configPath != "" {
		if err := applyMasterConfigFile(fs, mf.configPath); err != nil {
			return masterSettings{}, err
		}
	}
	fc := e.file
	e.verbosity = mf.verbosity
	if err := checkPort("--port", mf.port, false); err != nil {
		return masterSettings{}, err
	}
	switch {
	case changed(fs, "rpc_port") && f.rpcPort == 0:
		f.rpcPort = mf.port // Mooncake's: 0 means --port
	case changed(fs, "port") && changed(fs, "rpc_port") && mf.port != f.rpcPort:
		fc.note(false, "both --port and --rpc_port are set: using --rpc_port %d", f.rpcPort)
	case changed(fs, "port"):
		f.rpcPort = mf.port
	}
	if f.dataDir == "" && mayRunAlone {
		f.dataDir = defaultStandaloneDir
	}
	if mf.rpcInterface != "" {
		ip, err := rpcInterfaceAddr(mf.rpcInterface, interfaceAddrs)
		if err != nil {
			return masterSettings{}, err
		}
		if changed(fs, "rpc_address") && f.rpcAddress != ip && f.rpcAddress != "0.0.0.0" {
			fc.note(false, "--rpc_interface %s overrides --rpc_address %s with %s", mf.rpcInterface, f.rpcAddress, ip)
		}
		f.rpcAddress = ip
		_ = fs.Set("rpc_address", ip)
	}
	switch {
	case mf.rpcConnTimeout < 0:
		return masterSettings{}, fmt.Errorf("%w: --rpc_conn_timeout_seconds must not be negative", base.ErrInvalidParams)
	case mf.rpcConnTimeout > 0 && !changed(fs, "conn_idle_timeout") && fs.Lookup("conn_idle_timeout") != nil:
		f.conns.idle = time.Duration(mf.rpcConnTimeout) * time.Second
	}
	lone := mayRunAlone && !changed(fs, "id") && !changed(fs, "peers") && !changed(fs, "raft_address") && !changed(fs, "join")
	if lone && !changed(fs, "rpc_address") && !changed(fs, "local_hostname") && fc.LocalHostname == "" {
		f.rpcAddress = "0.0.0.0" // Mooncake's default: every interface
	}
	s, err := f.resolve(fs, fc, lone)
	if err != nil {
		return s, err
	}
	rpcHost, _, _ := net.SplitHostPort(s.RPCAddress)
	if lone {
		s.DataDir = f.dataDir
		if ip := net.ParseIP(rpcHost); ip != nil && ip.IsUnspecified() {
			// Raft must advertise a usable address; a lone master only talks to itself.
			s.RaftAddress = "127.0.0.1:0"
		}
	}
	if changed(fs, "metrics_host") {
		_, port, _ := net.SplitHostPort(s.MetricsAddress)
		s.MetricsAddress = net.JoinHostPort(mf.metricsHost, port)
	}
	if mf.rootFSDir != "" {
		abs, err := filepath.Abs(mf.rootFSDir)
		if err != nil {
			return s, fmt.Errorf("--root_fs_dir: %w", err)
		}
		s.RootFSDir = abs
	}
	s.NoSummary = !mf.enableMetricReporting
	if changed(fs, "put_start_discard_timeout_sec") && !changed(fs, "put_timeout") {
		if mf.putStartDiscard <= 0 {
			return s, fmt.Errorf("%w: --put_start_discard_timeout_sec must be positive", base.ErrInvalidParams)
		}
		s.PutTimeout = time.Duration(mf.putStartDiscard)
	}
	noteNoEffect(fs, fc, nameMaster)
	if mf.httpMeta {
		fc.note(false, "--enable_http_metadata_server: serving Mooncake's HTTP metadata store on %s:%d; this build needs none (raft replaces it)", mf.httpMetaHost, mf.httpMetaPort)
	}
	return s, nil
}

// printMooncakeMasterLines prints the lines Mooncake's master prints once it serves, which
// scripts wait for.
func printMooncakeMasterLines(e *env, m interface {
	Addr() string
	MetricsAddr() string
}) {
	_, port, _ := net.SplitHostPort(m.Addr())
	fmt.Fprintf(e.stdout, "Master service started on port %s\n", port)
	if addr := m.MetricsAddr(); addr != "" {
		_, mport, _ := net.SplitHostPort(addr)
		fmt.Fprintf(e.stdout, "Master metrics server started on port %s\n", mport)
	}
}

// mooncakeClientFlags are mooncake_client's flags beyond `mooncake worker`'s that have an
// effect here; the others are registered from the table in compat_flags.go.
type mooncakeClientFlags struct {
	host                      string
	port, verbosity, httpPort int
	enableOffload, enableHTTP bool
}

func newMooncakeClientCmd(e *env) *cobra.Command {
	var f workerFlags
	var cf mooncakeClientFlags
	cmd := &cobra.Command{
		Use:   nameClient + " --master_server_address HOST:PORT [--host H] [--port P] [--global_segment_size \"4 GB\"] [--protocol tcp]",
		Short: "Run a worker with the flags of Mooncake's mooncake_client (it contributes --global_segment_size)",
		Args:  exactArgs(0, "no arguments"),
		RunE: func(cmd *cobra.Command, _ []string) error {
			fs := cmd.Flags()
			fc := e.file
			e.verbosity = cf.verbosity
			if changed(fs, "host") && !changed(fs, "local_hostname") {
				if ip := net.ParseIP(cf.host); ip != nil && ip.IsUnspecified() {
					fc.note(false, "--host %s is not an address clients can reach; advertising %s (set --local_hostname)", cf.host, pick(fs, "local_hostname", f.localHostname, fc.LocalHostname, "127.0.0.1"))
				} else {
					f.localHostname = cf.host
					_ = fs.Set("local_hostname", cf.host)
				}
			}
			if changed(fs, "port") && !changed(fs, "worker_address") {
				if err := checkPort("--port", cf.port, true); err != nil {
					return err
				}
				f.address = net.JoinHostPort(pick(fs, "local_hostname", f.localHostname, fc.LocalHostname, "127.0.0.1"), strconv.Itoa(cf.port))
			}
			if changed(fs, "http_port") && !changed(fs, "metrics_port") {
				if err := checkPort("--http_port", cf.httpPort, true); err != nil {
					return err
				}
				f.metricsPort = cf.httpPort
			}
			devices := fs.Lookup("device_names").Value.String()
			if devices != "" && fc.DeviceName == "" {
				fc.DeviceName = devices
			}
			s, err := f.resolve(fs, fc, false)
			if err != nil {
				return err
			}
			if !cf.enableHTTP {
				s.MetricsAddress = "" // Mooncake's --enable_http_server=false: no HTTP port
			}
			skip := []string{}
			if fc.devicesWarned {
				skip = append(skip, "device_names") // the protocol warning names them
			}
			noteNoEffect(fs, fc, nameClient, skip...)
			e.mooncakeLines = true
			e.fileNotices("worker")
			s = inheritFromMaster(cmd.Context(), e, s)
			if cf.enableOffload && s.RootFSDir == "" {
				e.logger().Warn("--enable_offload: no root_fs_dir (none set, none from the master): the worker is DRAM only")
			}
			return runWorker(cmd.Context(), e, s)
		},
	}
	f.register(cmd.Flags(), false)
	fs := cmd.Flags()
	fs.StringVar(&cf.host, "host", "", "Mooncake's name for --local_hostname")
	fs.IntVar(&cf.port, "port", 0, "Mooncake's client port: the worker's data port here (--worker_address)")
	fs.BoolVar(&cf.enableOffload, "enable_offload", false, "use an NVMe tier: root_fs_dir from the flag, the config file or the master")
	fs.IntVarP(&cf.verbosity, "v", "v", 0, "glog verbosity: 1 or more logs at debug level")
	fs.BoolVar(&cf.enableHTTP, "enable_http_server", true, "serve /metrics and /health (false: no HTTP port)")
	fs.IntVar(&cf.httpPort, "http_port", 0, "Mooncake's name for --metrics_port")
	registerNoEffect(fs, nameClient)
	return cmd
}

func newInstallLinksCmd(e *env) *cobra.Command {
	return &cobra.Command{
		Use:   "install-links DIR",
		Short: "Create links named mooncake_master, mooncake_client and mooncake_http_metadata_server in DIR to this binary",
		Args:  exactArgs(1, "DIR"),
		RunE: func(_ *cobra.Command, args []string) error {
			self, err := os.Executable()
			if err != nil {
				return err
			}
			if self, err = filepath.EvalSymlinks(self); err != nil {
				return err
			}
			for _, n := range mooncakeNames {
				link := filepath.Join(args[0], n)
				if cur, err := os.Readlink(link); err == nil && cur == self {
					continue
				}
				if _, err := os.Lstat(link); err == nil {
					if err := os.Remove(link); err != nil {
						return fmt.Errorf("install-links: %w", err)
					}
				}
				if err := os.Symlink(self, link); err != nil {
					return fmt.Errorf("install-links: %w", err)
				}
				fmt.Fprintf(e.stdout, "%s -> %s\n", link, self)
			}
			return nil
		},
	}
}
