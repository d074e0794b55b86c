package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mooncake-go/mooncake/benchmarks"
	"github.com/mooncake-go/mooncake/client"
	"github.com/mooncake-go/mooncake/internal/base"
)

// The kvcache workload (`mooncake bench --workload kvcache --model config.json`) is what an
// LLM serving fleet asks of a KVCache store, in the shape vLLM's prefix caching and LMCache
// give it:
//
//  1. Every prompt is a shared system prompt (one of --system_prompts, covering
//     --shared_prefix_ratio of the prompt) followed by tokens of its own. Token ids are
//     synthetic and deterministic.
//  2. A prompt's tokens are cut into chunks of --chunk_tokens (LMCache's chunk_size, 256);
//     a partial last chunk is not stored (vLLM keeps only full blocks). A chunk's key is
//     the hash chain of the prompt up to and including that chunk (hash_i =
//     SHA-256(hash_{i-1} || token ids of chunk i)), so equal prefixes give equal keys and
//     a shared system prompt is stored once. The key names the model like LMCache's
//     model@world_size@worker@hash.
//  3. A chunk's object is bytes per token (from internal/kvmodel, as `mooncake kvcost`
//     prints it) x chunk tokens.
//  4. Store: per prompt, one BatchExists of its chunk keys, then one BatchPut of the
//     missing ones. A chunk found stored, or refused as already existing because a
//     concurrent prompt stored it first, counts as deduplicated.
//  5. Load: per prompt, in prefix order, one BatchExists (LMCache's lookup) up to the
//     first missing chunk, then one BatchGetInto of that prefix into the prompt's
//     buffers; a chunk that fails to read ends the prefix there (an engine recomputes
//     from its first miss). Every loaded chunk is checked to be the bytes stored under
//     its key.
//
// A batch is one prompt's calls; p50 and p99 are per batch.

// Defaults of the kvcache workload, modest for a 2-core machine and the default 1 GiB
// segment: with Qwen2-7B (57,344 bytes/token, a 14 MiB chunk) 16 prompts of 1,024 tokens
// half shared by 2 system prompts write 36 chunks, 505 MiB.
const (
	defaultKVPrompts       = 16
	defaultKVPromptTokens  = 1024
	defaultKVSystemPrompts = 2
	defaultKVSharedRatio   = 0.5
)

// kvPoolSlack is how far a value's bytes may start into the shared value pool (see
// valuePool): 1 MiB gives 131,072 distinct 8-byte-aligned starts.
const kvPoolSlack = 1 << 20

// kvMaxBufferBytes bounds the client's load buffers (concurrency x one prompt's chunks).
const kvMaxBufferBytes = 8 << 30

// kvWorkload is the kvcache workload's parameters.
type kvWorkload struct {
	Prompts       int
	PromptTokens  int
	ChunkTokens   int
	SystemPrompts int
	SharedRatio   float64
	Concurrency   int
	// BytesPerToken is the model's KV bytes per token (kvmodel.Model.BytesPerToken).
	BytesPerToken int64
	// ModelTag names the model in keys (model_type, and the tp rank count).
	ModelTag string
	// KeyPrefix namespaces a run's keys ("bench/<random>/kv/"), so cleanup finds them.
	KeyPrefix string
	// Seed decides the token ids and the bytes.
	Seed uint64
}

func (w kvWorkload) validate() error {
	switch {
	case w.Prompts < 1 || w.Prompts > 1<<20:
		return fmt.Errorf("--prompts must be 1 to %d, got %d", 1<<20, w.Prompts)
	case w.ChunkTokens < 1 || w.ChunkTokens > 1<<20:
		return fmt.Errorf("--chunk_tokens must be 1 to %d, got %d", 1<<20, w.ChunkTokens)
	case w.PromptTokens < w.ChunkTokens:
		return fmt.Errorf("--prompt_tokens must be at least --chunk_tokens (%d), got %d", w.ChunkTokens, w.PromptTokens)
	case w.chunksPerPrompt() > 4096:
		return fmt.Errorf("--prompt_tokens / --chunk_tokens must be at most 4096 chunks (one batch), got %d", w.chunksPerPrompt())
	case w.SystemPrompts < 1 || w.SystemPrompts > 1<<20:
		return fmt.Errorf("--system_prompts must be 1 to %d, got %d", 1<<20, w.SystemPrompts)
	case math.IsNaN(w.SharedRatio) || w.SharedRatio < 0 || w.SharedRatio > 1:
		return fmt.Errorf("--shared_prefix_ratio must be 0 to 1, got %v", w.SharedRatio)
	case w.Concurrency < 1 || w.Concurrency > 1024:
		return fmt.Errorf("concurrency must be 1 to 1024, got %d", w.Concurrency)
	case w.BytesPerToken < 1:
		return fmt.Errorf("the model has %d bytes per token", w.BytesPerToken)
	case w.chunkBytes() > 1<<32:
		return fmt.Errorf("a chunk of %d tokens is %s, over the 4 GiB object limit: lower --chunk_tokens", w.ChunkTokens, base.Bytes(w.chunkBytes()))
	case int64(w.Concurrency)*int64(w.chunksPerPrompt())*w.chunkBytes() > kvMaxBufferBytes:
		return fmt.Errorf("concurrency x one prompt's chunks is %s of load buffers, over %s: lower --concurrency or --prompt_tokens",
			base.Bytes(int64(w.Concurrency)*int64(w.chunksPerPrompt())*w.chunkBytes()), base.Bytes(kvMaxBufferBytes))
	}
	return nil
}

func (w kvWorkload) chunkBytes() int64 { return int64(w.ChunkTokens) * w.BytesPerToken }

// chunksPerPrompt counts whole chunks; a partial last chunk is not stored.
func (w kvWorkload) chunksPerPrompt() int { return w.PromptTokens / w.ChunkTokens }

// sharedChunks is the chunks of a prompt that belong to its system prompt.
func (w kvWorkload) sharedChunks() int {
	return int(math.Round(w.SharedRatio * float64(w.chunksPerPrompt())))
}

// kvChunk is one chunk of a prompt.
type kvChunk struct {
	key string
	// off is where the chunk's bytes start in kvPlan.pool (poolOffset of the chunk's hash),
	// so equal keys have equal bytes and a chunk read back under the wrong key is caught.
	off int64
}

// kvPlan is a run's prompts and their chunks, computed before anything is timed.
type kvPlan struct {
	w       kvWorkload
	prompts [][]kvChunk
	// keys[i] is the keys of prompts[i], in prefix order (read-only: the batch calls share them).
	keys [][]string
	// pool holds the chunks' bytes (read-only after newKVPlan).
	pool valuePool
	// unique counts the distinct keys.
	unique int
}

// tokenIDs fills ids with deterministic token ids of stream (a system prompt or a prompt).
func (w kvWorkload) tokenIDs(ids []uint32, stream uint64) {
	r := rand.New(rand.NewPCG(w.Seed, stream))
	for i := range ids {
		ids[i] = r.Uint32N(152064) // a vocabulary the size of Qwen2's
	}
}

// newKVPlan derives every prompt's chunk keys from its token ids by the prefix hash chain.
func newKVPlan(w kvWorkload) *kvPlan {
	p := &kvPlan{w: w, prompts: make([][]kvChunk, w.Prompts), keys: make([][]string, w.Prompts)}
	n, shared := w.chunksPerPrompt(), w.sharedChunks()
	sharedTokens := shared * w.ChunkTokens
	tokens := make([]uint32, n*w.ChunkTokens)
	raw := make([]byte, 4*w.ChunkTokens)
	seen := make(map[string]bool)
	for i := range p.prompts {
		// The system prompt's tokens, then the prompt's own (streams apart by the top bit).
		w.tokenIDs(tokens[:sharedTokens], uint64(i%w.SystemPrompts))
		w.tokenIDs(tokens[sharedTokens:], 1<<63|uint64(i))
		// The chain starts from a hash of the seed (vLLM's NONE_HASH is random per run), so
		// runs with different seeds share no keys.
		h := sha256.Sum256(binary.LittleEndian.AppendUint64(nil, w.Seed))
		chunks, keys := make([]kvChunk, n), make([]string, n)
		for c := range chunks {
			for j, t := range tokens[c*w.ChunkTokens : (c+1)*w.ChunkTokens] {
				binary.LittleEndian.PutUint32(raw[4*j:], t)
			}
			d := sha256.New()
			d.Write(h[:])
			d.Write(raw)
			d.Sum(h[:0])
			key := fmt.Sprintf("%s%s@%x", w.KeyPrefix, w.ModelTag, h[:16])
			keys[c] = key
			chunks[c] = kvChunk{key: key, off: poolOffset(binary.LittleEndian.Uint64(h[16:24]))}
			if !seen[key] {
				seen[key] = true
				p.unique++
			}
		}
		p.prompts[i], p.keys[i] = chunks, keys
	}
	p.pool = newValuePool(w.chunkBytes(), w.Seed)
	return p
}

func (p *kvPlan) value(c kvChunk) []byte { return p.pool.at(c.off) }

// check reports whether got is the value of chunk c.
func (p *kvPlan) check(c kvChunk, got []byte) bool { return p.pool.check(c.off, got) }

// valuePool holds the bytes of a run's values, all of one size: the value at off is
// bytes[off : off+size]. One incompressible buffer instead of one per value keeps the
// client's memory at one value plus kvPoolSlack, and the puts copy-free; a value's offset is
// derived from its key, so a value read back under the wrong key is caught. Read-only after
// newValuePool.
type valuePool struct {
	bytes []byte
	size  int64
}

func newValuePool(size int64, seed uint64) valuePool {
	p := valuePool{bytes: make([]byte, size+kvPoolSlack), size: size}
	benchmarks.Fill(p.bytes, seed)
	return p
}

// poolOffset maps a key's hash to an 8-byte-aligned offset in the pool.
func poolOffset(h uint64) int64 { return int64(h%(kvPoolSlack/8)) * 8 }

func (p valuePool) at(off int64) []byte { return p.bytes[off : off+p.size] }

// kvCheckWindow is the bytes compared at each of a loaded value's three sample points. The
// client already verified each object's checksum; this check proves the value is the one
// stored under its key (the pool offset differs per key) without a full second pass.
const kvCheckWindow = 4096

// check reports whether got is the value at off.
func (p valuePool) check(off int64, got []byte) bool {
	want := p.at(off)
	if len(got) != len(want) {
		return false
	}
	n := int64(len(want))
	win := min(int64(kvCheckWindow), n)
	for _, at := range []int64{0, (n - win) / 2, n - win} {
		if !bytes.Equal(got[at:at+win], want[at:at+win]) {
			return false
		}
	}
	return true
}

// kvStore is what the workload needs of the store: the batch calls an engine's connector
// makes. clientKV is the real one; tests use a map.
type kvStore interface {
	BatchExists(ctx context.Context, keys []string) ([]bool, error)
	BatchPut(ctx context.Context, keys []string, values [][]byte) []error
	BatchGetInto(ctx context.Context, keys []string, bufs [][]byte) ([]int, []error)
}

// clientKV is a kvStore on the Go client, storing with rc.
type clientKV struct {
	c  *client.Client
	rc client.ReplicateConfig
}

func (s clientKV) BatchExists(ctx context.Context, keys []string) ([]bool, error) {
	return s.c.BatchExists(ctx, keys)
}

func (s clientKV) BatchPut(ctx context.Context, keys []string, values [][]byte) []error {
	return s.c.BatchPut(ctx, keys, values, s.rc)
}

func (s clientKV) BatchGetInto(ctx context.Context, keys []string, bufs [][]byte) ([]int, []error) {
	return s.c.BatchGetInto(ctx, keys, bufs)
}

// kvPhase is what one phase (store or load) measured.
type kvPhase struct {
	// tokens: store, the prompts' tokens now in the store (written or found there);
	// load, the tokens loaded. requested is the prompts' tokens.
	tokens, requested int64
	// Chunks by outcome. Store: written, dedup (found stored or stored concurrently by
	// another prompt), failed. Load: loaded, missed (from the first missing chunk on).
	written, dedup, failed, loaded, missed int64
	// bytes moved: written or loaded.
	bytes   int64
	elapsed time.Duration
	// batches holds each prompt's latency, sorted ascending after the run.
	batches []time.Duration
	// firstErr is the first store or read error (not a miss), reported once.
	firstErr error
}

func (r *kvPhase) tokensPerSec() float64 { return perSec(float64(r.tokens), r.elapsed) }
func (r *kvPhase) gbps() float64         { return perSec(float64(r.bytes), r.elapsed) / 1e9 }

func perSec(n float64, d time.Duration) float64 {
	if d <= 0 {
		return 0
	}
	return n / d.Seconds()
}

func (r *kvPhase) percentile(q float64) time.Duration {
	return benchmarks.Result{Latencies: r.batches}.Percentile(q)
}

// hitRatio is the loaded share of the requested tokens.
func (r *kvPhase) hitRatio() float64 {
	if r.requested == 0 {
		return 0
	}
	return float64(r.tokens) / float64(r.requested)
}

// kvCounts is a phase's counters while its prompts run in parallel.
type kvCounts struct {
	tokens, written, dedup, failed, loaded, missed, bytes atomic.Int64
	mu                                                    struct {
		sync.Mutex
		batches  []time.Duration
		firstErr error
	}
}

func (k *kvCounts) done(d time.Duration, err error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.mu.batches = append(k.mu.batches, d)
	if k.mu.firstErr == nil && err != nil {
		k.mu.firstErr = err
	}
}

func (k *kvCounts) phase(p *kvPlan, elapsed time.Duration) kvPhase {
	slices.Sort(k.mu.batches)
	return kvPhase{tokens: k.tokens.Load(), requested: int64(p.w.Prompts) * int64(p.w.chunksPerPrompt()*p.w.ChunkTokens),
		written: k.written.Load(), dedup: k.dedup.Load(), failed: k.failed.Load(), loaded: k.loaded.Load(),
		missed: k.missed.Load(), bytes: k.bytes.Load(), elapsed: elapsed, batches: k.mu.batches, firstErr: k.mu.firstErr}
}

// eachPrompt runs fn on every prompt, in order, concurrency at a time; worker is the index of
// the goroutine (for its buffers). It returns the wall time, or the context's error.
func (p *kvPlan) eachPrompt(ctx context.Context, fn func(worker, prompt int) error) (time.Duration, error) {
	var (
		next     atomic.Int64
		wg       sync.WaitGroup
		errOnce  sync.Once
		stopErr  error
		start    = time.Now()
		nWorkers = min(p.w.Concurrency, p.w.Prompts)
	)
	for g := range nWorkers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1)) - 1
				if i >= p.w.Prompts || ctx.Err() != nil {
					return
				}
				if err := fn(g, i); err != nil {
					errOnce.Do(func() { stopErr = err })
					next.Store(int64(p.w.Prompts)) // the others stop at their next prompt
					return
				}
			}
		}()
	}
	wg.Wait()
	if stopErr == nil {
		stopErr = ctx.Err()
	}
	return time.Since(start), stopErr
}

// store stores every prompt's missing chunks. Store errors are counted, not fatal: an engine
// goes on serving when a chunk cannot be stored.
func (p *kvPlan) store(ctx context.Context, s kvStore) (kvPhase, error) {
	var k kvCounts
	ct := int64(p.w.ChunkTokens)
	elapsed, err := p.eachPrompt(ctx, func(_, i int) error {
		chunks, keys := p.prompts[i], p.keys[i]
		t0 := time.Now()
		exists, err := s.BatchExists(ctx, keys)
		if err != nil {
			k.failed.Add(int64(len(chunks)))
			k.done(time.Since(t0), err)
			return nil
		}
		var putKeys []string
		var putVals [][]byte
		for j, c := range chunks {
			if exists[j] {
				k.dedup.Add(1)
				k.tokens.Add(ct)
				continue
			}
			putKeys = append(putKeys, c.key)
			putVals = append(putVals, p.value(c))
		}
		var firstErr error
		if len(putKeys) > 0 {
			for j, err := range s.BatchPut(ctx, putKeys, putVals) {
				switch {
				case err == nil:
					k.written.Add(1)
					k.tokens.Add(ct)
					k.bytes.Add(int64(len(putVals[j])))
				case errors.Is(err, base.ErrObjectAlreadyExists):
					k.dedup.Add(1) // another prompt with the same prefix stored it first
					k.tokens.Add(ct)
				default:
					k.failed.Add(1)
					if firstErr == nil {
						firstErr = err
					}
				}
			}
		}
		k.done(time.Since(t0), firstErr)
		return nil
	})
	return k.phase(p, elapsed), err
}

// load reads every prompt's chunks back in prefix order, up to its first miss. A chunk read
// back with the wrong bytes fails the run.
func (p *kvPlan) load(ctx context.Context, s kvStore) (kvPhase, error) {
	var k kvCounts
	n := p.w.chunksPerPrompt()
	// One prompt's buffers per goroutine, reused from prompt to prompt.
	bufs := make([][][]byte, min(p.w.Concurrency, p.w.Prompts))
	for g := range bufs {
		bufs[g] = make([][]byte, n)
		for j := range bufs[g] {
			bufs[g][j] = make([]byte, p.w.chunkBytes())
		}
	}
	ct := int64(p.w.ChunkTokens)
	elapsed, err := p.eachPrompt(ctx, func(g, i int) error {
		chunks, keys := p.prompts[i], p.keys[i]
		t0 := time.Now()
		exists, err := s.BatchExists(ctx, keys)
		if err != nil {
			k.missed.Add(int64(len(chunks)))
			k.done(time.Since(t0), err)
			return nil
		}
		hit := len(keys)
		if j := slices.Index(exists, false); j >= 0 {
			hit = j
		}
		got, firstErr := hit, error(nil)
		if hit > 0 {
			sizes, errs := s.BatchGetInto(ctx, keys[:hit], bufs[g][:hit])
			for j := range hit {
				if errs[j] != nil {
					got = j
					if !errors.Is(errs[j], base.ErrObjectNotFound) {
						firstErr = errs[j]
					}
					break
				}
			}
			for j := range got {
				if !p.check(chunks[j], bufs[g][j][:sizes[j]]) {
					k.done(time.Since(t0), nil)
					return fmt.Errorf("chunk %d of prompt %d (%q) read back %d bytes that are not the ones stored under its key", j, i, keys[j], sizes[j])
				}
				k.bytes.Add(int64(sizes[j]))
			}
		}
		k.loaded.Add(int64(got))
		k.missed.Add(int64(len(keys) - got))
		k.tokens.Add(int64(got) * ct)
		k.done(time.Since(t0), firstErr)
		return nil
	})
	return k.phase(p, elapsed), err
}
