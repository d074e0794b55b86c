package main

import (
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestBenchKVCacheStandalone runs `mooncake bench --workload kvcache` as a user would, against
// `mooncake standalone`: the report has its fields, every stored token is loaded back (the
// workload checks each chunk's bytes against its key), shared prefixes are written once,
// --baseline and --rounds work, and the run leaves no objects behind.
func TestBenchKVCacheStandalone(t *testing.T) {
	bin := buildBinary(t)
	_, master := startStandalone(t, bin, filepath.Join(t.TempDir(), "data"), "--global_segment_size", "256MiB")
	env := []string{envMaster + "=" + master}
	model := kvTestdata("qwen2-7b.json")
	bench := func(args ...string) string {
		t.Helper()
		r := runBin(t, bin, env, nil, append([]string{"bench", "--workload", "kvcache", "--model", model}, args...)...)
		if r.code != 0 {
			t.Fatalf("bench %v: exit %d: %s", args, r.code, r.stderr)
		}
		t.Logf("bench %v (noisy, shared machine):\n%s", args, r.stdout)
		return r.stdout
	}

	// 6 prompts of 8 chunks of 64 tokens (3.5 MiB each), the first 4 from one of 2 system
	// prompts: 48 chunks, 2x4 + 6x4 = 32 distinct, 16 deduplicated.
	out := bench("--prompts", "6", "--prompt_tokens", "512", "--chunk_tokens", "64", "--system_prompts", "2",
		"--shared_prefix_ratio", "0.5", "--concurrency", "3")
	for _, want := range []string{
		"bytes/token    57,344 (4 KV heads x 128 head_dim x 2 (K and V) x 2 bytes x 28 layers = 57,344 bytes)",
		"chunk          64 tokens = 3,670,016 bytes (3.5 MiB)",
		"bench: 48 chunks, 32 distinct (112.0 MiB); concurrency 3 prompts",
		"dedup          16 of 48 chunks (33.3%) were stored already (shared prefixes), 32 written = 2,048 tokens",
		"hit ratio      1.000 (3,072 of 3,072 tokens loaded",
	} {
		if !strings.Contains(out, want) {
			t.Fatalf("output lacks %q:\n%s", want, out)
		}
	}
	num := `([\d,]+)`
	st := regexp.MustCompile(`kvcache store +` + num + ` tokens/s +[\d.]+ GB/s  p50 \S+ +p99 \S+ +per batch \(6 batches, ` + num + ` tokens: 32 chunks written, 16 deduplicated, 0 failed; 112.0 MiB in `).FindStringSubmatch(out)
	ld := regexp.MustCompile(`kvcache load +` + num + ` tokens/s +[\d.]+ GB/s  p50 \S+ +p99 \S+ +per batch \(6 batches, ` + num + ` tokens: 48 chunks loaded, 0 missed; 168.0 MiB in `).FindStringSubmatch(out)
	if st == nil || ld == nil {
		t.Fatalf("store or load line not as expected:\n%s", out)
	}
	if st[2] != "3,072" || ld[2] != st[2] || st[1] == "0" || ld[1] == "0" {
		t.Fatalf("stored %s tokens at %s tokens/s, loaded %s at %s tokens/s; want 3,072 both, non-zero rates", st[2], st[1], ld[2], ld[1])
	}
	if strings.Contains(out, "errors") {
		t.Fatalf("errors reported:\n%s", out)
	}

	// The default 256-token chunks, with the baseline and two rounds (fresh keys each).
	out = bench("--prompts", "2", "--prompt_tokens", "512", "--concurrency", "2", "--baseline", "--rounds", "2")
	for _, want := range []string{"chunk          256 tokens = 14,680,064 bytes (14.0 MiB)", "loopback put", "loopback get",
		"kvcache store GB/s / raw loopback TCP GB/s", "median store", "median load", "median ratio store", "median ratio load"} {
		if !strings.Contains(out, want) {
			t.Fatalf("output lacks %q:\n%s", want, out)
		}
	}
	if n := strings.Count(out, "hit ratio      1.000 (1,024 of 1,024 tokens loaded"); n != 2 {
		t.Fatalf("want 2 rounds with every token loaded, got %d:\n%s", n, out)
	}
	if r := runBin(t, bin, env, nil, "ls"); r.code != 0 || r.stdout != "" {
		t.Fatalf("bench left objects: exit %d %q %s", r.code, r.stdout, r.stderr)
	}

	// --model_name tags each chunk with its tokens: the master's count of the model's retained
	// tokens is the tokens the run wrote (each shared chunk once). --keep leaves the chunks.
	if r := runBin(t, bin, env, nil, "model", "add", "qwen2-7b", model); r.code != 0 {
		t.Fatalf("model add: exit %d: %s", r.code, r.stderr)
	}
	out = bench("--prompts", "4", "--prompt_tokens", "256", "--chunk_tokens", "64", "--system_prompts", "1",
		"--model_name", "qwen2-7b", "--keep")
	if !strings.Contains(out, "6 of 16 chunks (37.5%) were stored already (shared prefixes), 10 written = 640 tokens") {
		t.Fatalf("dedup line not as expected:\n%s", out)
	}
	r := runBin(t, bin, env, nil, "model", "ls")
	if r.code != 0 || !regexp.MustCompile(`qwen2-7b\s.* 640 `).MatchString(r.stdout) {
		t.Fatalf("model ls: want qwen2-7b with 640 tokens: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if r := runBin(t, bin, env, nil, "ls", "--prefix", "bench/"); r.code != 0 || strings.Count(r.stdout, "\n") != 10 {
		t.Fatalf("--keep: want the 10 chunks: exit %d\n%s", r.code, r.stdout)
	}
}
