package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/mooncake-go/mooncake/internal/base"
)

// memKV is a kvStore in a map, with the store's answers: a put of an existing key fails with
// ErrObjectAlreadyExists, a get of a missing one with ErrObjectNotFound.
type memKV struct {
	mu sync.Mutex // protects m, gets
	m  map[string][]byte
	// gets counts the keys read with BatchGetInto.
	gets int
	// lose makes a key vanish between BatchExists and BatchGetInto (an eviction).
	lose string
}

func newMemKV() *memKV { return &memKV{m: make(map[string][]byte)} }

func (s *memKV) BatchExists(_ context.Context, keys []string) ([]bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]bool, len(keys))
	for i, k := range keys {
		_, out[i] = s.m[k]
	}
	return out, nil
}

func (s *memKV) BatchPut(_ context.Context, keys []string, values [][]byte) []error {
	s.mu.Lock()
	defer s.mu.Unlock()
	errs := make([]error, len(keys))
	for i, k := range keys {
		if _, ok := s.m[k]; ok {
			errs[i] = fmt.Errorf("put %q: %w", k, base.ErrObjectAlreadyExists)
			continue
		}
		s.m[k] = append([]byte(nil), values[i]...)
	}
	return errs
}

func (s *memKV) BatchGetInto(_ context.Context, keys []string, bufs [][]byte) ([]int, []error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	sizes, errs := make([]int, len(keys)), make([]error, len(keys))
	for i, k := range keys {
		s.gets++
		v, ok := s.m[k]
		if !ok || k == s.lose {
			errs[i] = fmt.Errorf("get %q: %w", k, base.ErrObjectNotFound)
			continue
		}
		sizes[i] = copy(bufs[i], v)
	}
	return sizes, errs
}

// smallKV is a workload of small chunks (64 bytes per token x 4 tokens).
func smallKV(prompts, promptTokens, systemPrompts int, ratio float64) kvWorkload {
	return kvWorkload{Prompts: prompts, PromptTokens: promptTokens, ChunkTokens: 4, SystemPrompts: systemPrompts,
		SharedRatio: ratio, Concurrency: 3, BytesPerToken: 64, ModelTag: "m@1@0", KeyPrefix: "t/", Seed: 7}
}

// TestKVPlanKeys: keys follow the prefix hash chain, so prompts with one system prompt share
// exactly its chunks' keys and nothing after them.
func TestKVPlanKeys(t *testing.T) {
	f := func(w kvWorkload, wantShared, wantUnique int) {
		t.Helper()
		p := newKVPlan(w)
		if got := w.sharedChunks(); got != wantShared {
			t.Fatalf("%+v: %d shared chunks, want %d", w, got, wantShared)
		}
		if p.unique != wantUnique {
			t.Fatalf("%+v: %d distinct keys, want %d", w, p.unique, wantUnique)
		}
		for i := range p.prompts {
			for j := range p.prompts {
				same := i%w.SystemPrompts == j%w.SystemPrompts
				for c := range p.prompts[i] {
					eq := p.prompts[i][c].key == p.prompts[j][c].key
					if want := i == j || (same && c < wantShared); eq != want {
						t.Fatalf("prompts %d and %d chunk %d: equal keys %v, want %v", i, j, c, eq, want)
					}
				}
			}
		}
		k := p.prompts[0][0].key
		if !strings.HasPrefix(k, "t/m@1@0@") || len(k) != len("t/m@1@0@")+32 {
			t.Fatalf("key %q, want t/m@1@0@ and 32 hex digits", k)
		}
	}
	f(smallKV(6, 32, 2, 0.5), 4, 2*4+6*4) // 8 chunks per prompt, half shared
	f(smallKV(6, 34, 2, 0.5), 4, 2*4+6*4) // a partial last chunk is not stored
	f(smallKV(6, 32, 1, 1), 8, 8)         // every prompt is the one system prompt
	f(smallKV(6, 32, 3, 0), 0, 6*8)       // nothing shared
	f(smallKV(2, 32, 4, 0.25), 2, 2*2+2*6)

	// Another seed shares no key (vLLM's NONE_HASH is per run).
	a, b := smallKV(2, 32, 1, 1), smallKV(2, 32, 1, 1)
	b.Seed = 8
	if newKVPlan(a).prompts[0][0].key == newKVPlan(b).prompts[0][0].key {
		t.Fatal("two seeds gave the same first key")
	}
}

// TestKVStoreLoad runs the workload on a map: shared chunks are written once and counted as
// deduplicated, every token is loaded back, and a load stops at a prompt's first miss.
func TestKVStoreLoad(t *testing.T) {
	ctx := context.Background()
	w := smallKV(6, 32, 2, 0.5)
	p := newKVPlan(w)
	s := newMemKV()
	st, err := p.store(ctx, s)
	if err != nil {
		t.Fatal(err)
	}
	total := int64(w.Prompts * w.chunksPerPrompt())
	if st.written != int64(p.unique) || st.dedup != total-int64(p.unique) || st.failed != 0 || len(s.m) != p.unique {
		t.Fatalf("store: %d written, %d dedup, %d failed, %d objects; want %d written, %d dedup", st.written, st.dedup, st.failed, len(s.m), p.unique, total-int64(p.unique))
	}
	if st.tokens != st.requested || st.bytes != int64(p.unique)*w.chunkBytes() || len(st.batches) != w.Prompts {
		t.Fatalf("store: %d of %d tokens, %d bytes, %d batches", st.tokens, st.requested, st.bytes, len(st.batches))
	}
	ld, err := p.load(ctx, s)
	if err != nil {
		t.Fatal(err)
	}
	if ld.tokens != st.tokens || ld.hitRatio() != 1 || ld.loaded != total || ld.missed != 0 || ld.bytes != total*w.chunkBytes() {
		t.Fatalf("load: %d tokens (stored %d), hit ratio %v, %d loaded, %d missed, %d bytes", ld.tokens, st.tokens, ld.hitRatio(), ld.loaded, ld.missed, ld.bytes)
	}

	// Storing again writes nothing.
	if st2, err := p.store(ctx, s); err != nil || st2.written != 0 || st2.dedup != total {
		t.Fatalf("second store: %v, %d written, %d dedup", err, st2.written, st2.dedup)
	}

	// Remove chunk 5 of prompt 0 (its own part): prompt 0 loads 5 chunks and reads nothing
	// past the miss.
	w1 := w
	w1.Prompts, w1.Concurrency = 1, 1
	p1 := newKVPlan(w1)
	delete(s.m, p1.prompts[0][5].key)
	s.gets = 0
	ld, err = p1.load(ctx, s)
	if err != nil {
		t.Fatal(err)
	}
	if ld.loaded != 5 || ld.missed != 3 || ld.tokens != 5*4 || s.gets != 5 || ld.hitRatio() != 5.0/8 {
		t.Fatalf("load with a miss: %d loaded, %d missed, %d tokens, %d gets, hit ratio %v", ld.loaded, ld.missed, ld.tokens, s.gets, ld.hitRatio())
	}
	// A chunk evicted between the lookup and the read ends the prefix there, not the run.
	s.lose = p1.prompts[0][2].key
	if ld, err = p1.load(ctx, s); err != nil || ld.loaded != 2 || ld.missed != 6 || ld.firstErr != nil {
		t.Fatalf("load with an eviction: %v, %d loaded, %d missed, first error %v", err, ld.loaded, ld.missed, ld.firstErr)
	}
	s.lose = ""

	// A chunk with the wrong bytes fails the run.
	s.m[p1.prompts[0][1].key][0] ^= 1
	if _, err := p1.load(ctx, s); err == nil || !strings.Contains(err.Error(), "not the ones stored under its key") {
		t.Fatalf("load of a corrupt chunk: %v", err)
	}
}

func TestKVWorkloadValidate(t *testing.T) {
	f := func(want string, mod func(w *kvWorkload)) {
		t.Helper()
		w := smallKV(6, 32, 2, 0.5)
		mod(&w)
		err := w.validate()
		if want == "" {
			if err != nil {
				t.Fatalf("%+v: %v", w, err)
			}
			return
		}
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Fatalf("%+v: error %v, want %q", w, err, want)
		}
	}
	f("", func(*kvWorkload) {})
	f("--prompts must be", func(w *kvWorkload) { w.Prompts = 0 })
	f("--chunk_tokens must be", func(w *kvWorkload) { w.ChunkTokens = 0 })
	f("--prompt_tokens must be at least", func(w *kvWorkload) { w.PromptTokens = 3 })
	f("at most 4096 chunks", func(w *kvWorkload) { w.PromptTokens = 4 * 5000 })
	f("--system_prompts must be", func(w *kvWorkload) { w.SystemPrompts = 0 })
	f("--shared_prefix_ratio must be", func(w *kvWorkload) { w.SharedRatio = 1.5 })
	f("concurrency must be", func(w *kvWorkload) { w.Concurrency = 0 })
	f("over the 4 GiB object limit", func(w *kvWorkload) { w.BytesPerToken = 2 << 30 })
	f("of load buffers", func(w *kvWorkload) { w.BytesPerToken, w.Concurrency = 1<<28, 1024 })
}

// TestKVBenchBadInput: every bad kvcache command line gets one line on stderr and the usage
// exit code, before anything connects.
func TestKVBenchBadInput(t *testing.T) {
	dir := t.TempDir()
	badField := filepath.Join(dir, "bad-field.json")
	os.WriteFile(badField, []byte(`{"num_hidden_layers": "many", "torch_dtype": "float16"}`), 0o644)
	notJSON := filepath.Join(dir, "not.json")
	os.WriteFile(notJSON, []byte("layers: 28\n"), 0o644)
	q := kvTestdata("qwen2-7b.json")
	f := func(wantSub string, args ...string) {
		t.Helper()
		code, _, stderr := runCLI(t, nil, "", append([]string{"bench"}, args...)...)
		if code != exitUsage || strings.Count(stderr, "\n") != 1 || !strings.HasPrefix(stderr, "mooncake: ") || !strings.Contains(stderr, wantSub) {
			t.Fatalf("%v: exit %d, stderr %q; want exit %d and one line containing %q", args, code, stderr, exitUsage, wantSub)
		}
	}
	f("--workload kvcache needs --model config.json", "--workload", "kvcache")
	f("no such file", "--workload", "kvcache", "--model", filepath.Join(dir, "missing.json"))
	f(`field num_hidden_layers is "many", want a positive integer`, "--workload", "kvcache", "--model", badField)
	f("not a JSON object", "--workload", "kvcache", "--model", notJSON)
	f(`unknown workload "ycsb" (want objects, kvcache or trace)`, "--workload", "ycsb")
	f("--op does not apply to --workload kvcache", "--workload", "kvcache", "--model", q, "--op", "get")
	f("--tokens does not apply to --workload kvcache", "--workload", "kvcache", "--model", q, "--tokens", "5")
	f("--prompts does not apply to --workload objects", "--prompts", "3")
	f("--prompts must be 1 to", "--workload", "kvcache", "--model", q, "--prompts", "0")
	f("--shared_prefix_ratio must be 0 to 1", "--workload", "kvcache", "--model", q, "--shared_prefix_ratio", "2")
	f("--prompt_tokens must be at least --chunk_tokens", "--workload", "kvcache", "--model", q, "--prompt_tokens", "100")
	f("--tp must be 1 or more", "--workload", "kvcache", "--model", q, "--tp", "0")
	f("--model_name: invalid params: model name", "--workload", "kvcache", "--model", q, "--model_name", "two words")
	f("--model_name does not apply to --workload objects", "--model_name", "m")
	f("--rounds must be 1 to 100", "--workload", "kvcache", "--model", q, "--rounds", "0")
}
