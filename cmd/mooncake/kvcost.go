package main

import (
	"fmt"
	"io"
	"os"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/mooncake-go/mooncake/client"
	"github.com/mooncake-go/mooncake/internal/base"
	"github.com/mooncake-go/mooncake/internal/kvmodel"
)

// defaultChunkTokens is LMCache's chunk size (its chunk_size default), the unit most
// KVCache connectors store objects in.
const defaultChunkTokens = 256

// maxConfigBytes bounds a config.json read (real ones are a few KiB).
const maxConfigBytes = 16 << 20

// kvFlags are the model flags kvcost and `model add` share.
type kvFlags struct {
	dtype string
	tp    int
}

func (f *kvFlags) register(cmd *cobra.Command) {
	cmd.Flags().StringVar(&f.dtype, "dtype", "", "the cache's dtype, overriding torch_dtype (float16, bfloat16, float32, float8_e4m3fn, int8)")
	cmd.Flags().IntVar(&f.tp, "tp", 1, "tensor-parallel ranks; each stores its share of the KV heads (MLA latents are not split)")
}

// load reads and parses a config.json; errors are one line naming the file and the field.
func (f *kvFlags) load(path string) (kvmodel.Model, error) {
	if f.tp < 1 {
		return kvmodel.Model{}, usagef("--tp must be 1 or more, got %d", f.tp)
	}
	if f.dtype != "" {
		if _, err := kvmodel.DTypeBytes(f.dtype); err != nil {
			return kvmodel.Model{}, usagef("--dtype: %v", err)
		}
	}
	fh, err := os.Open(path)
	if err != nil {
		return kvmodel.Model{}, usageError{err}
	}
	defer fh.Close()
	data, err := io.ReadAll(io.LimitReader(fh, maxConfigBytes+1))
	if err != nil {
		return kvmodel.Model{}, fmt.Errorf("read %s: %w", path, err)
	}
	if len(data) > maxConfigBytes {
		return kvmodel.Model{}, usagef("%s is over %s: not a model config", path, base.Bytes(maxConfigBytes))
	}
	m, err := kvmodel.Parse(data, kvmodel.Options{DType: f.dtype, TP: f.tp})
	if err != nil {
		return kvmodel.Model{}, usagef("%s: %v", path, err)
	}
	return m, nil
}

func newKVCostCmd(e *env) *cobra.Command {
	var (
		cf          clientFlags
		kf          kvFlags
		model       string
		chunkTokens int64
		tokens      int64
	)
	cmd := &cobra.Command{
		Use:   "kvcost --model config.json",
		Short: "KV-cache bytes per token of a model (from its config.json), and the cluster's room in tokens",
		Long: `kvcost reads a Hugging Face config.json and prints the KV-cache bytes one token costs, with
the formula filled in, the bytes of a chunk and the tokens per GiB. With a cluster
(--master_server_address or $MOONCAKE_MASTER) it also prints the cluster's DRAM and NVMe
capacity, used and free, in tokens of that model.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if model == "" {
				return usagef("--model config.json is required")
			}
			if chunkTokens < 1 {
				return usagef("--chunk_tokens must be 1 or more, got %d", chunkTokens)
			}
			if tokens < 0 {
				return usagef("--tokens must not be negative, got %d", tokens)
			}
			m, err := kf.load(model)
			if err != nil {
				return err
			}
			printKVCost(e.stdout, model, m, chunkTokens, tokens, cmd.Flags().Changed("tokens"))
			if !changed(cmd.Flags(), "master_server_address") && e.getenv(envMaster) == "" {
				return nil
			}
			c, err := cf.connect(cmd, e)
			if err != nil {
				return err
			}
			defer c.Close()
			st, err := c.Status(cmd.Context())
			if err != nil {
				return err
			}
			printClusterTokens(e.stdout, m, st)
			return nil
		},
	}
	cf.register(cmd.Flags())
	kf.register(cmd)
	cmd.Flags().StringVar(&model, "model", "", "the model's config.json")
	cmd.Flags().Int64Var(&chunkTokens, "chunk_tokens", defaultChunkTokens, "tokens per stored chunk (LMCache's chunk_size)")
	cmd.Flags().Int64Var(&tokens, "tokens", 0, "also print the expected bytes of this many tokens")
	return cmd
}

func printKVCost(w io.Writer, path string, m kvmodel.Model, chunk, tokens int64, withTokens bool) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	name := m.Type
	if name == "" {
		name = "(no model_type)"
	}
	if m.Nested {
		name += " (text_config)"
	}
	fmt.Fprintf(tw, "model\t%s\t%s\n", name, path)
	fmt.Fprintf(tw, "attention\t%s\n", m.Attention)
	fmt.Fprintf(tw, "layers\t%d\tnum_hidden_layers\n", m.Layers)
	if m.Attention == kvmodel.MLA {
		fmt.Fprintf(tw, "kv_lora_rank\t%d\tkv_lora_rank (one latent per layer, shared by all heads)\n", m.KVLoraRank)
		fmt.Fprintf(tw, "qk_rope_head_dim\t%d\tqk_rope_head_dim\n", m.RopeHeadDim)
	} else {
		fmt.Fprintf(tw, "KV heads\t%d\t%s\n", m.KVHeads, m.KVHeadsFrom)
		from := m.HeadDimFrom
		if from != "head_dim" {
			from = fmt.Sprintf("%s = %d / %d", from, m.HeadDim*m.QueryHeads, m.QueryHeads)
		}
		fmt.Fprintf(tw, "head_dim\t%d\t%s\n", m.HeadDim, from)
	}
	fmt.Fprintf(tw, "dtype\t%s, %d bytes per value\t%s\n", m.DType, m.BytesPerValue, m.DTypeFrom)
	switch {
	case m.TP > 1 && m.Attention == kvmodel.MLA:
		fmt.Fprintf(tw, "tp\t%d\tevery rank stores the whole latent (figures are per rank)\n", m.TP)
	case m.TP > 1:
		fmt.Fprintf(tw, "tp\t%d\teach rank stores its share of the KV heads (figures are per rank)\n", m.TP)
	}
	bpt := m.BytesPerToken()
	fmt.Fprintf(tw, "bytes/token\t%s\t%s\n", kvmodel.Commas(bpt), m.Formula())
	fmt.Fprintf(tw, "bytes/chunk\t%s\t%s for %d tokens\n", kvmodel.Commas(m.BytesFor(chunk)), base.Bytes(m.BytesFor(chunk)), chunk)
	fmt.Fprintf(tw, "tokens/GiB\t%s\n", kvmodel.Commas(m.TokensIn(1<<30)))
	if withTokens {
		fmt.Fprintf(tw, "%s tokens\t%s bytes\t%s\n", kvmodel.Commas(tokens), kvmodel.Commas(m.BytesFor(tokens)), base.Bytes(m.BytesFor(tokens)))
	}
	tw.Flush()
}

// printClusterTokens prints the cluster's DRAM and NVMe capacity, used and free in tokens.
func printClusterTokens(w io.Writer, m kvmodel.Model, st client.Status) {
	var dc, du, nc, nu int64
	for _, wk := range st.Workers {
		if wk.State != "active" {
			continue
		}
		dc += wk.DRAMCapacityBytes
		du += wk.DRAMUsedBytes
		nc += wk.NVMeCapacityBytes
		nu += wk.NVMeUsedBytes
	}
	fmt.Fprintf(w, "\ncluster %s, in tokens of this model:\n", st.ClusterID)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "\tcapacity\tused\tfree\t\n")
	row := func(tier string, c, u int64) {
		f := max(c-u, 0)
		fmt.Fprintf(tw, "%s bytes\t%s\t%s\t%s\t\n", tier, base.Bytes(c), base.Bytes(u), base.Bytes(f))
		fmt.Fprintf(tw, "%s tokens\t%s\t%s\t%s\t\n", tier, kvmodel.Commas(m.TokensIn(c)), kvmodel.Commas(m.TokensIn(u)), kvmodel.Commas(m.TokensIn(f)))
	}
	row("DRAM", dc, du)
	row("NVMe", nc, nu)
	tw.Flush()
}
