package main

import (
	"path/filepath"
	"strings"
	"testing"
)

// TestBenchTraceStandalone replays the small trace with `mooncake bench --workload trace`
// against `mooncake standalone`, as a user would: one request at a time into a segment that
// holds every block, the hit ratio is the infinite-cache bound worked by hand (3,584 of 6,972
// tokens), the LRU line is computed at the segment's capacity, the block size comes from
// --block_bytes or the model's config.json, bad flags are refused, and no object is left.
func TestBenchTraceStandalone(t *testing.T) {
	bin := buildBinary(t)
	_, master := startStandalone(t, bin, filepath.Join(t.TempDir(), "data"), "--global_segment_size", "64MiB", "--dram_only")
	env := []string{envMaster + "=" + master}
	path, _ := traceTestdata(t)
	bench := func(args ...string) cliResult {
		t.Helper()
		return runBin(t, bin, env, nil, append([]string{"bench", "--workload", "trace", "--trace", path}, args...)...)
	}
	r := bench("--block_bytes", "64KiB", "--concurrency", "1", "--speedup", "100")
	if r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	t.Logf("bench (noisy, shared machine):\n%s", r.stdout)
	for _, want := range []string{
		"bench: trace trace_small.jsonl: 6 requests over 0s, 16 blocks of 512 tokens, 9 distinct; block 65,536 bytes (--block_bytes) = 64.0 KiB; concurrency 1, 1 replica(s), speedup x100",
		"capacity       1,024 blocks of DRAM (64.0 MiB) + 0 of NVMe (0 B)",
		"(7 blocks, 3,584 tokens loaded from cached prefixes)",
		"(9 blocks written, 0 stored concurrently by another request, 0 failed)",
		"(6 requests in ",
		"hit ratio      0.514 (3,584 of 6,972 input tokens from cached prefixes)",
		"infinite cache 0.514 (the trace's bound)",
		"LRU DRAM       0.514 at 1,024 blocks; the store's hit ratio is 1.000 of it",
	} {
		if !strings.Contains(r.stdout, want) {
			t.Fatalf("output lacks %q:\n%s", want, r.stdout)
		}
	}
	if strings.Contains(r.stdout, "errors") || strings.Contains(r.stdout, "DRAM+NVMe") {
		t.Fatalf("unexpected lines:\n%s", r.stdout)
	}
	if r := runBin(t, bin, env, nil, "ls"); r.code != 0 || r.stdout != "" {
		t.Fatalf("bench left objects: exit %d %q %s", r.code, r.stdout, r.stderr)
	}

	// Blocks sized by a model: 512 tokens x 57,344 bytes of Qwen2-7B = 28 MiB.
	r = bench("--model", kvTestdata("qwen2-7b.json"), "--concurrency", "2", "--requests", "1")
	if r.code != 0 || !strings.Contains(r.stdout, "block 29,360,128 bytes (512 tokens x 57,344 bytes/token of qwen2-7b.json) = 28.0 MiB") ||
		!strings.Contains(r.stdout, "1 requests over 0s") {
		t.Fatalf("--model: exit %d:\n%s%s", r.code, r.stdout, r.stderr)
	}

	for _, c := range []struct {
		args []string
		want string
	}{
		{nil, "needs --model config.json or --block_bytes"},
		{[]string{"--block_bytes", "1KiB", "--model", kvTestdata("qwen2-7b.json")}, "not both"},
		{[]string{"--block_bytes", "1KiB", "--prompts", "3"}, "--prompts does not apply to --workload trace"},
		{[]string{"--block_bytes", "1KiB", "--size", "1KiB"}, "--size does not apply"},
		{[]string{"--block_bytes", "1KiB", "--rounds", "2"}, "--rounds does not apply"},
		{[]string{"--block_bytes", "1KiB", "--speedup", "-1"}, "--speedup must be 0 or more"},
		{[]string{"--block_bytes", "1KiB", "--requests", "-1"}, "--requests must be"},
		{[]string{"--block_bytes", "1KiB", "--trace", filepath.Join(t.TempDir(), "none.jsonl")}, "no such file"},
	} {
		r := bench(c.args...)
		if r.code == 0 || !strings.Contains(r.stderr, c.want) {
			t.Fatalf("%v: exit %d, stderr %q, want %q", c.args, r.code, r.stderr, c.want)
		}
	}
	if r := runBin(t, bin, env, nil, "bench", "--trace", path); r.code == 0 || !strings.Contains(r.stderr, "--trace does not apply to --workload objects") {
		t.Fatalf("--trace with objects: exit %d %s", r.code, r.stderr)
	}
}
