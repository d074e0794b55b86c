package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/mooncake-go/mooncake/benchmarks"
	"github.com/mooncake-go/mooncake/internal/base"
	"github.com/mooncake-go/mooncake/internal/kvmodel"
)

// The trace workload (`mooncake bench --workload trace --trace FILE`) replays a request trace
// of Mooncake's FAST'25 release (benchmarks.ReadTrace has the format) against the store, as
// a serving engine with prefix caching would ask it:
//
//  1. Requests run in timestamp order, --concurrency at a time; with --speedup S request i
//     starts no earlier than its timestamp / S after the run's start (0: as fast as the
//     store answers).
//  2. A block (one hash id, 512 tokens) is one object of --block_bytes, or of 512 tokens x
//     the model's bytes per token with --model config.json; its key names the hash id, its
//     bytes come from a pool at an offset derived from the id (checked when loaded).
//  3. Per request: one BatchExists of its blocks; one BatchGetInto of the prefix up to the
//     first missing block (its tokens are the request's hits; a block that fails to read
//     ends the prefix there); one BatchPut of the blocks that were missing.
//
// The store's token hit ratio is printed beside the trace's infinite-cache bound and an LRU
// simulation (benchmarks.SimulateLRU) at the store's capacity in blocks, DRAM alone and
// DRAM plus NVMe, as the workers report them. A request's latency is its three calls.

// traceBenchFlags are the trace workload's own flags.
type traceBenchFlags struct {
	path       string
	blockBytes base.Bytes
	speedup    float64
	requests   int
}

// traceOnlyFlags are the flags only the trace workload reads.
var traceOnlyFlags = []string{"trace", "block_bytes", "speedup", "requests"}

func (tf *traceBenchFlags) register(fl *pflag.FlagSet) {
	fl.StringVar(&tf.path, "trace", "", "trace: the request trace to replay (JSON lines with timestamp, input_length, hash_ids: Mooncake's FAST'25 traces)")
	fl.Var(&tf.blockBytes, "block_bytes", "trace: bytes of one 512-token block (instead of --model config.json), e.g. 64KiB to fit a small machine")
	fl.Float64Var(&tf.speedup, "speedup", 0, "trace: replay the arrivals this many times faster than recorded (0: no pacing, --concurrency requests in flight)")
	fl.IntVar(&tf.requests, "requests", 0, "trace: replay only the first N requests (0: all)")
}

// traceReplay is one replay: the trace and how its blocks become objects. It runs on any
// kvStore.
type traceReplay struct {
	reqs        []benchmarks.TraceRequest
	blockBytes  int64
	concurrency int
	speedup     float64
	// keyPrefix namespaces the run's keys ("bench/<random>/trace/"), so cleanup finds them.
	keyPrefix string
	// pool holds the blocks' bytes (read-only).
	pool valuePool
}

func newTraceReplay(reqs []benchmarks.TraceRequest, blockBytes int64, concurrency int, speedup float64, keyPrefix string, seed uint64) (*traceReplay, error) {
	maxBlocks := benchmarks.StatTrace(reqs).MaxBlocks
	switch {
	case blockBytes < 1 || blockBytes > 1<<32:
		return nil, fmt.Errorf("a block must be 1 byte to 4 GiB, got %d bytes", blockBytes)
	case concurrency < 1 || concurrency > 1024:
		return nil, fmt.Errorf("concurrency must be 1 to 1024, got %d", concurrency)
	case math.IsNaN(speedup) || math.IsInf(speedup, 0) || speedup < 0:
		return nil, fmt.Errorf("--speedup must be 0 or more, got %v", speedup)
	case int64(concurrency)*int64(maxBlocks)*blockBytes > kvMaxBufferBytes:
		return nil, fmt.Errorf("concurrency x the longest request's %d blocks is %s of load buffers, over %s: lower --concurrency or --block_bytes, or replay fewer --requests",
			maxBlocks, base.Bytes(int64(concurrency)*int64(maxBlocks)*blockBytes), base.Bytes(kvMaxBufferBytes))
	}
	return &traceReplay{reqs: reqs, blockBytes: blockBytes, concurrency: concurrency, speedup: speedup,
		keyPrefix: keyPrefix, pool: newValuePool(blockBytes, seed)}, nil
}

func (r *traceReplay) key(id int64) string { return r.keyPrefix + strconv.FormatInt(id, 10) }

// offset is where block id's bytes start in the pool (a splitmix64 step spreads the ids).
func (r *traceReplay) offset(id int64) int64 {
	z := uint64(id) + 0x9e3779b97f4a7c15
	z = (z ^ z>>30) * 0xbf58476d1ce4e5b9
	z = (z ^ z>>27) * 0x94d049bb133111eb
	return poolOffset(z ^ z>>31)
}

// traceResult is what a replay measured.
type traceResult struct {
	// hits counts the tokens loaded from cached prefixes against the requests' input tokens.
	hits benchmarks.TraceHits
	// storedTokens are the tokens of the blocks written.
	storedTokens int64
	// Blocks by outcome: loaded (in a prefix, read back), written, dedup (refused as already
	// stored: a concurrent request wrote it first), failed (a put error).
	loaded, written, dedup, failed int64
	// loadedBytes, storedBytes are the bytes moved.
	loadedBytes, storedBytes int64
	elapsed                  time.Duration
	// latencies holds each request's latency, sorted ascending.
	latencies []time.Duration
	// late is the most a request started after its paced arrival (0 without --speedup).
	late time.Duration
	// firstErr is the first store error (not a miss), reported once.
	firstErr error
}

func (t *traceResult) percentile(q float64) time.Duration {
	return benchmarks.Result{Latencies: t.latencies}.Percentile(q)
}

// traceCounts is a replay's counters while its requests run in parallel.
type traceCounts struct {
	hitTokens, inputTokens, storedTokens                             atomic.Int64
	loaded, written, dedup, failed, loadedBytes, storedBytes, lateNS atomic.Int64
	mu                                                               struct {
		sync.Mutex
		latencies []time.Duration
		firstErr  error
	}
}

func (k *traceCounts) done(d time.Duration, err error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.mu.latencies = append(k.mu.latencies, d)
	if k.mu.firstErr == nil && err != nil {
		k.mu.firstErr = err
	}
}

// run replays every request. Store errors are counted, not fatal (an engine recomputes what it
// cannot load and goes on when it cannot store); a block read back with wrong bytes fails the
// run, as does the context ending.
func (r *traceReplay) run(ctx context.Context, s kvStore) (traceResult, error) {
	var (
		k       traceCounts
		next    atomic.Int64
		wg      sync.WaitGroup
		errOnce sync.Once
		stopErr error
		start   = time.Now()
		n       = len(r.reqs)
		t0      = r.reqs[0].TimestampMS
	)
	for range min(r.concurrency, n) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var bufs [][]byte // this goroutine's load buffers, grown to the longest prefix
			for {
				i := int(next.Add(1)) - 1
				if i >= n || ctx.Err() != nil {
					return
				}
				q := &r.reqs[i]
				if r.speedup > 0 {
					due := start.Add(time.Duration(float64(q.TimestampMS-t0) * float64(time.Millisecond) / r.speedup))
					if wait := time.Until(due); wait > 0 {
						select {
						case <-ctx.Done():
							return
						case <-time.After(wait):
						}
					} else {
						late := int64(-wait)
						for old := k.lateNS.Load(); late > old && !k.lateNS.CompareAndSwap(old, late); old = k.lateNS.Load() {
						}
					}
				}
				for len(bufs) < len(q.HashIDs) {
					bufs = append(bufs, make([]byte, r.blockBytes))
				}
				if err := r.request(ctx, s, &k, q, bufs); err != nil {
					errOnce.Do(func() { stopErr = err })
					next.Store(int64(n)) // the others stop at their next request
					return
				}
			}
		}()
	}
	wg.Wait()
	if stopErr == nil {
		stopErr = ctx.Err()
	}
	slices.Sort(k.mu.latencies)
	return traceResult{
		hits:         benchmarks.TraceHits{HitTokens: k.hitTokens.Load(), InputTokens: k.inputTokens.Load()},
		storedTokens: k.storedTokens.Load(), loaded: k.loaded.Load(), written: k.written.Load(), dedup: k.dedup.Load(),
		failed: k.failed.Load(), loadedBytes: k.loadedBytes.Load(), storedBytes: k.storedBytes.Load(),
		elapsed: time.Since(start), latencies: k.mu.latencies, late: time.Duration(k.lateNS.Load()), firstErr: k.mu.firstErr,
	}, stopErr
}

// request runs one request: exists, load the cached prefix, store the missing blocks.
func (r *traceReplay) request(ctx context.Context, s kvStore, k *traceCounts, q *benchmarks.TraceRequest, bufs [][]byte) error {
	keys := make([]string, len(q.HashIDs))
	for j, id := range q.HashIDs {
		keys[j] = r.key(id)
	}
	k.inputTokens.Add(q.InputLength)
	begin := time.Now()
	exists, err := s.BatchExists(ctx, keys)
	if err != nil {
		k.failed.Add(int64(len(keys)))
		k.done(time.Since(begin), err)
		return nil
	}
	hit := len(keys)
	if j := slices.Index(exists, false); j >= 0 {
		hit = j
	}
	var firstErr error
	if hit > 0 {
		sizes, errs := s.BatchGetInto(ctx, keys[:hit], bufs[:hit])
		for j := range hit {
			if errs[j] != nil {
				if !errors.Is(errs[j], base.ErrObjectNotFound) {
					firstErr = errs[j]
				}
				break
			}
			if !r.pool.check(r.offset(q.HashIDs[j]), bufs[j][:sizes[j]]) {
				k.done(time.Since(begin), nil)
				return fmt.Errorf("block %d (%q) read back %d bytes that are not the ones stored under its key", j, keys[j], sizes[j])
			}
			k.loaded.Add(1)
			k.loadedBytes.Add(int64(sizes[j]))
			k.hitTokens.Add(q.BlockTokens(j))
		}
	}
	var putKeys []string
	var putVals [][]byte
	var putIdx []int
	for j, ok := range exists {
		if !ok {
			putKeys, putIdx = append(putKeys, keys[j]), append(putIdx, j)
			putVals = append(putVals, r.pool.at(r.offset(q.HashIDs[j])))
		}
	}
	if len(putKeys) > 0 {
		for j, err := range s.BatchPut(ctx, putKeys, putVals) {
			switch {
			case err == nil:
				k.written.Add(1)
				k.storedBytes.Add(r.blockBytes)
				k.storedTokens.Add(q.BlockTokens(putIdx[j]))
			case errors.Is(err, base.ErrObjectAlreadyExists):
				k.dedup.Add(1)
			default:
				k.failed.Add(1)
				if firstErr == nil {
					firstErr = err
				}
			}
		}
	}
	k.done(time.Since(begin), firstErr)
	return nil
}

// runTraceBench runs `mooncake bench --workload trace`.
func runTraceBench(cmd *cobra.Command, e *env, f *clientFlags, bf *benchFlags, kf *kvBenchFlags, tf *traceBenchFlags) error {
	if err := refuseFlags(cmd.Flags(), "--workload trace", "rounds", "baseline"); err != nil {
		return err
	}
	rc, err := bf.check()
	if err != nil {
		return err
	}
	if tf.path == "" {
		return usagef("--workload trace needs --trace FILE (a request trace, e.g. Mooncake's conversation_trace.jsonl)")
	}
	if tf.requests < 0 {
		return usagef("--requests must be 0 (all) or more, got %d", tf.requests)
	}
	blockBytes, blockFrom := int64(tf.blockBytes), "--block_bytes"
	switch model := bf.tf.model; {
	case model != "" && changed(cmd.Flags(), "block_bytes"):
		return usagef("--workload trace takes --model config.json or --block_bytes, not both")
	case model != "":
		m, err := kf.load(model)
		if err != nil {
			return err
		}
		blockBytes = benchmarks.TraceBlockTokens * m.BytesPerToken()
		blockFrom = fmt.Sprintf("%d tokens x %s bytes/token of %s", benchmarks.TraceBlockTokens, kvmodel.Commas(m.BytesPerToken()), filepath.Base(model))
	case !changed(cmd.Flags(), "block_bytes"):
		return usagef("--workload trace needs --model config.json or --block_bytes (the bytes of one 512-token block)")
	}
	fh, err := os.Open(tf.path)
	if err != nil {
		return usageError{err}
	}
	reqs, err := benchmarks.ReadTrace(fh)
	fh.Close()
	if err != nil {
		return usageError{fmt.Errorf("%s: %w", tf.path, err)}
	}
	if tf.requests > 0 && tf.requests < len(reqs) {
		reqs = reqs[:tf.requests]
	}
	prefix := fmt.Sprintf("bench/%08x/trace/", rand.Uint32())
	r, err := newTraceReplay(reqs, blockBytes, bf.concurrency, tf.speedup, prefix, rand.Uint64())
	if err != nil {
		return usageError{err}
	}
	ctx := cmd.Context()
	c, done, err := connectBench(cmd, e, f, bf.keep, prefix)
	if err != nil {
		return err
	}
	defer done()
	st, err := c.Status(ctx)
	if err != nil {
		return err
	}
	var dram, nvme int64
	for _, w := range st.Workers {
		if w.State == "active" {
			dram, nvme = dram+w.DRAMCapacityBytes, nvme+w.NVMeCapacityBytes
		}
	}
	out := e.stdout
	ts := benchmarks.StatTrace(reqs)
	fmt.Fprintf(out, "bench: trace %s: %s requests over %v, %s blocks of %d tokens, %s distinct; block %s bytes (%s) = %s; concurrency %d, %d replica(s), speedup %s\n",
		filepath.Base(tf.path), kvmodel.Commas(int64(ts.Requests)), (time.Duration(ts.SpanMS) * time.Millisecond).Round(time.Second),
		kvmodel.Commas(int64(ts.Blocks)), benchmarks.TraceBlockTokens, kvmodel.Commas(int64(ts.Distinct)),
		kvmodel.Commas(blockBytes), blockFrom, base.Bytes(blockBytes), bf.concurrency, bf.replicas, speedupText(tf.speedup))
	dramBlocks, nvmeBlocks := int(dram/blockBytes/int64(bf.replicas)), int(nvme/blockBytes/int64(bf.replicas))
	fmt.Fprintf(out, "capacity       %s blocks of DRAM (%s) + %s of NVMe (%s), as the workers report them, per replica\n",
		kvmodel.Commas(int64(dramBlocks)), base.Bytes(dram), kvmodel.Commas(int64(nvmeBlocks)), base.Bytes(nvme))
	res, err := r.run(ctx, clientKV{c: c, rc: rc})
	if err != nil {
		return fmt.Errorf("bench: trace: %w", err)
	}
	printTraceResult(out, reqs, &res, dramBlocks, nvmeBlocks)
	return nil
}

func speedupText(s float64) string {
	if s == 0 {
		return "none (no pacing)"
	}
	return fmt.Sprintf("x%g", s)
}

// printTraceResult prints the replay's figures beside the LRU simulation at the store's
// capacity and the infinite-cache bound.
func printTraceResult(out io.Writer, reqs []benchmarks.TraceRequest, res *traceResult, dramBlocks, nvmeBlocks int) {
	c := func(v int64) string { return kvmodel.Commas(v) }
	fmt.Fprintf(out, "trace load     %12s tokens/s %8.3f GB/s  (%s blocks, %s tokens loaded from cached prefixes)\n",
		c(int64(perSec(float64(res.hits.HitTokens), res.elapsed))), perSec(float64(res.loadedBytes), res.elapsed)/1e9, c(res.loaded), c(res.hits.HitTokens))
	fmt.Fprintf(out, "trace store    %12s tokens/s %8.3f GB/s  (%s blocks written, %s stored concurrently by another request, %d failed)\n",
		c(int64(perSec(float64(res.storedTokens), res.elapsed))), perSec(float64(res.storedBytes), res.elapsed)/1e9, c(res.written), c(res.dedup), res.failed)
	fmt.Fprintf(out, "request        p50 %-10v p99 %-10v (%s requests in %v", res.percentile(0.5).Round(time.Microsecond),
		res.percentile(0.99).Round(time.Microsecond), c(int64(len(res.latencies))), res.elapsed.Round(time.Millisecond))
	if res.late > 0 {
		fmt.Fprintf(out, "; at worst %v behind the paced arrivals", res.late.Round(time.Millisecond))
	}
	fmt.Fprintln(out, ")")
	fmt.Fprintf(out, "hit ratio      %.3f (%s of %s input tokens from cached prefixes)\n", res.hits.Ratio(), c(res.hits.HitTokens), c(res.hits.InputTokens))
	inf := benchmarks.SimulateLRU(reqs, 0)
	fmt.Fprintf(out, "infinite cache %.3f (the trace's bound)\n", inf.Ratio())
	lru := func(label string, blocks int) {
		if blocks <= 0 {
			return
		}
		h := benchmarks.SimulateLRU(reqs, blocks)
		ratio := 0.0
		if h.HitTokens > 0 {
			ratio = res.hits.Ratio() / h.Ratio()
		}
		fmt.Fprintf(out, "LRU %-10s %.3f at %s blocks; the store's hit ratio is %.3f of it\n", label, h.Ratio(), c(int64(blocks)), ratio)
	}
	lru("DRAM", dramBlocks)
	if nvmeBlocks > 0 {
		lru("DRAM+NVMe", dramBlocks+nvmeBlocks)
	}
	if res.firstErr != nil {
		fmt.Fprintf(out, "errors         %d block(s) not stored or not read; the first: %v\n", res.failed, res.firstErr)
	}
}
