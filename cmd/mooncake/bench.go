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
	var fl benchCmdFlags
	cmd := &cobra.Command{
		Use:   "bench --op put|get --size 1MiB --count N --concurrency C [--baseline] | bench --workload kvcache --model config.json | bench --workload trace --trace FILE --block_bytes 64KiB",
		Short: "Measure put or get throughput and latency (and raw loopback TCP with --baseline), a KVCache workload, or replay a request trace",
		Long: `bench measures the store through the Go client. The objects workload (the default) runs
--count puts or gets of --size bytes; --workload kvcache stores and loads a model's KV-cache
chunks for prompts with shared prefixes, as a serving fleet does; --workload trace replays a
request trace of Mooncake's (FAST'25) and sets its token hit ratio beside an LRU cache of
the store's capacity (docs/benchmarks.md).`,
		Args: exactArgs(0, "no arguments"),
		RunE: func(cmd *cobra.Command, _ []string) error { return fl.run(cmd, e) },
	}
	fl.register(cmd)
	return cmd
}

// benchCmdFlags are all the flags of `mooncake bench`; which of them a run reads depends on
// --workload (checkWorkload refuses the others).
type benchCmdFlags struct {
	f          clientFlags
	obj        objectsBenchFlags
	bf         benchFlags
	kf         kvBenchFlags
	trf        traceBenchFlags
	cpuProfile string
	workload   string
}

// objectsBenchFlags are the flags only the objects workload reads: objectsOnlyFlags except
// --tokens, which benchFlags.tf holds.
type objectsBenchFlags struct {
	op      string
	size    base.Bytes
	count   int
	objects int
	batch   int
	exists  bool
}

// register registers every flag of `mooncake bench` on cmd.
func (b *benchCmdFlags) register(cmd *cobra.Command) {
	b.f.register(cmd.Flags())
	fl := cmd.Flags()
	b.obj.size = base.Bytes(1 << 20)
	fl.StringVar(&b.obj.op, "op", "put", "put or get")
	fl.Var(&b.obj.size, "size", "object size, e.g. 1MiB")
	fl.IntVar(&b.obj.count, "count", 1000, "number of operations")
	fl.IntVar(&b.obj.objects, "objects", 0, "get: distinct objects stored and read round-robin (default: count, capped at 256 MiB of objects)")
	fl.BoolVar(&b.obj.exists, "exists", false, "get: ask whether each key exists before its get, as LMCache asks contains before get (ops/s counts the pairs)")
	fl.IntVar(&b.obj.batch, "batch", 1, "put: objects per operation, each operation one BatchPut of that many objects of --size (GB/s counts every object)")
	b.bf.register(fl)
	fl.StringVar(&b.cpuProfile, "cpuprofile", "", "write a CPU profile of this client (the measurement and its preparation) to this file (go tool pprof reads it)")
	fl.StringVar(&b.workload, "workload", benchObjects, "objects (--op put or get of --size objects), kvcache (a model's KV-cache chunks for prompts with shared prefixes; needs --model config.json) or trace (replays --trace FILE)")
	b.kf.register(cmd)
	b.trf.register(fl)
}

// checkWorkload fails on an unknown --workload, and on a flag given that the workload does
// not read.
func (b *benchCmdFlags) checkWorkload(fs *pflag.FlagSet) error {
	var refuse []string
	switch b.workload {
	case benchObjects:
		refuse = slices.Concat(kvOnlyFlags, traceOnlyFlags)
	case benchKVCache:
		refuse = slices.Concat(objectsOnlyFlags, traceOnlyFlags)
	case benchTrace:
		// --dtype and --tp apply to --model config.json, as in kvcache.
		kvOnly := slices.DeleteFunc(slices.Clone(kvOnlyFlags), func(n string) bool { return n == "dtype" || n == "tp" })
		refuse = slices.Concat(objectsOnlyFlags, kvOnly)
	default:
		return usagef("--workload: unknown workload %q (want %s, %s or %s)", b.workload, benchObjects, benchKVCache, benchTrace)
	}
	return refuseFlags(fs, "--workload "+b.workload, refuse...)
}

// run runs the chosen workload.
func (b *benchCmdFlags) run(cmd *cobra.Command, e *env) error {
	if err := b.checkWorkload(cmd.Flags()); err != nil {
		return err
	}
	if b.workload == benchObjects {
		return b.runObjects(cmd, e)
	}
	stop, err := startCPUProfile(b.cpuProfile)
	if err != nil {
		return err
	}
	defer stop()
	if b.workload == benchTrace {
		return runTraceBench(cmd, e, &b.f, &b.bf, &b.kf, &b.trf)
	}
	return runKVBench(cmd, e, &b.f, &b.bf, &b.kf)
}

// checkObjects validates the objects workload's flags and returns the workload and the puts'
// replicate config.
func (b *benchCmdFlags) checkObjects() (benchmarks.Workload, client.ReplicateConfig, error) {
	o, err := benchmarks.ParseOp(b.obj.op)
	if err != nil {
		return benchmarks.Workload{}, client.ReplicateConfig{}, usageError{err}
	}
	w := benchmarks.Workload{Op: o, Size: int64(b.obj.size), Count: b.obj.count, Concurrency: b.bf.concurrency, Objects: b.obj.objects, Batch: b.obj.batch,
		ExistsFirst: b.obj.exists}
	if err := w.Validate(); err != nil {
		return w, client.ReplicateConfig{}, usageError{err}
	}
	rc, err := b.bf.check()
	if err != nil {
		return w, rc, err
	}
	if err := b.bf.tf.apply(&rc); err != nil {
		return w, rc, err
	}
	return w, rc, nil
}

// runObjects runs the objects workload: it stores what the gets read, then measures
// --rounds rounds and prints which path (shared memory or TCP) the bytes took.
func (b *benchCmdFlags) runObjects(cmd *cobra.Command, e *env) error {
	w, rc, err := b.checkObjects()
	if err != nil {
		return err
	}
	ctx := cmd.Context()
	stop, err := startCPUProfile(b.cpuProfile)
	if err != nil {
		return err
	}
	defer stop()
	c, err := b.f.connect(cmd, e)
	if err != nil {
		return err
	}
	defer c.Close()
	run := objectsRun{e: e, w: w, store: benchmarks.ClientStore{C: c, RC: rc}, baseline: b.bf.baseline}
	if w.Op == benchmarks.OpPut && b.bf.baseline && b.f.sharedMemory {
		tc, err := b.connectTCP(cmd, e)
		if err != nil {
			return err
		}
		defer tc.Close()
		run.tcpStore = &benchmarks.ClientStore{C: tc, RC: rc}
	}
	keys := w.Keys()
	if !b.bf.keep {
		defer cleanupBench(c, e, w.KeyPrefix)
	}
	if err := benchmarks.Prepare(ctx, run.store, w, keys); err != nil {
		return fmt.Errorf("bench: storing the objects to get: %w", err)
	}
	fmt.Fprintf(e.stdout, "bench: %s %d x %s, concurrency %d, %d replica(s), %d round(s); GB/s = 10^9 bytes/s\n",
		w.Op, b.obj.count, b.obj.size, b.bf.concurrency, b.bf.replicas, b.bf.rounds)
	// Rounds alternate the store and the baseline, so both see the same machine load
	// (on a shared machine it changes from second to second).
	var ratios []float64
	for round := range b.bf.rounds {
		if w.Op == benchmarks.OpPut && round > 0 {
			keys = roundKeys(keys, round) // a put needs fresh keys
		}
		ratio, err := run.round(ctx, round, keys)
		if err != nil {
			return err
		}
		if b.bf.baseline {
			ratios = append(ratios, ratio)
		}
	}
	printPaths(e.stdout, c, w.Op)
	printMedian(e.stdout, "median ratio", ratios)
	return nil
}

// connectTCP connects a second client with shared memory off. A put on a worker's host goes
// through shared memory (a staging area): with --baseline each round also times the same
// puts over TCP through it, so the run compares raw TCP, our put, and our TCP put.
func (b *benchCmdFlags) connectTCP(cmd *cobra.Command, e *env) (*client.Client, error) {
	cfg, err := b.f.config(cmd.Flags(), e)
	if err != nil {
		return nil, err
	}
	cfg.DisableSharedMemory = true
	return client.Connect(cmd.Context(), cfg)
}

// objectsRun is what the rounds of one objects workload run share.
type objectsRun struct {
	e     *env
	w     benchmarks.Workload
	store benchmarks.ClientStore
	// tcpStore, with --baseline on puts through shared memory, is a client with shared
	// memory off (connectTCP); nil otherwise.
	tcpStore *benchmarks.ClientStore
	baseline bool
}

// round measures one round on keys and prints it; with --baseline it also measures raw
// loopback TCP on the same bytes and returns the store's ratio to it (0 without).
func (r *objectsRun) round(ctx context.Context, round int, keys []string) (float64, error) {
	var tcp benchmarks.Result
	var err error
	if r.tcpStore != nil && round%2 == 1 { // alternate which runs first (fresh arena pages)
		if tcp, err = runTCPPuts(ctx, *r.tcpStore, r.w, keys); err != nil {
			return 0, err
		}
	}
	res, err := benchmarks.Run(ctx, r.store, r.w, keys)
	if err != nil {
		return 0, fmt.Errorf("bench: %w", err)
	}
	fmt.Fprintln(r.e.stdout, res)
	if r.tcpStore != nil && round%2 == 0 {
		if tcp, err = runTCPPuts(ctx, *r.tcpStore, r.w, keys); err != nil {
			return 0, err
		}
	}
	if r.tcpStore != nil {
		fmt.Fprintln(r.e.stdout, tcp)
	}
	if !r.baseline {
		return 0, nil
	}
	bw := r.w // the same bytes: one loopback exchange per object of a batch
	bw.Count, bw.Batch = r.w.Count*max(r.w.Batch, 1), 0
	b, err := benchmarks.LoopbackTCP(ctx, bw)
	if err != nil {
		return 0, fmt.Errorf("bench: baseline: %w", err)
	}
	fmt.Fprintln(r.e.stdout, b)
	ratio := 0.0
	if b.GBps() > 0 {
		ratio = res.GBps() / b.GBps()
	}
	fmt.Fprintf(r.e.stdout, "ratio          %8.3f (mooncake %s GB/s / raw loopback TCP GB/s, same run)\n", ratio, r.w.Op)
	if r.tcpStore != nil && b.GBps() > 0 {
		fmt.Fprintf(r.e.stdout, "ratio over TCP %8.3f (mooncake put over TCP GB/s / raw loopback TCP GB/s, same run)\n", tcp.GBps()/b.GBps())
	}
	return ratio, nil
}

// printPaths prints how c's gets (op get) or replica writes (op put) went: through shared
// memory or over TCP.
func printPaths(out io.Writer, c *client.Client, op benchmarks.Op) {
	if op == benchmarks.OpGet {
		rs := c.ReadStats()
		fmt.Fprintf(out, "read path      %d gets through shared memory, %d over TCP\n", rs.SharedMemory, rs.TCP)
		return
	}
	ws := c.WriteStats()
	fmt.Fprintf(out, "write path     %d replica writes through shared memory, %d over TCP (%d of them after a shared-memory fallback)\n",
		ws.SharedMemory, ws.TCP, ws.Fallbacks)
}

// The workloads of `mooncake bench`.
const (
	benchObjects = "objects"
	benchKVCache = "kvcache"
	benchTrace   = "trace"
)

// objectsOnlyFlags are the flags only the objects workload reads.
var objectsOnlyFlags = []string{"op", "size", "count", "objects", "batch", "exists", "tokens"}

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

// startCPUProfile profiles this process into path until the returned stop is called; with
// path "" (no --cpuprofile) it does nothing. The servers' side comes from their metrics port
// (/debug/pprof/profile).
func startCPUProfile(path string) (stop func(), err error) {
	if path == "" {
		return func() {}, nil
	}
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
