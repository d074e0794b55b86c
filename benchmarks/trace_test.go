package benchmarks

import (
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/mooncake-go/mooncake/internal/base"
)

func readSmallTrace(t *testing.T) []TraceRequest {
	t.Helper()
	f, err := os.Open("testdata/trace_small.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	reqs, err := ReadTrace(f)
	if err != nil {
		t.Fatal(err)
	}
	return reqs
}

// TestSimulateLRU checks the simulator against testdata/trace_small.jsonl worked by hand
// (6,972 input tokens, blocks 0-8):
//
//	request  ids        infinite hit         LRU of 4 blocks: hit, cache after (LRU first)
//	1        0 1        0                    0     0 1
//	2        0 1 2      1,024 (0 1)          1,024 0 1 2
//	3        3 4        0                    0     1 2 3 4
//	4        0 1 2 5    1,536 (0 1 2)        0     0 1 2 5 (each insert evicts)
//	5        3 6 7      512 (3)              0     5 3 6 7
//	6        0 8        512 (0)              0
//
// Infinite: 3,584 of 6,972 tokens. With 8 blocks nothing a prefix needs is evicted (block 4,
// the one evicted, is never asked again), so it equals the infinite cache.
func TestSimulateLRU(t *testing.T) {
	reqs := readSmallTrace(t)
	f := func(capacity int, want int64) {
		t.Helper()
		h := SimulateLRU(reqs, capacity)
		if h.HitTokens != want || h.InputTokens != 6972 {
			t.Fatalf("capacity %d: %+v, want %d of 6972 tokens", capacity, h, want)
		}
	}
	f(0, 3584)
	f(8, 3584)
	f(4, 1024)
	f(1, 0) // each request's first block was pushed out by the previous request's last
	if s := StatTrace(reqs); s != (TraceStats{Requests: 6, Blocks: 16, Distinct: 9, MaxBlocks: 4, SpanMS: 50}) {
		t.Fatalf("stats %+v", s)
	}
	if got := reqs[1].BlockTokens(2); got != 1500-1024 {
		t.Fatalf("partial block: %d tokens", got)
	}
}

// TestReadTrace: requests come back in timestamp order (ties in file order); bad lines are
// errors that name the line.
func TestReadTrace(t *testing.T) {
	reqs, err := ReadTrace(strings.NewReader(`{"timestamp": 5, "input_length": 1, "output_length": 1, "hash_ids": [1]}

{"timestamp": 0, "input_length": 513, "output_length": 1, "hash_ids": [2, 3]}
{"timestamp": 5, "input_length": 512, "output_length": 1, "hash_ids": [4]}
`))
	if err != nil {
		t.Fatal(err)
	}
	if len(reqs) != 3 || reqs[0].HashIDs[0] != 2 || reqs[1].HashIDs[0] != 1 || reqs[2].HashIDs[0] != 4 {
		t.Fatalf("order: %+v", reqs)
	}
	bad := func(text, want string) {
		t.Helper()
		_, err := ReadTrace(strings.NewReader(text))
		if !errors.Is(err, base.ErrInvalidParams) || !strings.Contains(err.Error(), want) {
			t.Fatalf("%q: error %v, want one containing %q", text, err, want)
		}
	}
	ok := `{"timestamp": 0, "input_length": 1, "output_length": 1, "hash_ids": [1]}` + "\n"
	bad("", "no requests")
	bad(ok+`{"timestamp": 0, "input_length": 1, "hash_ids": [1], "x": 1}`, "line 2: json: unknown field")
	bad(ok+`{"timestamp": 0, "input_length": 1025, "hash_ids": [1, 2]}`, "line 2: input_length 1025 does not fill 2 blocks")
	bad(`{"timestamp": 0, "input_length": 512, "hash_ids": [1, 2]}`, "line 1: input_length 512")
	bad(`{"timestamp": -1, "input_length": 1, "hash_ids": [1]}`, "negative")
	bad(`{"timestamp": 0, "input_length": 0, "hash_ids": []}`, "no hash_ids")
	bad(`{"timestamp": 0, "input_length": 1, "hash_ids": [1]} {}`, "more than one")
	bad(`[1]`, "line 1: json: cannot unmarshal")
}

// FuzzReadTrace: any input parses or fails with ErrInvalidParams, never panics, and what
// parses is sorted and consistent.
func FuzzReadTrace(f *testing.F) {
	data, err := os.ReadFile("testdata/trace_small.jsonl")
	if err != nil {
		f.Fatal(err)
	}
	f.Add(string(data))
	f.Add(`{"timestamp": 3, "input_length": 1, "hash_ids": [9]}`)
	f.Fuzz(func(t *testing.T, text string) {
		reqs, err := ReadTrace(strings.NewReader(text))
		if err != nil {
			if !errors.Is(err, base.ErrInvalidParams) {
				t.Fatalf("error not marked: %v", err)
			}
			return
		}
		for i := range reqs {
			if i > 0 && reqs[i].TimestampMS < reqs[i-1].TimestampMS {
				t.Fatalf("not sorted at %d", i)
			}
			last := len(reqs[i].HashIDs) - 1
			if reqs[i].BlockTokens(last) < 1 || reqs[i].BlockTokens(0) > TraceBlockTokens {
				t.Fatalf("request %d: block tokens out of range: %+v", i, reqs[i])
			}
		}
		inf := SimulateLRU(reqs, 0)
		if lru := SimulateLRU(reqs, 2); lru.HitTokens > inf.HitTokens || inf.HitTokens > inf.InputTokens {
			t.Fatalf("LRU %+v over the infinite bound %+v", lru, inf)
		}
	})
}
