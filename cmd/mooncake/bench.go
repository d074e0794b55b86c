package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"regexp"
	"runtime/pprof"
	"slices"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/mooncake-go/mooncake/benchmarks"
	"github.com/mooncake-go/mooncake/client"
	"github.com/mooncake-go/mooncake/internal/base"
	"github.com/mooncake-go/mooncake/server/config"
)

func newBenchCmd(e *env) *cobra.Command {
	var (
		f          clientFlags
		op         string
		size       = base.Bytes(1 << 20)
		count      int
		objects    int
		batch      int
		cpuProfile string
		workload   string
		bf         benchFlags
		kf         kvBenchFlags
		trf        traceBenchFlags
	)
	cmd := &cobra.Command{
		Use:   "bench --op put|get --size 1MiB --count N --concurrency C [--baseline] | bench --workload kvcache --model config.json | bench --workload trace --trace FILE --block_bytes 64KiB",
		Short: "Measure put or get throughput and latency (and raw loopback TCP with --baseline), a KVCache workload, or replay a request trace",
		Long: `bench measures the store through the Go client. The objects workload (the default) runs
--count puts or gets of --size bytes; --workload kvcache stores and loads a model's KV-cache
chunks for prompts with shared prefixes, as a serving fleet does; --workload trace replays a
request trace of Mooncake's (FAST'25) and sets its token hit ratio beside an LRU cache of
the store's capacity (docs/benchmarks.md).`,
		Args: exactArgs(0, "no arguments"),
		RunE: func(cmd *cobra.Command, _ []string) error {
			switch workload {
			case benchObjects:
				if err := refuseFlags(cmd.Flags(), "--workload objects", slices.Concat(kvOnlyFlags, traceOnlyFlags)...); err != nil {
					return err
				}
			case benchKVCache, benchTrace:
				refuse := slices.Concat(objectsOnlyFlags, traceOnlyFlags)
				if workload == benchTrace {
					// --dtype and --tp apply to --model config.json, as in kvcache.
					kvOnly := slices.DeleteFunc(slices.Clone(kvOnlyFlags), func(n string) bool { return n == "dtype" || n == "tp" })
					refuse = slices.Concat(objectsOnlyFlags, kvOnly)
				}
				if err := refuseFlags(cmd.Flags(), "--workload "+workload, refuse...); err != nil {
					return err
				}
				if cpuProfile != "" {
					stop, err := startCPUProfile(cpuProfile)
					if err != nil {
						return err
					}
					defer stop()
				}
				if workload == benchTrace {
					return runTraceBench(cmd, e, &f, &bf, &kf, &trf)
				}
				return runKVBench(cmd, e, &f, &bf, &kf)
			default:
				return usagef("--workload: unknown workload %q (want %s, %s or %s)", workload, benchObjects, benchKVCache, benchTrace)
			}
			concurrency, replicas, baseline, keep, rounds, tf := bf.concurrency, bf.replicas, bf.baseline, bf.keep, bf.rounds, bf.tf
			o, err := benchmarks.ParseOp(op)
			if err != nil {
				return usageError{err}
			}
			w := benchmarks.Workload{Op: o, Size: int64(size), Count: count, Concurrency: concurrency, Objects: objects, Batch: batch}
			if err := w.Validate(); err != nil {
				return usageError{err}
			}
			rc, err := bf.check()
			if err != nil {
				return err
			}
			if err := tf.apply(&rc); err != nil {
				return err
			}
			ctx := cmd.Context()
			if cpuProfile != "" {
				stop, err := startCPUProfile(cpuProfile)
				if err != nil {
					return err
				}
				defer stop()
			}
			c, err := f.connect(cmd, e)
			if err != nil {
				return err
			}
			defer c.Close()
			store := benchmarks.ClientStore{C: c, RC: rc}
			// A put on a worker's host goes through shared memory (a staging area): with
			// --baseline each round also times the same puts over TCP, from a client with
			// shared memory off, so the run compares raw TCP, our put, and our TCP put.
			var tcpStore *benchmarks.ClientStore
			if o == benchmarks.OpPut && baseline && f.sharedMemory {
				cfg, err := f.config(cmd.Flags(), e)
				if err != nil {
					return err
				}
				cfg.DisableSharedMemory = true
				tc, err := client.Connect(ctx, cfg)
				if err != nil {
					return err
				}
				defer tc.Close()
				tcpStore = &benchmarks.ClientStore{C: tc, RC: rc}
			}
			keys := w.Keys()
			if !keep {
				defer cleanupBench(c, e, w.KeyPrefix)
			}
			if err := benchmarks.Prepare(ctx, store, w, keys); err != nil {
				return fmt.Errorf("bench: storing the objects to get: %w", err)
			}
			fmt.Fprintf(e.stdout, "bench: %s %d x %s, concurrency %d, %d replica(s), %d round(s); GB/s = 10^9 bytes/s\n",
				o, count, size, concurrency, replicas, rounds)
			// Rounds alternate the store and the baseline, so both see the same machine load
			// (on a shared machine it changes from second to second).
			var ratios []float64
			for round := range rounds {
				if o == benchmarks.OpPut && round > 0 {
					keys = roundKeys(keys, round) // a put needs fresh keys
				}
				var tcp benchmarks.Result
				if tcpStore != nil && round%2 == 1 { // alternate which runs first (fresh arena pages)
					if tcp, err = runTCPPuts(ctx, *tcpStore, w, keys); err != nil {
						return err
					}
				}
				r, err := benchmarks.Run(ctx, store, w, keys)
				if err != nil {
					return fmt.Errorf("bench: %w", err)
				}
				fmt.Fprintln(e.stdout, r)
				if tcpStore != nil && round%2 == 0 {
					if tcp, err = runTCPPuts(ctx, *tcpStore, w, keys); err != nil {
						return err
					}
				}
				if tcpStore != nil {
					fmt.Fprintln(e.stdout, tcp)
				}
				if !baseline {
					continue
				}
				bw := w // the same bytes: one loopback exchange per object of a batch
				bw.Count, bw.Batch = w.Count*max(w.Batch, 1), 0
				b, err := benchmarks.LoopbackTCP(ctx, bw)
				if err != nil {
					return fmt.Errorf("bench: baseline: %w", err)
				}
				fmt.Fprintln(e.stdout, b)
				ratio := 0.0
				if b.GBps() > 0 {
					ratio = r.GBps() / b.GBps()
				}
				ratios = append(ratios, ratio)
				fmt.Fprintf(e.stdout, "ratio          %8.3f (mooncake %s GB/s / raw loopback TCP GB/s, same run)\n", ratio, o)
				if tcpStore != nil && b.GBps() > 0 {
					fmt.Fprintf(e.stdout, "ratio over TCP %8.3f (mooncake put over TCP GB/s / raw loopback TCP GB/s, same run)\n", tcp.GBps()/b.GBps())
				}
			}
			if o == benchmarks.OpGet {
				rs := c.ReadStats()
				fmt.Fprintf(e.stdout, "read path      %d gets through shared memory, %d over TCP\n", rs.SharedMemory, rs.TCP)
			} else {
				ws := c.WriteStats()
				fmt.Fprintf(e.stdout, "write path     %d replica writes through shared memory, %d over TCP (%d of them after a shared-memory fallback)\n",
					ws.SharedMemory, ws.TCP, ws.Fallbacks)
			}
			printMedian(e.stdout, "median ratio", ratios)
			return nil
		},
	}
	f.register(cmd.Flags())
	fl := cmd.Flags()
	fl.StringVar(&op, "op", "put", "put or get")
	fl.Var(&size, "size", "object size, e.g. 1MiB")
	fl.IntVar(&count, "count", 1000, "number of operations")
	fl.IntVar(&objects, "objects", 0, "get: distinct objects stored and read round-robin (default: count, capped at 256 MiB of objects)")
	fl.IntVar(&batch, "batch", 1, "put: objects per operation, each operation one BatchPut of that many objects of --size (GB/s counts every object)")
	bf.register(fl)
	fl.StringVar(&cpuProfile, "cpuprofile", "", "write a CPU profile of this client (the measurement and its preparation) to this file (go tool pprof reads it)")
	fl.StringVar(&workload, "workload", benchObjects, "objects (--op put or get of --size objects), kvcache (a model's KV-cache chunks for prompts with shared prefixes; needs --model config.json) or trace (replays --trace FILE)")
	kf.register(cmd)
	trf.register(fl)
	return cmd
}

// The workloads of `mooncake bench`.
const (
	benchObjects = "objects"
	benchKVCache = "kvcache"
	benchTrace   = "trace"
)

// objectsOnlyFlags are the flags only the objects workload reads.
var objectsOnlyFlags = []string{"op", "size", "count", "objects", "batch", "tokens"}

// benchFlags are the flags both workloads take.
type benchFlags struct {
	concurrency int
	replicas    int
	baseline    bool
	keep        bool
	rounds      int
	// tf's --model is a registered model name in the objects workload and the model's
	// config.json in the kvcache one (the issue's `--workload kvcache --model config.json`).
	tf tokenFlags
}

func (bf *benchFlags) register(fl *pflag.FlagSet) {
	fl.IntVar(&bf.concurrency, "concurrency", 8, "operations in flight (kvcache: prompts in flight)")
	fl.IntVar(&bf.replicas, "replicas", 1, "replicas per put")
	fl.BoolVar(&bf.baseline, "baseline", false, "also measure raw loopback TCP with the same sizes and concurrency")
	fl.BoolVar(&bf.keep, "keep", false, "keep the objects (default: remove them at the end)")
	bf.tf.register(fl)
	fl.Lookup("model").Usage = "objects: the registered model --tokens belong to; kvcache: the model's config.json (Hugging Face), which sizes the chunks"
	fl.IntVar(&bf.rounds, "rounds", 1, "repeat the measurement (alternating with the baseline) and print the median ratio")
}

// check validates the shared flags and returns the puts' replicate config.
func (bf *benchFlags) check() (client.ReplicateConfig, error) {
	if bf.rounds < 1 || bf.rounds > 100 {
		return client.ReplicateConfig{}, usagef("--rounds must be 1 to 100, got %d", bf.rounds)
	}
	if bf.replicas < 1 || bf.replicas > 255 {
		return client.ReplicateConfig{}, usagef("--replicas must be 1 to 255, got %d", bf.replicas)
	}
	return client.ReplicateConfig{Replicas: bf.replicas}, nil
}

// refuseFlags fails if the user gave one of the named flags, which the workload does not use
// (silently ignoring them would measure something else than asked).
func refuseFlags(fs *pflag.FlagSet, workload string, names ...string) error {
	for _, n := range names {
		if changed(fs, n) {
			return usagef("--%s does not apply to %s", n, workload)
		}
	}
	return nil
}

// printMedian prints the median of a value measured over rounds, with its range.
func printMedian(w io.Writer, label string, v []float64) {
	if len(v) < 2 {
		return
	}
	v = slices.Clone(v)
	slices.Sort(v)
	fmt.Fprintf(w, "%-14s %8.3f of %d rounds (min %.3f, max %.3f)\n", label, v[len(v)/2], len(v), v[0], v[len(v)-1])
}

// startCPUProfile profiles this process into path until the returned stop is called. The
// servers' side comes from their metrics port (/debug/pprof/profile).
func startCPUProfile(path string) (stop func(), err error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, fmt.Errorf("bench: --cpuprofile: %w", err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, fmt.Errorf("bench: --cpuprofile: %w", err)
	}
	return func() {
		pprof.StopCPUProfile()
		f.Close()
	}, nil
}

// roundKeys renames keys for another round of puts (same prefix, so cleanup finds them).
func roundKeys(keys []string, round int) []string {
	out := make([]string, len(keys))
	for i, k := range keys {
		out[i] = fmt.Sprintf("%s.r%d", k, round)
	}
	return out
}

// connectBench connects the client of a workload whose keys start with prefix; the caller
// defers done, which removes the keys (unless keep) and closes the client.
func connectBench(cmd *cobra.Command, e *env, f *clientFlags, keep bool, prefix string) (c *client.Client, done func(), err error) {
	c, err = f.connect(cmd, e)
	if err != nil {
		return nil, nil, err
	}
	return c, func() {
		if !keep {
			cleanupBench(c, e, prefix) // also after an interrupt
		}
		c.Close()
	}, nil
}

// cleanupBench removes the run's objects, even after an interrupt.
func cleanupBench(c *client.Client, e *env, prefix string) {
	ctx, cancel := context.WithTimeout(context.Background(), config.WorkerDefaults.ShutdownTimeout)
	defer cancel()
	if _, err := c.RemoveByRegex(ctx, "^"+regexp.QuoteMeta(prefix)); err != nil {
		fmt.Fprintf(e.stderr, "mooncake: bench: removing the objects under %q: %v\n", prefix, err)
	}
}

// runTCPPuts times w's puts through store (a client with shared memory off) under keys of
// their own.
func runTCPPuts(ctx context.Context, store benchmarks.ClientStore, w benchmarks.Workload, keys []string) (benchmarks.Result, error) {
	tk := make([]string, len(keys))
	for i, k := range keys {
		tk[i] = k + ".tcp"
	}
	r, err := benchmarks.Run(ctx, store, w, tk)
	if err != nil {
		return r, fmt.Errorf("bench: put over TCP: %w", err)
	}
	r.Name = "put over TCP"
	return r, nil
}
