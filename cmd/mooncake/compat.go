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
	"github.com/mooncake-go/mooncake/server/config"
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

// applyMooncake fills what the file does not set from Mooncake's MOONCAKE_* variables (the
// table's ApplyEnv), maps enable_ssd_offload and ssd_offload_path onto root_fs_dir, runs a
// non-TCP protocol over TCP with a warning, and records a notice for every key and variable
// without effect.
func (fc *fileConfig) applyMooncake(getenv func(string) string) error {
	envNoEffect, err := config.ApplyEnv(&fc.File, getenv)
	if err != nil {
		return err
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
	for _, v := range envNoEffect {
		fc.note(false, "$%s: accepted, no effect here: %s", v[0], v[1])
	}
	// fileNotices words these three itself, with their values.
	for _, kw := range fc.NoEffect("metadata_server", "device_name", "local_buffer_size") {
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
			s, err := resolveMooncakeMaster(fs, &f, e, true)
			if err != nil {
				return err
			}
			e.mooncakeLines = true
			e.fileNotices("master")
			if f.EnableHTTPMetadataServer {
				stop, err := startMetadataServer(e, net.JoinHostPort(f.HTTPMetadataServerHost, strconv.Itoa(f.HTTPMetadataServerPort)))
				if err != nil {
					return err
				}
				defer stop()
			}
			return runMaster(cmd.Context(), e, s)
		},
	}
	f.register(cmd.Flags(), false)
	return cmd
}

// resolveMooncakeMaster turns mooncake_master's flags into master settings. With mayRunAlone
// (mooncake_master) a master without --id, --raft_address, --peers and --join is a one-master
// cluster with its data under ./mooncake-data; without it (mooncake master) those stay required.
func resolveMooncakeMaster(fs *pflag.FlagSet, f *masterFlags, e *env, mayRunAlone bool) (masterSettings, error) {
	if f.ConfigPath != "" {
		if err := applyMasterConfigFile(fs, f.ConfigPath); err != nil {
			return masterSettings{}, err
		}
	}
	fc := e.file
	e.verbosity = f.Verbosity
	// Mooncake's --port is checked before it stands in for --rpc_port.
	if err := config.Check(config.KindMaster, "--", "port", f.Port); err != nil {
		return masterSettings{}, err
	}
	switch {
	case changed(fs, "rpc_port") && f.RPCPort == 0:
		f.RPCPort = f.Port // Mooncake's: 0 means --port
	case changed(fs, "port") && changed(fs, "rpc_port") && f.Port != f.RPCPort:
		fc.note(false, "both --port and --rpc_port are set: using --rpc_port %d", f.RPCPort)
	case changed(fs, "port"):
		f.RPCPort = f.Port
	}
	if f.DataDir == "" && mayRunAlone {
		f.DataDir = defaultStandaloneDir
	}
	if f.RPCInterface != "" {
		ip, err := rpcInterfaceAddr(f.RPCInterface, interfaceAddrs)
		if err != nil {
			return masterSettings{}, err
		}
		if changed(fs, "rpc_address") && f.RPCAddress != ip && f.RPCAddress != "0.0.0.0" {
			fc.note(false, "--rpc_interface %s overrides --rpc_address %s with %s", f.RPCInterface, f.RPCAddress, ip)
		}
		f.RPCAddress = ip
		_ = fs.Set("rpc_address", ip)
	}
	if f.RPCConnTimeoutSeconds > 0 && !changed(fs, "conn_idle_timeout") && fs.Lookup("conn_idle_timeout") != nil {
		f.Conns.IdleTimeout = time.Duration(f.RPCConnTimeoutSeconds) * time.Second
	}
	lone := mayRunAlone && !changed(fs, "id") && !changed(fs, "peers") && !changed(fs, "raft_address") && !changed(fs, "join")
	if lone && !changed(fs, "rpc_address") && !changed(fs, "local_hostname") && fc.LocalHostname == "" {
		f.RPCAddress = "0.0.0.0" // Mooncake's default: every interface
	}
	s, err := f.resolve(fs, fc, lone)
	if err != nil {
		return s, err
	}
	rpcHost, _, _ := net.SplitHostPort(s.RPCAddress)
	if lone {
		s.DataDir = f.DataDir
		if ip := net.ParseIP(rpcHost); ip != nil && ip.IsUnspecified() {
			// Raft must advertise a usable address; a lone master only talks to itself.
			s.RaftAddress = "127.0.0.1:0"
		}
	}
	if changed(fs, "metrics_host") {
		_, port, _ := net.SplitHostPort(s.MetricsAddress)
		s.MetricsAddress = net.JoinHostPort(f.MetricsHost, port)
	}
	if f.RootFSDir != "" {
		abs, err := filepath.Abs(f.RootFSDir)
		if err != nil {
			return s, fmt.Errorf("--root_fs_dir: %w", err)
		}
		s.RootFSDir = abs
	}
	s.NoSummary = !f.EnableMetricReporting
	if changed(fs, "put_start_discard_timeout_sec") && !changed(fs, "put_timeout") {
		s.PutTimeout = f.PutStartDiscardTimeout
	}
	noteNoEffect(fs, fc, config.KindMaster)
	if f.EnableHTTPMetadataServer {
		fc.note(false, "--enable_http_metadata_server: serving Mooncake's HTTP metadata store on %s:%d; this build needs none (raft replaces it)", f.HTTPMetadataServerHost, f.HTTPMetadataServerPort)
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

func newMooncakeClientCmd(e *env) *cobra.Command {
	var f workerFlags
	cmd := &cobra.Command{
		Use:   nameClient + " --master_server_address HOST:PORT [--host H] [--port P] [--global_segment_size \"4 GB\"] [--protocol tcp]",
		Short: "Run a worker with the flags of Mooncake's mooncake_client (it contributes --global_segment_size)",
		Args:  exactArgs(0, "no arguments"),
		RunE: func(cmd *cobra.Command, _ []string) error {
			fs := cmd.Flags()
			fc := e.file
			e.verbosity = f.Verbosity
			if err := config.Validate(config.KindMooncakeClient, nil, &f.Worker); err != nil {
				return err
			}
			if changed(fs, "host") && !changed(fs, "local_hostname") {
				if ip := net.ParseIP(f.Host); ip != nil && ip.IsUnspecified() {
					fc.note(false, "--host %s is not an address clients can reach; advertising %s (set --local_hostname)", f.Host, pick(fs, "local_hostname", f.LocalHostname, fc.LocalHostname, "127.0.0.1"))
				} else {
					f.LocalHostname = f.Host
					_ = fs.Set("local_hostname", f.Host)
				}
			}
			if changed(fs, "port") && !changed(fs, "worker_address") {
				f.WorkerAddress = net.JoinHostPort(pick(fs, "local_hostname", f.LocalHostname, fc.LocalHostname, "127.0.0.1"), strconv.Itoa(f.Port))
			}
			if changed(fs, "http_port") && !changed(fs, "metrics_port") {
				f.MetricsPort = f.HTTPPort
			}
			devices := fs.Lookup("device_names").Value.String()
			if devices != "" && fc.DeviceName == "" {
				fc.DeviceName = devices
			}
			s, err := f.resolve(fs, fc, false)
			if err != nil {
				return err
			}
			if !f.EnableHTTPServer {
				s.MetricsAddress = "" // Mooncake's --enable_http_server=false: no HTTP port
			}
			skip := []string{}
			if fc.devicesWarned {
				skip = append(skip, "device_names") // the protocol warning names them
			}
			noteNoEffect(fs, fc, config.KindMooncakeClient, skip...)
			e.mooncakeLines = true
			e.fileNotices("worker")
			s = inheritFromMaster(cmd.Context(), e, s)
			if f.EnableOffload && s.RootFSDir == "" {
				e.logger().Warn("--enable_offload: no root_fs_dir (none set, none from the master): the worker is DRAM only")
			}
			return runWorker(cmd.Context(), e, s)
		},
	}
	f.register(cmd.Flags(), false)
	// Mooncake's client flags beyond the worker's (with and without effect).
	config.Register(cmd.Flags(), config.KindMooncakeClient, nil, &f.Worker)
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
