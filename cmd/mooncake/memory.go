package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/mooncake-go/mooncake/client"
	"github.com/mooncake-go/mooncake/internal/base"
	"github.com/mooncake-go/mooncake/internal/kvmodel"
	"github.com/mooncake-go/mooncake/server/memory"
)

// tokenFlags are put's --tokens and --model.
type tokenFlags struct {
	tokens int64
	model  string
}

func (f *tokenFlags) register(fs *pflag.FlagSet) {
	fs.Int64Var(&f.tokens, "tokens", 0, "KV-cache tokens the object holds (counted per model by the master; see `mooncake memory`)")
	fs.StringVar(&f.model, "model", "", "the model those tokens belong to (registered with `mooncake model add`)")
}

// apply checks the flags and sets them on rc.
func (f *tokenFlags) apply(rc *client.ReplicateConfig) error {
	if f.tokens < 0 || f.tokens > 1<<32-1 {
		return usagef("--tokens must be 0 to 4294967295, got %d", f.tokens)
	}
	if f.model != "" {
		if err := client.ValidateModelName(f.model); err != nil {
			return usageError{fmt.Errorf("--model: %w", err)}
		}
	}
	rc.Tokens, rc.Model = f.tokens, f.model
	return nil
}

func newMemoryCmd(e *env) *cobra.Command {
	var (
		f         clientFlags
		asJSON    bool
		threshold float64
	)
	cmd := &cobra.Command{
		Use:   "memory [--json] [--threshold PCT]",
		Short: "Where every byte is: per worker and per model, expected against actual, and a verdict",
		Long: `memory asks the leader for its memory report: per worker the arena (committed objects
with their alignment waste, puts in flight, bytes held by readers after removal, free, largest
free block, fragmentation), NVMe (used, reclaimable) and the process (RSS against arena touched,
Go heap and the rest); the metadata's bytes per key; and per registered model the retained
tokens, the bytes they should take (tokens x bytes per token) against what they take, with the
causes of the difference. The verdict is "expected" when actual is within --threshold percent
of expected, else "unexpected", naming the largest cause. docs/memory.md explains each number.`,
		Args: exactArgs(0, "no arguments"),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if threshold <= 0 || threshold >= 1000 {
				return usagef("--threshold must be a percent above 0, got %v", threshold)
			}
			c, err := f.connect(cmd, e)
			if err != nil {
				return err
			}
			defer c.Close()
			raw, err := c.MemoryJSON(cmd.Context())
			if err != nil {
				return err
			}
			var r memory.MemoryReport
			if err := json.Unmarshal(raw, &r); err != nil {
				return fmt.Errorf("%w: memory: the master sent bad JSON: %v", base.ErrInternal, err)
			}
			r.Judge(threshold)
			if asJSON {
				enc := json.NewEncoder(e.stdout)
				enc.SetIndent("", "  ")
				return enc.Encode(r)
			}
			printMemory(e.stdout, &r)
			return nil
		},
	}
	f.register(cmd.Flags())
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the report as JSON")
	cmd.Flags().Float64Var(&threshold, "threshold", memory.DefaultMemoryThresholdPct, "percent within which actual bytes count as expected")
	return cmd
}

func printMemory(out io.Writer, r *memory.MemoryReport) {
	fmt.Fprintf(out, "memory of cluster %s (leader %s)\n\n", r.ClusterID, r.Master)
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "WORKER\tARENA\tALLOCATED\tOBJECTS\tLOGICAL\tWASTE\tPENDING\tHELD\tFREE\tLARGEST FREE\tFRAG\tNVME USED\tRECLAIMABLE\tRSS\tTOUCHED\tGO HEAP\tREST\t")
	row := func(w *memory.WorkerMemory) {
		if w.Error != "" {
			fmt.Fprintf(tw, "%s\tdid not answer: %s\t\n", w.ID, w.Error)
			return
		}
		b := func(v int64) string { return base.Bytes(v).String() }
		frag := fmt.Sprintf("%.2f", w.Fragmentation)
		if w.ID == "cluster" {
			frag = "-"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t\n", w.ID, b(w.ArenaCapacity), b(w.ArenaAllocated),
			w.CommittedObjects, b(w.CommittedLogical), b(w.AlignmentWaste), b(w.PendingBytes), b(w.HeldBytes), b(w.FreeBytes),
			b(w.LargestFree), frag, b(w.NVMeUsed), b(w.NVMeReclaimable), b(w.RSS), b(w.ArenaTouched), b(w.GoHeap), b(w.Rest))
	}
	for i := range r.Workers {
		row(&r.Workers[i])
	}
	if len(r.Workers) > 1 {
		row(&r.Cluster)
	}
	tw.Flush()
	fmt.Fprintf(out, "\nmetadata: %d keys, %s (%.0f bytes per key)\n\n", r.Keys, base.Bytes(r.MetadataBytes), r.MetadataBytesPerKey)
	if len(r.Models) > 0 {
		tw = tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "MODEL\tBYTES/TOKEN\tOBJECTS\tTOKENS\tEXPECTED\tACTUAL\tDIFFERENCE\tDRAM ALLOCATED\tNVME ALLOCATED\tVERDICT")
		for _, m := range r.Models {
			name, bpt := m.Name, kvmodel.Commas(m.BytesPerToken)
			if name == "" {
				name = "(no model)"
			}
			if !m.Registered {
				bpt = "not registered"
			}
			fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\t%s\t%s (%+.2f%%)\t%s\t%s\t%s: %s\n", name, bpt, m.Objects, kvmodel.Commas(m.Tokens),
				base.Bytes(m.ExpectedBytes), base.Bytes(m.ActualBytes), signed(m.Difference), m.DifferencePct,
				base.Bytes(m.DRAMAllocated), base.Bytes(m.NVMeAllocated), m.Verdict, m.Reason)
		}
		tw.Flush()
		// The allocated view: what the copies take beyond their logical bytes, and why.
		for _, m := range r.Models {
			if len(m.AllocatedCauses) == 0 {
				continue
			}
			name := m.Name
			if name == "" {
				name = "(no model)"
			}
			parts := make([]string, len(m.AllocatedCauses))
			for i, c := range m.AllocatedCauses {
				parts[i] = fmt.Sprintf("%s %s", c.Name, signed(c.Bytes))
			}
			fmt.Fprintf(out, "%s: allocated %s = actual %s %s\n", name, base.Bytes(m.AllocatedBytes), base.Bytes(m.ActualBytes), strings.Join(parts, " "))
		}
		fmt.Fprintln(out)
	}
	fmt.Fprintf(out, "expected %s for %s retained tokens; actual %s (arena allocated + NVMe used); difference %s (%+.2f%%)\n",
		base.Bytes(r.ExpectedBytes), kvmodel.Commas(r.Tokens), base.Bytes(r.ActualBytes), signed(r.Difference), r.DifferencePct)
	if len(r.Causes) > 0 {
		parts := make([]string, len(r.Causes))
		for i, c := range r.Causes {
			parts[i] = fmt.Sprintf("%s %s (%+.2f%%)", c.Name, signed(c.Bytes), c.Pct)
		}
		fmt.Fprintf(out, "causes: %s\n", strings.Join(parts, ", "))
	}
	fmt.Fprintf(out, "verdict: %s: %s\n", r.Verdict, r.Reason)
	for _, s := range r.Saturation {
		fmt.Fprintln(out, s)
	}
}

func signed(v int64) string {
	if v < 0 {
		return "-" + base.Bytes(-v).String()
	}
	return "+" + base.Bytes(v).String()
}

func newModelCmd(e *env) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "model add NAME config.json | ls | rm NAME",
		Short: "Register models (from their config.json) with the cluster, list or remove them",
		Args:  cobra.NoArgs,
		RunE:  func(cmd *cobra.Command, _ []string) error { return usagef("model: want add, ls or rm") },
	}
	var (
		af clientFlags
		kf kvFlags
	)
	add := &cobra.Command{
		Use:   "add NAME config.json [--dtype D] [--tp N]",
		Short: "Register a model: its bytes per token, from config.json, are kept in raft",
		Args:  exactArgs(2, "NAME config.json"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := client.ValidateModelName(args[0]); err != nil {
				return usageError{err}
			}
			m, err := kf.load(args[1])
			if err != nil {
				return err
			}
			c, err := af.connect(cmd, e)
			if err != nil {
				return err
			}
			defer c.Close()
			if err := c.AddModel(cmd.Context(), args[0], m.BytesPerToken(), m.Formula()); err != nil {
				return err
			}
			fmt.Fprintf(e.stdout, "model %s registered: %s bytes per token (%s)\n", args[0], kvmodel.Commas(m.BytesPerToken()), m.Formula())
			return nil
		},
	}
	af.register(add.Flags())
	kf.register(add)
	var lf clientFlags
	ls := &cobra.Command{
		Use:   "ls",
		Short: "List registered models and the tokens objects retain",
		Args:  exactArgs(0, "no arguments"),
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := lf.connect(cmd, e)
			if err != nil {
				return err
			}
			defer c.Close()
			st, err := c.Status(cmd.Context())
			if err != nil {
				return err
			}
			var doc struct {
				Models []memory.ModelMemory `json:"models"`
			}
			if err := json.NewDecoder(bytes.NewReader(st.Raw)).Decode(&doc); err != nil {
				return fmt.Errorf("%w: status: bad JSON: %v", base.ErrInternal, err)
			}
			tw := tabwriter.NewWriter(e.stdout, 0, 0, 2, ' ', 0)
			fmt.Fprintln(tw, "MODEL\tBYTES/TOKEN\tOBJECTS\tTOKENS\tEXPECTED\tLOGICAL\tFORMULA")
			for _, m := range doc.Models {
				if !m.Registered {
					continue
				}
				fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\t%s\t%s\n", m.Name, kvmodel.Commas(m.BytesPerToken), m.Objects, kvmodel.Commas(m.Tokens),
					base.Bytes(m.ExpectedBytes), base.Bytes(m.ActualBytes), m.Description)
			}
			return tw.Flush()
		},
	}
	lf.register(ls.Flags())
	var rf clientFlags
	rm := &cobra.Command{
		Use:   "rm NAME",
		Short: "Unregister a model (objects keep their token counts)",
		Args:  exactArgs(1, "NAME"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := client.ValidateModelName(args[0]); err != nil {
				return usageError{err}
			}
			c, err := rf.connect(cmd, e)
			if err != nil {
				return err
			}
			defer c.Close()
			if err := c.RemoveModel(cmd.Context(), args[0]); err != nil {
				return err
			}
			fmt.Fprintf(e.stdout, "model %s removed\n", args[0])
			return nil
		},
	}
	rf.register(rm.Flags())
	cmd.AddCommand(add, ls, rm)
	return cmd
}
