package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mooncake-go/mooncake/benchmarks"
)

// traceTestdata is the small trace worked by hand in benchmarks/trace_test.go (TestSimulateLRU):
// 6 requests, 6,972 input tokens, 3,584 of them in cached prefixes with an infinite cache,
// 9 distinct blocks.
func traceTestdata(t *testing.T) (string, []benchmarks.TraceRequest) {
	t.Helper()
	path, err := filepath.Abs(filepath.Join("..", "..", "benchmarks", "testdata", "trace_small.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	reqs, err := benchmarks.ReadTrace(f)
	if err != nil {
		t.Fatal(err)
	}
	return path, reqs
}

// TestTraceReplay replays the small trace against a map (a cache that never evicts): one
// request at a time, the hits are the infinite-cache bound worked by hand, every distinct
// block is written once, and a block read back wrong fails the run.
func TestTraceReplay(t *testing.T) {
	_, reqs := traceTestdata(t)
	ctx := context.Background()
	s := newMemKV()
	r, err := newTraceReplay(reqs, 1000, 1, 0, "t/", 3)
	if err != nil {
		t.Fatal(err)
	}
	res, err := r.run(ctx, s)
	if err != nil {
		t.Fatal(err)
	}
	// Loaded: 2 blocks (request 2), 3 (request 4), 1 (5), 1 (6). Written: the 9 distinct
	// blocks; stored tokens: every input token but the hits (6,972 - 3,584), as each block
	// missing is stored once.
	if res.hits != (benchmarks.TraceHits{HitTokens: 3584, InputTokens: 6972}) || res.loaded != 7 || res.written != 9 ||
		res.storedTokens != 6972-3584 || res.dedup != 0 || res.failed != 0 || res.loadedBytes != 7000 || res.storedBytes != 9000 ||
		len(res.latencies) != 6 || res.firstErr != nil {
		t.Fatalf("result %+v", res)
	}
	if len(s.m) != 9 || s.gets != 7 {
		t.Fatalf("store holds %d keys after %d gets", len(s.m), s.gets)
	}

	// The same trace again, concurrently and paced (x1000: 50 ms of arrivals): every block is
	// there, so every request hits its whole input.
	r.concurrency, r.speedup = 3, 1000
	if res, err = r.run(ctx, s); err != nil || res.hits.HitTokens != 6972 || res.written != 0 {
		t.Fatalf("second run: %+v, %v", res, err)
	}

	// A block lost between exists and get ends its request's prefix there.
	s2 := newMemKV()
	r.concurrency, r.speedup = 1, 0
	s2.lose = r.key(2)
	if res, err = r.run(ctx, s2); err != nil || res.hits.HitTokens != 3584-512 || res.firstErr != nil {
		t.Fatalf("lost block: %+v, %v", res, err)
	}

	// Wrong bytes under a key fail the run, naming the block.
	s.m[r.key(1)][0] ^= 1
	if _, err := r.run(ctx, s); err == nil || !strings.Contains(err.Error(), `"t/1"`) {
		t.Fatalf("corrupt block: %v", err)
	}
}

// TestTraceReplayLimits: bad parameters are refused with the limit named.
func TestTraceReplayLimits(t *testing.T) {
	_, reqs := traceTestdata(t)
	f := func(blockBytes int64, conc int, speedup float64, want string) {
		t.Helper()
		if _, err := newTraceReplay(reqs, blockBytes, conc, speedup, "t/", 1); err == nil || !strings.Contains(err.Error(), want) {
			t.Fatalf("%d %d %v: error %v, want %q", blockBytes, conc, speedup, err, want)
		}
	}
	f(0, 1, 0, "a block must be")
	f(1000, 0, 0, "concurrency must be")
	f(1000, 1, -1, "--speedup must be")
	f(1<<30, 8, 0, "of load buffers")
}
