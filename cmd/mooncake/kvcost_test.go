package main

import (
	"path/filepath"
	"strings"
	"testing"
)

func kvTestdata(name string) string {
	return filepath.Join("..", "..", "internal", "kvmodel", "testdata", name)
}

// TestKVCost runs `mooncake kvcost` in-process on real configs and checks the figures
// computed by hand (see internal/kvmodel's TestBytesPerToken) and the one-line errors.
func TestKVCost(t *testing.T) {
	f := func(wantLines []string, args ...string) {
		t.Helper()
		code, out, stderr := runCLI(t, nil, "", append([]string{"kvcost"}, args...)...)
		if code != exitOK {
			t.Fatalf("%v: exit %d: %s", args, code, stderr)
		}
		for _, w := range wantLines {
			if !strings.Contains(out, w) {
				t.Fatalf("%v: output lacks %q:\n%s", args, w, out)
			}
		}
	}
	f([]string{"57,344", "4 KV heads x 128 head_dim x 2 (K and V) x 2 bytes x 28 layers", "hidden_size / num_attention_heads = 3584 / 28",
		"float16, 2 bytes per value", "14,680,064", "18,724", "57,344,000 bytes"},
		"--model", kvTestdata("qwen2-7b.json"), "--dtype", "float16", "--tokens", "1000")
	f([]string{"131,072", "33,554,432", "for 256 tokens"}, "--model", kvTestdata("llama-3.1-8b.json"))
	f([]string{"67,108,864", "for 512 tokens"}, "--model", kvTestdata("llama-3.1-8b.json"), "--chunk_tokens", "512")
	f([]string{"458,752", "256                          head_dim"}, "--model", kvTestdata("gemma-7b.json"))
	f([]string{"70,272", "MLA", "every rank stores the whole latent"}, "--model", kvTestdata("deepseek-v3.json"), "--tp", "8")
	f([]string{"163,840", "(text_config)"}, "--model", kvTestdata("llama-3.2-11b-vision.json"))
	f([]string{"28,672", "ceil(4 / 2 tp) = 2 KV heads"}, "--model", kvTestdata("qwen2-7b.json"), "--tp", "2")

	bad := func(wantSub string, args ...string) {
		t.Helper()
		code, _, stderr := runCLI(t, nil, "", append([]string{"kvcost"}, args...)...)
		if code != exitUsage || strings.Count(stderr, "\n") != 1 || !strings.Contains(stderr, wantSub) {
			t.Fatalf("%v: exit %d, stderr %q, want one line with %q", args, code, stderr, wantSub)
		}
	}
	bad("--model config.json is required")
	bad("missing field text_config.num_hidden_layers", "--model", kvTestdata("llava-1.5-7b-hf.json"))
	bad("no such file", "--model", kvTestdata("nope.json"))
	bad(`unknown dtype "fp12"`, "--model", kvTestdata("qwen2-7b.json"), "--dtype", "fp12")
	bad("--tp must be 1 or more", "--model", kvTestdata("qwen2-7b.json"), "--tp", "0")
	bad("--chunk_tokens must be 1 or more", "--model", kvTestdata("qwen2-7b.json"), "--chunk_tokens", "0")
}

// TestMemoryBadInput: the memory and model commands' bad input gets one line and exit 2
// before anything is sent.
func TestMemoryBadInput(t *testing.T) {
	f := func(wantSub string, args ...string) {
		t.Helper()
		code, _, stderr := runCLI(t, nil, "", args...)
		if code != exitUsage || strings.Count(stderr, "\n") != 1 || !strings.Contains(stderr, wantSub) {
			t.Fatalf("%v: exit %d, stderr %q, want one line with %q", args, code, stderr, wantSub)
		}
	}
	f("--tokens must be 0 to 4294967295", "put", "--tokens", "-1", "k", "-")
	f("--tokens must be 0 to 4294967295", "put", "--tokens", "4294967296", "k", "-")
	f("no spaces or control characters", "put", "--model", "a b", "k", "-")
	f("model name must be 1 to 128 bytes", "put", "--model", strings.Repeat("m", 129), "k", "-")
	f("--tokens must be 0 to 4294967295", "bench", "--tokens", "-5")
	f("--threshold must be a percent above 0", "memory", "--threshold", "0")
	f("model: want add, ls or rm", "model")
	f("want NAME config.json", "model", "add", "only-name")
	f("missing field text_config.num_hidden_layers", "model", "add", "llava", kvTestdata("llava-1.5-7b-hf.json"))
	f("no spaces or control characters", "model", "rm", "bad name")
}
