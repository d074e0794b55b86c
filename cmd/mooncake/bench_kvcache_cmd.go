package main

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"time"

	"github.com/spf13/cobra"

	"github.com/mooncake-go/mooncake/benchmarks"
	"github.com/mooncake-go/mooncake/client"
	"github.com/mooncake-go/mooncake/internal/base"
	"github.com/mooncake-go/mooncake/internal/kvmodel"
)

// kvBenchFlags are the kvcache workload's own flags.
type kvBenchFlags struct {
	kvFlags       // --dtype, --tp, as kvcost takes them
	prompts       int
	promptTokens  int
	chunkTokens   int
	systemPrompts int
	sharedRatio   float64
	seed          uint64
	modelName     string
}

// kvOnlyFlags are the flags only the kvcache workload reads.
var kvOnlyFlags = []string{"prompts", "prompt_tokens", "chunk_tokens", "system_prompts", "shared_prefix_ratio", "seed", "dtype", "tp", "model_name"}

func (kf *kvBenchFlags) register(cmd *cobra.Command) {
	kf.kvFlags.register(cmd)
	fl := cmd.Flags()
	fl.IntVar(&kf.prompts, "prompts", defaultKVPrompts, "kvcache: prompts stored and loaded")
	fl.IntVar(&kf.promptTokens, "prompt_tokens", defaultKVPromptTokens, "kvcache: tokens per prompt (whole chunks are stored)")
	fl.IntVar(&kf.chunkTokens, "chunk_tokens", defaultChunkTokens, "kvcache: tokens per stored chunk (LMCache's chunk_size)")
	fl.IntVar(&kf.systemPrompts, "system_prompts", defaultKVSystemPrompts, "kvcache: distinct system prompts the prompts start with")
	fl.Float64Var(&kf.sharedRatio, "shared_prefix_ratio", defaultKVSharedRatio, "kvcache: share of each prompt that is its system prompt (0 to 1)")
	fl.Uint64Var(&kf.seed, "seed", 0, "kvcache: seed of the token ids and bytes (default: random per run)")
	fl.StringVar(&kf.modelName, "model_name", "", "kvcache: tag each chunk with its tokens and this model name (registered with `mooncake model add`), so `mooncake memory` sets the run's bytes against tokens x bytes per token")
}

// runKVBench runs `mooncake bench --workload kvcache`.
func runKVBench(cmd *cobra.Command, e *env, f *clientFlags, bf *benchFlags, kf *kvBenchFlags) error {
	path := bf.tf.model
	if path == "" {
		return usagef("--workload kvcache needs --model config.json (a Hugging Face model config)")
	}
	rc, err := bf.check()
	if err != nil {
		return err
	}
	m, err := kf.load(path)
	if err != nil {
		return err
	}
	if kf.modelName != "" {
		if err := client.ValidateModelName(kf.modelName); err != nil {
			return usageError{fmt.Errorf("--model_name: %w", err)}
		}
		// Every chunk holds ChunkTokens tokens (the batch puts take one config for all).
		rc.Tokens, rc.Model = int64(kf.chunkTokens), kf.modelName
	}
	seed := kf.seed
	if !changed(cmd.Flags(), "seed") {
		seed = rand.Uint64()
	}
	name := m.Type
	if name == "" {
		name = "model"
	}
	prefix := fmt.Sprintf("bench/%08x/kv/", rand.Uint32())
	w := kvWorkload{Prompts: kf.prompts, PromptTokens: kf.promptTokens, ChunkTokens: kf.chunkTokens,
		SystemPrompts: kf.systemPrompts, SharedRatio: kf.sharedRatio, Concurrency: bf.concurrency,
		BytesPerToken: m.BytesPerToken(), ModelTag: fmt.Sprintf("%s@%d@0", name, m.TP), KeyPrefix: prefix, Seed: seed}
	if err := w.validate(); err != nil {
		return usageError{err}
	}
	ctx := cmd.Context()
	c, done, err := connectBench(cmd, e, f, bf.keep, prefix)
	if err != nil {
		return err
	}
	defer done()
	out := e.stdout
	plan := newKVPlan(w)
	printKVHeader(out, path, m, plan, bf)
	used0, _, _ := dramUsage(ctx, c)
	if st, err := c.Status(ctx); err == nil && st.CapacityBytes > 0 {
		if need := int64(plan.unique) * int64(bf.replicas) * w.chunkBytes(); need > st.CapacityBytes-st.ReplicaBytes {
			fmt.Fprintf(out, "note           the run writes %s, more than the cluster's free DRAM (%s of %s): expect evictions and misses\n",
				base.Bytes(need), base.Bytes(max(st.CapacityBytes-st.ReplicaBytes, 0)), base.Bytes(st.CapacityBytes))
		}
	}
	var storeRatios, loadRatios, storeTPS, loadTPS []float64
	for round := range bf.rounds {
		if round > 0 {
			// Fresh keys, so every round stores (the same prompts in another namespace).
			w.KeyPrefix = fmt.Sprintf("%sr%d/", prefix, round)
			plan = newKVPlan(w)
			if !bf.keep {
				waitDRAMBack(ctx, out, c, used0)
			}
		}
		st, ld, err := runKVRound(ctx, clientKV{c: c, rc: rc}, plan)
		if err != nil {
			return err
		}
		printKVRound(out, plan, &st, &ld)
		storeTPS, loadTPS = append(storeTPS, st.tokensPerSec()), append(loadTPS, ld.tokensPerSec())
		if bf.baseline {
			sr, lr, err := kvBaseline(ctx, out, plan, &st, &ld)
			if err != nil {
				return err
			}
			storeRatios, loadRatios = append(storeRatios, sr), append(loadRatios, lr)
		}
		if !bf.keep && bf.rounds > 1 {
			cleanupBench(c, e, w.KeyPrefix) // keep the arena for the next round
		}
	}
	printMedianTokens(out, "median store", storeTPS)
	printMedianTokens(out, "median load", loadTPS)
	printMedian(out, "median ratio store", storeRatios)
	printMedian(out, "median ratio load", loadRatios)
	rs := c.ReadStats()
	fmt.Fprintf(out, "read path      %d gets through shared memory, %d over TCP\n", rs.SharedMemory, rs.TCP)
	return nil
}

// runKVRound stores then loads the plan's prompts. It fails when nothing could be stored, or
// a chunk came back wrong; fewer failures are counted and reported.
func runKVRound(ctx context.Context, s kvStore, plan *kvPlan) (st, ld kvPhase, err error) {
	st, err = plan.store(ctx, s)
	if err != nil {
		return st, ld, fmt.Errorf("bench: kvcache store: %w", err)
	}
	if st.written+st.dedup == 0 {
		return st, ld, fmt.Errorf("bench: kvcache: no chunk could be stored: %w", st.firstErr)
	}
	ld, err = plan.load(ctx, s)
	if err != nil {
		return st, ld, fmt.Errorf("bench: kvcache load: %w", err)
	}
	return st, ld, nil
}

func printKVHeader(out io.Writer, path string, m kvmodel.Model, p *kvPlan, bf *benchFlags) {
	w := p.w
	fmt.Fprintf(out, "bench: kvcache workload, model %s (%s), %s\n", p.w.ModelTag, filepath.Base(path), m.Attention)
	fmt.Fprintf(out, "bytes/token    %s (%s)\n", kvmodel.Commas(w.BytesPerToken), m.Formula())
	fmt.Fprintf(out, "chunk          %d tokens = %s bytes (%s)\n", w.ChunkTokens, kvmodel.Commas(w.chunkBytes()), base.Bytes(w.chunkBytes()))
	n := w.chunksPerPrompt()
	fmt.Fprintf(out, "prompts        %d x %s tokens = %d chunks each, the first %d from one of %d system prompt(s) (shared prefix ratio %.2f)\n",
		w.Prompts, kvmodel.Commas(int64(n*w.ChunkTokens)), n, w.sharedChunks(), w.SystemPrompts, w.SharedRatio)
	fmt.Fprintf(out, "bench: %d chunks, %d distinct (%s); concurrency %d prompts, %d replica(s), %d round(s); a batch is one prompt's calls; GB/s = 10^9 bytes/s\n",
		w.Prompts*n, p.unique, base.Bytes(int64(p.unique)*w.chunkBytes()), w.Concurrency, bf.replicas, bf.rounds)
}

func printKVRound(out io.Writer, p *kvPlan, st, ld *kvPhase) {
	fmt.Fprintf(out, "kvcache store  %12s tokens/s %8.3f GB/s  p50 %-10v p99 %-10v per batch (%d batches, %s tokens: %d chunks written, %d deduplicated, %d failed; %s in %v)\n",
		kvmodel.Commas(int64(st.tokensPerSec())), st.gbps(), st.percentile(0.5).Round(time.Microsecond), st.percentile(0.99).Round(time.Microsecond),
		len(st.batches), kvmodel.Commas(st.tokens), st.written, st.dedup, st.failed, base.Bytes(st.bytes), st.elapsed.Round(time.Millisecond))
	fmt.Fprintf(out, "kvcache load   %12s tokens/s %8.3f GB/s  p50 %-10v p99 %-10v per batch (%d batches, %s tokens: %d chunks loaded, %d missed; %s in %v)\n",
		kvmodel.Commas(int64(ld.tokensPerSec())), ld.gbps(), ld.percentile(0.5).Round(time.Microsecond), ld.percentile(0.99).Round(time.Microsecond),
		len(ld.batches), kvmodel.Commas(ld.tokens), ld.loaded, ld.missed, base.Bytes(ld.bytes), ld.elapsed.Round(time.Millisecond))
	total := st.written + st.dedup + st.failed
	pct := 0.0
	if total > 0 {
		pct = 100 * float64(st.dedup) / float64(total)
	}
	fmt.Fprintf(out, "dedup          %d of %d chunks (%.1f%%) were stored already (shared prefixes), %d written = %s tokens\n",
		st.dedup, total, pct, st.written, kvmodel.Commas(st.written*int64(p.w.ChunkTokens)))
	fmt.Fprintf(out, "hit ratio      %.3f (%s of %s tokens loaded; a prompt stops at its first missing chunk)\n",
		ld.hitRatio(), kvmodel.Commas(ld.tokens), kvmodel.Commas(ld.requested))
	if st.firstErr != nil {
		fmt.Fprintf(out, "store errors   %d chunk(s) not stored; the first: %v\n", st.failed, st.firstErr)
	}
	if ld.firstErr != nil {
		fmt.Fprintf(out, "load errors    the first: %v\n", ld.firstErr)
	}
}

// kvBaseline measures raw loopback TCP moving chunks of the same size (as many puts as the
// store wrote, as many gets as it loaded, at least 4 per connection; one connection per prompt
// in flight) and prints it
// with the ratios of GB/s.
func kvBaseline(ctx context.Context, out io.Writer, p *kvPlan, st, ld *kvPhase) (storeRatio, loadRatio float64, err error) {
	ratio := func(op benchmarks.Op, n int64, gbps float64) (float64, error) {
		// At least 4 exchanges per connection, so connecting and first-touching the buffers
		// do not dominate a short run.
		count := int(max(n, 4*int64(p.w.Concurrency)))
		b, err := benchmarks.LoopbackTCP(ctx, benchmarks.Workload{Op: op, Size: p.w.chunkBytes(), Count: count, Concurrency: p.w.Concurrency})
		if err != nil {
			return 0, fmt.Errorf("bench: baseline: %w", err)
		}
		fmt.Fprintln(out, b)
		r := 0.0
		if b.GBps() > 0 {
			r = gbps / b.GBps()
		}
		fmt.Fprintf(out, "ratio          %8.3f (kvcache %s GB/s / raw loopback TCP GB/s, same run)\n", r, map[benchmarks.Op]string{benchmarks.OpPut: "store", benchmarks.OpGet: "load"}[op])
		return r, nil
	}
	if storeRatio, err = ratio(benchmarks.OpPut, st.written, st.gbps()); err != nil {
		return 0, 0, err
	}
	loadRatio, err = ratio(benchmarks.OpGet, ld.loaded, ld.gbps())
	return storeRatio, loadRatio, err
}

// printMedianTokens prints the median tokens/s over rounds, with its range.
func printMedianTokens(w io.Writer, label string, v []float64) {
	if len(v) < 2 {
		return
	}
	v = slices.Clone(v)
	slices.Sort(v)
	c := func(f float64) string { return kvmodel.Commas(int64(f)) }
	fmt.Fprintf(w, "%-14s %12s tokens/s of %d rounds (min %s, max %s)\n", label, c(v[len(v)/2]), len(v), c(v[0]), c(v[len(v)-1]))
}

// kvDrainWait bounds the wait for the previous round's removed chunks to leave the arena.
const kvDrainWait = 15 * time.Second

// dramUsage sums the DRAM in use of the active workers, as their last heartbeats reported it,
// and returns each one's last heartbeat time (so a caller can wait for fresh ones).
func dramUsage(ctx context.Context, c *client.Client) (used int64, beats map[string]string, err error) {
	st, err := c.Status(ctx)
	if err != nil {
		return 0, nil, err
	}
	beats = make(map[string]string)
	for _, w := range st.Workers {
		if w.State == "active" {
			used += w.DRAMUsedBytes
			beats[w.ID] = w.LastHeartbeat
		}
	}
	return used, beats, nil
}

// waitDRAMBack waits until the workers' DRAM in use, reported by heartbeats sent after the
// call, is back to base (at most kvDrainWait). A removed chunk that a reader still maps (a
// shared-memory lease not yet released) keeps its arena space, and the master learns the
// usage with the next heartbeat; a round started on top of the last one's chunks measures
// eviction instead: LRU evicts the oldest chunks, the shared prefixes, and every prompt then
// misses at its first chunk.
func waitDRAMBack(ctx context.Context, out io.Writer, c *client.Client, base0 int64) {
	deadline := time.Now().Add(kvDrainWait)
	_, first, err := dramUsage(ctx, c)
	if err != nil {
		return
	}
	for {
		used, beats, err := dramUsage(ctx, c)
		if err != nil {
			return
		}
		fresh := true
		for id, b := range beats {
			if b == first[id] && b != "" {
				fresh = false // the usage predates the wait
			}
		}
		if fresh && used <= base0 {
			return
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			fmt.Fprintf(out, "note           the workers still use %s more DRAM than before the run after %v: the round may evict\n",
				base.Bytes(used-base0), kvDrainWait)
			return
		}
		select {
		case <-ctx.Done():
		case <-time.After(100 * time.Millisecond):
		}
	}
}
