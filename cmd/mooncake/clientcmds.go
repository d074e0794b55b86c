package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/mooncake-go/mooncake/client"
	"github.com/mooncake-go/mooncake/internal/base"
)

// maxStdinValue bounds a value read from standard input (its size is not known in advance, so
// it is buffered in memory). Use a file for larger values.
const maxStdinValue = 4 << 30

// clientFlags are the flags every client command takes.
type clientFlags struct {
	masters, clusterID string
	timeout            time.Duration
	dialTimeout        time.Duration
	noVerify           bool
	sharedMemory       bool
}

func (f *clientFlags) register(fs *pflag.FlagSet) {
	fs.StringVar(&f.masters, "master_server_address", "", "the masters, host:port,host:port (default $"+envMaster+", else the config file's, else "+client.DefaultMasterAddress+")")
	fs.StringVar(&f.clusterID, "cluster_id", "", "cluster id (default: the config file's, else "+base.DefaultClusterID+")")
	fs.DurationVar(&f.timeout, "timeout", 30*time.Second, "time limit of each operation")
	fs.DurationVar(&f.dialTimeout, "dial_timeout", 2*time.Second, "time limit to reach a master or worker")
	fs.BoolVar(&f.noVerify, "skip_checksum_verify", false, "do not check objects read against their checksum (saves ~100 µs of CPU per MiB)")
	fs.BoolVar(&f.sharedMemory, "shared_memory", true, "read from and put to workers on this host through shared memory (false: always over TCP)")
}

// config resolves the client configuration: flag, then $MOONCAKE_MASTER, then the config
// file, then 127.0.0.1:50051.
func (f *clientFlags) config(fs *pflag.FlagSet, e *env) (client.Config, error) {
	cfg := client.Config{
		ClusterID:           pick(fs, "cluster_id", f.clusterID, e.file.ClusterID, base.DefaultClusterID),
		Protocol:            e.file.Protocol,
		Timeout:             f.timeout,
		DialTimeout:         f.dialTimeout,
		SkipChecksumVerify:  f.noVerify,
		DisableSharedMemory: !f.sharedMemory,
		Logger:              e.logger(),
	}
	switch {
	case changed(fs, "master_server_address"):
		m, err := parseAddressList(f.masters)
		if err != nil {
			return cfg, fmt.Errorf("--master_server_address: %w", err)
		}
		cfg.MasterAddresses = m
	case e.getenv(envMaster) != "":
		m, err := parseAddressList(e.getenv(envMaster))
		if err != nil {
			return cfg, fmt.Errorf("$%s: %w", envMaster, err)
		}
		cfg.MasterAddresses = m
	case len(e.file.MasterServerAddress) > 0:
		cfg.MasterAddresses = e.file.MasterServerAddress
	default:
		cfg.MasterAddresses = []string{client.DefaultMasterAddress}
	}
	if f.timeout <= 0 || f.dialTimeout <= 0 {
		return cfg, fmt.Errorf("%w: --timeout and --dial_timeout must be positive", base.ErrInvalidParams)
	}
	e.fileNotices("client")
	cfg.Logger.Debug("client config", "masters", strings.Join(cfg.MasterAddresses, ","), "cluster_id", cfg.ClusterID,
		"protocol", cfg.Protocol, "timeout", cfg.Timeout, "dial_timeout", cfg.DialTimeout)
	return cfg, nil
}

// connect resolves the configuration and connects.
func (f *clientFlags) connect(cmd *cobra.Command, e *env) (*client.Client, error) {
	cfg, err := f.config(cmd.Flags(), e)
	if err != nil {
		return nil, err
	}
	return client.Connect(cmd.Context(), cfg)
}

func validateKeyArg(key string) error {
	if err := base.ValidateKey(key); err != nil {
		return usageError{err}
	}
	return nil
}

func newPutCmd(e *env) *cobra.Command {
	var (
		f           clientFlags
		replicas    int
		persistence string
		preferred   string
		softPin     time.Duration
		hardPin     bool
		upsert      bool
		tf          tokenFlags
	)
	cmd := &cobra.Command{
		Use:   "put [--replicas N] [--tokens N --model NAME] KEY FILE",
		Short: "Store FILE (- for standard input) under KEY",
		Args:  exactArgs(2, "KEY FILE"),
		RunE: func(cmd *cobra.Command, args []string) error {
			key, path := args[0], args[1]
			if err := validateKeyArg(key); err != nil {
				return err
			}
			p, err := base.ParsePersistence(persistence)
			if err != nil {
				return usageError{fmt.Errorf("--persistence: %w", err)}
			}
			if replicas < 1 || replicas > 255 {
				return usagef("--replicas must be 1 to 255, got %d", replicas)
			}
			rc := client.ReplicateConfig{Replicas: replicas, Persistence: p, PreferredWorker: base.WorkerID(preferred),
				SoftPinTTL: softPin, HardPin: hardPin, Upsert: upsert}
			if err := tf.apply(&rc); err != nil {
				return err
			}
			// Open the input before connecting, so a missing file is reported as such.
			var (
				r    io.Reader
				size int64
			)
			if path == "-" {
				data, err := io.ReadAll(io.LimitReader(e.stdin, maxStdinValue+1))
				if err != nil {
					return fmt.Errorf("read standard input: %w", err)
				}
				if len(data) > maxStdinValue {
					return fmt.Errorf("%w: standard input is over %s; give a file instead", base.ErrTooLarge, base.Bytes(maxStdinValue))
				}
				r, size = bytes.NewReader(data), int64(len(data))
			} else {
				fh, err := os.Open(path)
				if err != nil {
					return err
				}
				defer fh.Close()
				st, err := fh.Stat()
				if err != nil {
					return err
				}
				if !st.Mode().IsRegular() {
					return usagef("%s is not a regular file", path)
				}
				r, size = bufio.NewReaderSize(fh, 1<<20), st.Size()
			}
			c, err := f.connect(cmd, e)
			if err != nil {
				return err
			}
			defer c.Close()
			if err := c.PutFrom(cmd.Context(), key, r, size, rc); err != nil {
				return err // the client's errors name the key
			}
			fmt.Fprintf(e.stderr, "put %s (%s, %d replica(s))\n", key, base.Bytes(size), replicas)
			return nil
		},
	}
	f.register(cmd.Flags())
	fl := cmd.Flags()
	fl.IntVar(&replicas, "replicas", 1, "copies on distinct workers")
	fl.StringVar(&persistence, "persistence", "", "cache, spill or durable (default: the worker's mode)")
	fl.StringVar(&preferred, "preferred_worker", "", "worker id that should hold the first replica")
	fl.DurationVar(&softPin, "soft_pin_ttl", 0, "keep the object from eviction for this long")
	fl.BoolVar(&hardPin, "hard_pin", false, "keep the object from eviction until removed")
	fl.BoolVar(&upsert, "upsert", false, "replace an existing object instead of failing")
	tf.register(fl)
	return cmd
}

func newGetCmd(e *env) *cobra.Command {
	var (
		f   clientFlags
		out string
	)
	cmd := &cobra.Command{
		Use:   "get KEY [-o FILE]",
		Short: "Print the object stored under KEY (or write it to FILE)",
		Args:  exactArgs(1, "KEY"),
		RunE: func(cmd *cobra.Command, args []string) error {
			key := args[0]
			if err := validateKeyArg(key); err != nil {
				return err
			}
			c, err := f.connect(cmd, e)
			if err != nil {
				return err
			}
			defer c.Close()
			data, err := c.Get(cmd.Context(), key)
			if err != nil {
				return err
			}
			if out == "" || out == "-" {
				_, err := e.stdout.Write(data)
				return err
			}
			return writeFileAtomic(out, data)
		},
	}
	f.register(cmd.Flags())
	cmd.Flags().StringVarP(&out, "output", "o", "", "write to FILE instead of standard output")
	return cmd
}

// writeFileAtomic writes data to a temporary file beside path and renames it into place, so a
// failed get never leaves a partial file under the name asked for.
func writeFileAtomic(path string, data []byte) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp*")
	if err != nil {
		return err
	}
	_, err = tmp.Write(data)
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), path)
	}
	if err != nil {
		os.Remove(tmp.Name())
	}
	return err
}

func newRmCmd(e *env) *cobra.Command {
	var (
		f     clientFlags
		re    string
		all   bool
		quiet bool
	)
	cmd := &cobra.Command{
		Use:   "rm KEY | rm --regex RE | rm --all",
		Short: "Remove one object, the objects whose key matches RE, or every object",
		RunE: func(cmd *cobra.Command, args []string) error {
			modes := len(args)
			if changed(cmd.Flags(), "regex") {
				modes++
			}
			if all {
				modes++
			}
			if modes != 1 || len(args) > 1 {
				return usagef("rm: give exactly one of KEY, --regex RE or --all")
			}
			if len(args) == 1 {
				if err := validateKeyArg(args[0]); err != nil {
					return err
				}
			}
			if changed(cmd.Flags(), "regex") {
				if re == "" {
					return usagef("rm: --regex is empty (use --all to remove everything)")
				}
				if _, err := regexp.Compile(re); err != nil {
					return usagef("rm: --regex: %v", err)
				}
			}
			c, err := f.connect(cmd, e)
			if err != nil {
				return err
			}
			defer c.Close()
			var n int64
			switch {
			case len(args) == 1:
				if err := c.Remove(cmd.Context(), args[0]); err != nil {
					return err
				}
				n = 1
			case all:
				if n, err = c.RemoveAll(cmd.Context()); err != nil {
					return err
				}
			default:
				if n, err = c.RemoveByRegex(cmd.Context(), re); err != nil {
					return err
				}
			}
			if !quiet {
				fmt.Fprintf(e.stdout, "removed %d object(s)\n", n)
			}
			return nil
		},
	}
	f.register(cmd.Flags())
	cmd.Flags().StringVar(&re, "regex", "", "remove the objects whose key matches this RE2 regular expression")
	cmd.Flags().BoolVar(&all, "all", false, "remove every object")
	cmd.Flags().BoolVarP(&quiet, "quiet", "q", false, "print nothing on success")
	return cmd
}

func newLsCmd(e *env) *cobra.Command {
	var (
		f      clientFlags
		prefix string
		asJSON bool
	)
	cmd := &cobra.Command{
		Use:   "ls [--prefix P]",
		Short: "List keys (with their sizes)",
		Args:  exactArgs(0, "no arguments (use --prefix)"),
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := f.connect(cmd, e)
			if err != nil {
				return err
			}
			defer c.Close()
			keys, err := c.List(cmd.Context(), prefix)
			if err != nil {
				return err
			}
			if asJSON {
				type item struct {
					Key  string `json:"key"`
					Size int64  `json:"size"`
				}
				items := make([]item, len(keys))
				for i, k := range keys {
					items[i] = item{k.Key, k.Size}
				}
				enc := json.NewEncoder(e.stdout)
				return enc.Encode(items)
			}
			w := bufio.NewWriter(e.stdout)
			for _, k := range keys {
				fmt.Fprintf(w, "%d\t%s\n", k.Size, k.Key)
			}
			return w.Flush()
		},
	}
	f.register(cmd.Flags())
	cmd.Flags().StringVar(&prefix, "prefix", "", "list only keys starting with P")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print a JSON list of {key, size}")
	return cmd
}

func newStatusCmd(e *env) *cobra.Command {
	var (
		f      clientFlags
		asJSON bool
	)
	cmd := &cobra.Command{
		Use:   "status [--json]",
		Short: "Show the leader, masters, workers (used/capacity per tier), keys and bytes",
		Args:  exactArgs(0, "no arguments"),
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := f.connect(cmd, e)
			if err != nil {
				return err
			}
			defer c.Close()
			st, err := c.Status(cmd.Context())
			if err != nil {
				return err
			}
			if asJSON {
				var buf bytes.Buffer
				if err := json.Indent(&buf, st.Raw, "", "  "); err != nil {
					return fmt.Errorf("status: the master sent bad JSON: %w", err)
				}
				buf.WriteByte('\n')
				_, err := e.stdout.Write(buf.Bytes())
				return err
			}
			return printStatus(e.stdout, st)
		},
	}
	f.register(cmd.Flags())
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the master's status JSON (top-level \"leader\" is the leader's id)")
	return cmd
}

func printStatus(out io.Writer, st client.Status) error {
	w := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	leader := st.Leader
	if leader == "" {
		leader = "(none)"
	}
	fmt.Fprintf(w, "cluster\t%s\n", st.ClusterID)
	fmt.Fprintf(w, "leader\t%s %s\n", leader, st.LeaderAddress)
	fmt.Fprintf(w, "keys\t%d (soft-pinned %d)\n", st.Keys, st.SoftPinnedKeys)
	fmt.Fprintf(w, "bytes\t%s (replicas %s, DRAM capacity %s)\n", base.Bytes(st.Bytes), base.Bytes(st.ReplicaBytes), base.Bytes(st.CapacityBytes))
	printRepair(w, st)
	fmt.Fprintln(w)
	writeMasters(w, st.Masters)
	fmt.Fprintf(w, "\nWORKER\tADDRESS\tSTATE\tOBJECTS\tDRAM USED / CAPACITY (OBJECTS)\tNVME USED / CAPACITY (OBJECTS)\n")
	for _, wk := range st.Workers {
		nvme := "-"
		if wk.NVMeCapacityBytes > 0 {
			nvme = fmt.Sprintf("%s / %s (%d)", base.Bytes(wk.NVMeUsedBytes), base.Bytes(wk.NVMeCapacityBytes), wk.NVMeObjects)
		}
		fmt.Fprintf(w, "%s\t%s\t%s\t%d\t%s / %s (%d)\t%s\n", wk.ID, wk.Address, workerState(wk), wk.Objects,
			base.Bytes(wk.DRAMUsedBytes), base.Bytes(wk.DRAMCapacityBytes), wk.DRAMObjects, nvme)
	}
	if !st.UsageReported {
		fmt.Fprintf(w, "\n(usage per worker is known to the leader only; this answer came from %s)\n", st.Self)
	}
	if err := w.Flush(); err != nil {
		return err
	}
	if len(st.Tenants) == 0 && st.TenantDefault == nil {
		return nil
	}
	fmt.Fprintln(out)
	return printTenants(out, st.Tenants, st.TenantDefault)
}
