package kvmodel

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func readConfig(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestBytesPerToken checks real config.json files against figures computed by hand:
//
//	Qwen2-7B     4 x 128 x 2 x 2 x 28            = 57,344
//	Llama-3.1-8B 8 x 128 x 2 x 2 x 32            = 131,072
//	Mistral-7B   8 x 128 x 2 x 2 x 32            = 131,072
//	Gemma-7B     16 x 256 (head_dim) x 2 x 2 x 28 = 458,752 (hidden/heads would give 192)
//	DeepSeek-V3  (512 + 64) x 2 x 61             = 70,272
//	Llama-3.2-11B-Vision (text_config) 8 x 128 x 2 x 2 x 40 = 163,840
func TestBytesPerToken(t *testing.T) {
	f := func(file string, o Options, want int64, att Attention, headDimFrom string) {
		t.Helper()
		m, err := Parse(readConfig(t, file), o)
		if err != nil {
			t.Fatalf("%s: %v", file, err)
		}
		if got := m.BytesPerToken(); got != want {
			t.Fatalf("%s %+v: %d bytes/token, want %d (%s)", file, o, got, want, m.Formula())
		}
		if m.Attention != att || m.HeadDimFrom != headDimFrom {
			t.Fatalf("%s: attention %s head_dim from %q, want %s %q", file, m.Attention, m.HeadDimFrom, att, headDimFrom)
		}
		if !strings.HasSuffix(m.Formula(), Commas(want)+" bytes") {
			t.Fatalf("%s: formula %q does not end in %s bytes", file, m.Formula(), Commas(want))
		}
	}
	derived := "hidden_size / num_attention_heads"
	f("qwen2-7b.json", Options{}, 57344, GQA, derived)
	f("qwen2-7b.json", Options{DType: "float16"}, 57344, GQA, derived)
	f("qwen2-7b.json", Options{DType: "float32"}, 114688, GQA, derived)
	f("qwen2-7b.json", Options{DType: "float8_e4m3fn"}, 28672, GQA, derived)
	f("qwen2-7b.json", Options{TP: 2}, 28672, GQA, derived)
	f("qwen2-7b.json", Options{TP: 8}, 14336, GQA, derived) // 4 heads over 8 ranks: 1 each
	f("llama-3.1-8b.json", Options{}, 131072, GQA, derived)
	f("llama-3.1-8b.json", Options{TP: 4}, 32768, GQA, derived)
	f("mistral-7b-v0.1.json", Options{}, 131072, GQA, derived)
	f("gemma-7b.json", Options{}, 458752, MHA, "head_dim")
	f("deepseek-v3.json", Options{}, 70272, MLA, "")
	f("deepseek-v3.json", Options{TP: 8}, 70272, MLA, "") // the latent is not split
	f("llama-3.2-11b-vision.json", Options{}, 163840, GQA, derived)
}

func TestFormula(t *testing.T) {
	m, err := Parse(readConfig(t, "qwen2-7b.json"), Options{DType: "float16"})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := m.Formula(), "4 KV heads x 128 head_dim x 2 (K and V) x 2 bytes x 28 layers = 57,344 bytes"; got != want {
		t.Fatalf("formula %q, want %q", got, want)
	}
	m, _ = Parse(readConfig(t, "deepseek-v3.json"), Options{})
	if got, want := m.Formula(), "(512 kv_lora_rank + 64 qk_rope_head_dim) x 2 bytes x 61 layers = 70,272 bytes"; got != want {
		t.Fatalf("formula %q, want %q", got, want)
	}
	m, _ = Parse(readConfig(t, "llama-3.1-8b.json"), Options{TP: 3})
	if got, want := m.Formula(), "ceil(8 / 3 tp) = 3 KV heads x 128 head_dim x 2 (K and V) x 2 bytes x 32 layers = 49,152 bytes"; got != want {
		t.Fatalf("formula %q, want %q", got, want)
	}
}

// TestBadConfigs: every config kvmodel cannot use gives one line naming the field.
func TestBadConfigs(t *testing.T) {
	f := func(config string, o Options, want string) {
		t.Helper()
		_, err := Parse([]byte(config), o)
		if err == nil {
			t.Fatalf("%s: no error, want %q", config, want)
		}
		if !errors.Is(err, ErrBadConfig) {
			t.Fatalf("%s: %v does not match ErrBadConfig", config, err)
		}
		if !strings.Contains(err.Error(), want) || strings.Contains(err.Error(), "\n") {
			t.Fatalf("%s: error %q, want one line containing %q", config, err, want)
		}
	}
	full := `"num_hidden_layers": 28, "num_attention_heads": 28, "num_key_value_heads": 4, "hidden_size": 3584`
	f(``, Options{}, "not a JSON object")
	f(`[1, 2]`, Options{}, "not a JSON object")
	f(`{"num_attention_heads": 28, "hidden_size": 3584, "torch_dtype": "float16"}`, Options{}, "missing field num_hidden_layers")
	f(`{`+full+`}`, Options{}, "missing field torch_dtype")
	f(`{`+full+`, "torch_dtype": "float13"}`, Options{}, `unknown dtype "float13"`)
	f(`{`+full+`}`, Options{DType: "int3"}, `unknown dtype "int3"`)
	f(`{"num_hidden_layers": 28, "num_key_value_heads": 4, "hidden_size": 3584, "torch_dtype": "float16"}`, Options{}, "missing field num_attention_heads")
	f(`{"num_hidden_layers": 28, "num_attention_heads": 28, "torch_dtype": "float16"}`, Options{}, "missing field hidden_size")
	f(`{"num_hidden_layers": "28", "torch_dtype": "float16"}`, Options{}, "field num_hidden_layers is \"28\"")
	f(`{"num_hidden_layers": 2.5, "torch_dtype": "float16"}`, Options{}, "field num_hidden_layers is 2.5")
	f(`{"num_hidden_layers": -1, "torch_dtype": "float16"}`, Options{}, "field num_hidden_layers is -1")
	f(`{"num_hidden_layers": 28, "num_attention_heads": 28, "num_key_value_heads": 5, "hidden_size": 3584, "torch_dtype": "float16"}`, Options{}, "num_key_value_heads 5 does not divide")
	f(`{"num_hidden_layers": 28, "num_attention_heads": 28, "hidden_size": 3585, "torch_dtype": "float16"}`, Options{}, "needs head_dim")
	f(`{"num_hidden_layers": 61, "kv_lora_rank": 512, "torch_dtype": "bfloat16"}`, Options{}, "missing field qk_rope_head_dim")
	f(`{`+full+`, "torch_dtype": "float16"}`, Options{TP: -2}, "tensor-parallel degree -2")
	// A partial text_config, as llava-hf publishes it (the text model's sizes are defaults).
	f(string(readConfig(t, "llava-1.5-7b-hf.json")), Options{}, "missing field text_config.num_hidden_layers")
	f(`{"text_config": {"num_hidden_layers": 2, "num_attention_heads": 2, "hidden_size": 8}}`, Options{}, "missing field text_config.torch_dtype")
}

func TestNestedDType(t *testing.T) {
	// torch_dtype only at the top level is used for the nested text model.
	m, err := Parse([]byte(`{"torch_dtype": "float32", "text_config": {"num_hidden_layers": 2, "num_attention_heads": 4, "hidden_size": 64}}`), Options{})
	if err != nil {
		t.Fatal(err)
	}
	if !m.Nested || m.BytesPerValue != 4 || m.HeadDim != 16 || m.KVHeads != 4 || m.Attention != MHA {
		t.Fatalf("got %+v", m)
	}
	if got := m.BytesPerToken(); got != 4*16*2*4*2 {
		t.Fatalf("bytes/token %d", got)
	}
}

func TestHelpers(t *testing.T) {
	f := func(n int64, want string) {
		t.Helper()
		if got := Commas(n); got != want {
			t.Fatalf("Commas(%d) = %q, want %q", n, got, want)
		}
	}
	f(0, "0")
	f(999, "999")
	f(1000, "1,000")
	f(57344, "57,344")
	f(-1234567, "-1,234,567")
	m, _ := Parse(readConfig(t, "qwen2-7b.json"), Options{})
	if m.TokensIn(1<<30) != 18724 || m.BytesFor(256) != 256*57344 || m.BytesFor(1<<62) != 1<<63-1 {
		t.Fatalf("TokensIn %d BytesFor %d", m.TokensIn(1<<30), m.BytesFor(256))
	}
}

func FuzzParse(f *testing.F) {
	for _, n := range []string{"qwen2-7b.json", "deepseek-v3.json", "llama-3.2-11b-vision.json", "gemma-7b.json"} {
		b, _ := os.ReadFile(filepath.Join("testdata", n))
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := Parse(b, Options{})
		if err == nil && m.BytesPerToken() <= 0 {
			t.Fatalf("accepted a config with %d bytes per token: %+v", m.BytesPerToken(), m)
		}
	})
}
