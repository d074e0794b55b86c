package kvmodel

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
)

// ErrBadConfig marks a config.json kvmodel cannot use (not JSON, a field missing or of the
// wrong type or value). Use errors.Is(err, ErrBadConfig).
var ErrBadConfig = errors.New("kvmodel: bad model config")

// Attention is the kind of attention, which decides the formula.
type Attention string

const (
	// MHA: as many KV heads as query heads.
	MHA Attention = "MHA"
	// GQA: fewer KV heads than query heads, each shared by a group (MQA is GQA with one).
	GQA Attention = "GQA"
	// MLA: multi-head latent attention (DeepSeek-V2/V3), one latent per layer.
	MLA Attention = "MLA"
)

// Options override what the config says. Zero values keep the config's.
type Options struct {
	// DType overrides torch_dtype ("float16", "bfloat16", "float32", "float8_e4m3fn", ...).
	DType string
	// TP is the tensor-parallel degree: each rank stores ceil(KV heads / TP) heads. 0 means 1.
	TP int
}

// Model is what kvmodel read from a config, with where each value came from, so a report can
// show its work.
type Model struct {
	// Type is the config's model_type (of the text model when nested), "" if absent.
	Type string
	// Nested says the fields were read from text_config.
	Nested    bool
	Attention Attention
	Layers    int
	// QueryHeads is num_attention_heads (0 for MLA configs that do not need it).
	QueryHeads int
	KVHeads    int
	// KVHeadsFrom says where KVHeads came from: "num_key_value_heads" or
	// "num_attention_heads (no num_key_value_heads)".
	KVHeadsFrom string
	HeadDim     int
	// HeadDimFrom: "head_dim" or "hidden_size / num_attention_heads".
	HeadDimFrom string
	// KVLoraRank and RopeHeadDim are MLA's latent and rotary key widths (0 otherwise).
	KVLoraRank, RopeHeadDim int
	DType                   string
	// DTypeFrom: "torch_dtype", "dtype" or "--dtype".
	DTypeFrom     string
	BytesPerValue int
	TP            int
}

// config is one level of config.json (the top, or text_config), field by field, so an error
// can name the field at fault.
type config map[string]json.RawMessage

func (c config) has(name string) bool {
	v, ok := c[name]
	return ok && string(v) != "null"
}

// str returns a string field ("" and false when absent).
func (c config) str(name string) (string, bool, error) {
	if !c.has(name) {
		return "", false, nil
	}
	var s string
	if err := json.Unmarshal(c[name], &s); err != nil {
		return "", false, badf("field %s is %s, want a string", name, c[name])
	}
	return s, true, nil
}

func badf(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrBadConfig, fmt.Sprintf(format, args...))
}

// Parse reads a config.json. The error, if any, is one line naming the field at fault.
func Parse(data []byte, o Options) (Model, error) {
	var top config
	if err := json.Unmarshal(data, &top); err != nil || top == nil {
		return Model{}, badf("not a JSON object: %s", firstLine(err))
	}
	c, m := top, Model{}
	if top.has("text_config") {
		if err := json.Unmarshal(top["text_config"], &c); err != nil || c == nil {
			return Model{}, badf("field text_config is not a JSON object")
		}
		m.Nested = true
		if !c.has("torch_dtype") && !c.has("dtype") {
			for _, k := range []string{"torch_dtype", "dtype"} {
				if top.has(k) {
					c[k] = top[k]
				}
			}
		}
	}
	prefix := ""
	if m.Nested {
		prefix = "text_config."
	}
	m.Type, _, _ = c.str("model_type")
	field := func(name string) (int, error) {
		if !c.has(name) {
			return 0, badf("missing field %s%s", prefix, name)
		}
		n, err := strconv.ParseInt(string(c[name]), 10, 32)
		if err != nil || n <= 0 {
			return 0, badf("field %s%s is %s, want a positive integer", prefix, name, c[name])
		}
		return int(n), nil
	}
	var err error
	if m.Layers, err = field("num_hidden_layers"); err != nil {
		return Model{}, err
	}
	if err := m.setDType(c, o.DType, prefix); err != nil {
		return Model{}, err
	}
	m.TP = o.TP
	if m.TP == 0 {
		m.TP = 1
	}
	if m.TP < 0 {
		return Model{}, badf("tensor-parallel degree %d, want 1 or more", m.TP)
	}
	if c.has("kv_lora_rank") {
		m.Attention = MLA
		if m.KVLoraRank, err = field("kv_lora_rank"); err != nil {
			return Model{}, err
		}
		if m.RopeHeadDim, err = field("qk_rope_head_dim"); err != nil {
			return Model{}, err
		}
		return m, nil
	}
	if m.QueryHeads, err = field("num_attention_heads"); err != nil {
		return Model{}, err
	}
	if c.has("num_key_value_heads") {
		if m.KVHeads, err = field("num_key_value_heads"); err != nil {
			return Model{}, err
		}
		m.KVHeadsFrom = "num_key_value_heads"
	} else {
		m.KVHeads, m.KVHeadsFrom = m.QueryHeads, "num_attention_heads (no num_key_value_heads)"
	}
	if m.KVHeads > m.QueryHeads || m.QueryHeads%m.KVHeads != 0 {
		return Model{}, badf("%snum_key_value_heads %d does not divide num_attention_heads %d", prefix, m.KVHeads, m.QueryHeads)
	}
	m.Attention = GQA
	if m.KVHeads == m.QueryHeads {
		m.Attention = MHA
	}
	if c.has("head_dim") {
		if m.HeadDim, err = field("head_dim"); err != nil {
			return Model{}, err
		}
		m.HeadDimFrom = "head_dim"
		return m, nil
	}
	hidden, err := field("hidden_size")
	if err != nil {
		return Model{}, fmt.Errorf("%w (needed for head_dim, which the config does not give)", err)
	}
	if hidden%m.QueryHeads != 0 {
		return Model{}, badf("%shidden_size %d is not a multiple of num_attention_heads %d; the config needs head_dim", prefix, hidden, m.QueryHeads)
	}
	m.HeadDim, m.HeadDimFrom = hidden/m.QueryHeads, "hidden_size / num_attention_heads"
	return m, nil
}

func firstLine(err error) string {
	if err == nil {
		return "null"
	}
	s, _, _ := strings.Cut(err.Error(), "\n")
	return s
}

func (m *Model) setDType(c config, override, prefix string) error {
	td, hasTD, err := c.str("torch_dtype")
	if err != nil {
		return err
	}
	dt, hasDT, err := c.str("dtype")
	if err != nil {
		return err
	}
	switch {
	case override != "":
		m.DType, m.DTypeFrom = override, "--dtype"
	case hasTD:
		m.DType, m.DTypeFrom = td, "torch_dtype"
	case hasDT:
		m.DType, m.DTypeFrom = dt, "dtype"
	default:
		return badf("missing field %storch_dtype (or dtype); give the cache's dtype with --dtype", prefix)
	}
	n, err := DTypeBytes(m.DType)
	if err != nil {
		if m.DTypeFrom != "--dtype" {
			return fmt.Errorf("field %s: %w", m.DTypeFrom, err)
		}
		return err
	}
	m.BytesPerValue = n
	return nil
}

// DTypeBytes returns the bytes of one value of a torch dtype name ("torch." prefix allowed).
func DTypeBytes(s string) (int, error) {
	t := strings.TrimPrefix(strings.ToLower(strings.TrimSpace(s)), "torch.")
	switch {
	case t == "float16" || t == "fp16" || t == "half" || t == "bfloat16" || t == "bf16":
		return 2, nil
	case t == "float32" || t == "fp32" || t == "float":
		return 4, nil
	case t == "float64" || t == "double":
		return 8, nil
	case strings.HasPrefix(t, "float8") || t == "fp8" || t == "int8" || t == "uint8":
		return 1, nil
	}
	return 0, badf("unknown dtype %q (want float16, bfloat16, float32, float8_e4m3fn, int8 ...)", s)
}

// ValuesPerToken is the number of values one token stores per TP rank (before the dtype).
func (m Model) ValuesPerToken() int64 {
	if m.Attention == MLA {
		return int64(m.KVLoraRank+m.RopeHeadDim) * int64(m.Layers)
	}
	return int64(m.RankKVHeads()) * int64(m.HeadDim) * 2 * int64(m.Layers)
}

// RankKVHeads is the KV heads one tensor-parallel rank stores: ceil(KVHeads / TP).
func (m Model) RankKVHeads() int { return (m.KVHeads + m.TP - 1) / m.TP }

// BytesPerToken is the KV cache bytes of one token (on one tensor-parallel rank).
func (m Model) BytesPerToken() int64 { return m.ValuesPerToken() * int64(m.BytesPerValue) }

// Formula is the formula filled in, e.g.
// "4 KV heads x 128 head_dim x 2 (K and V) x 2 bytes x 28 layers = 57,344 bytes".
func (m Model) Formula() string {
	if m.Attention == MLA {
		return fmt.Sprintf("(%d kv_lora_rank + %d qk_rope_head_dim) x %d bytes x %d layers = %s bytes",
			m.KVLoraRank, m.RopeHeadDim, m.BytesPerValue, m.Layers, Commas(m.BytesPerToken()))
	}
	heads := strconv.Itoa(m.KVHeads)
	if m.TP > 1 {
		heads = fmt.Sprintf("ceil(%d / %d tp) = %d", m.KVHeads, m.TP, m.RankKVHeads())
	}
	return fmt.Sprintf("%s KV heads x %d head_dim x 2 (K and V) x %d bytes x %d layers = %s bytes",
		heads, m.HeadDim, m.BytesPerValue, m.Layers, Commas(m.BytesPerToken()))
}

// TokensIn is how many whole tokens fit in n bytes (0 for a model of 0 bytes per token).
func (m Model) TokensIn(n int64) int64 {
	bpt := m.BytesPerToken()
	if bpt <= 0 || n <= 0 {
		return 0
	}
	return n / bpt
}

// BytesFor is the bytes of n tokens, saturating at math.MaxInt64.
func (m Model) BytesFor(n int64) int64 {
	bpt := m.BytesPerToken()
	if n <= 0 || bpt <= 0 {
		return 0
	}
	if n > math.MaxInt64/bpt {
		return math.MaxInt64
	}
	return n * bpt
}

// Commas formats n with thousands separators: 57344 -> "57,344".
func Commas(n int64) string {
	s := strconv.FormatInt(n, 10)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	if neg {
		return "-" + b.String()
	}
	return b.String()
}
