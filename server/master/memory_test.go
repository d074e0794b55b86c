package master

import (
	"testing"

	"github.com/mooncake-go/mooncake/raftmeta"
	"github.com/mooncake-go/mooncake/transfer"
)

func TestSummaryTokens(t *testing.T) {
	none := func() map[string]transfer.ModelStats {
		t.Fatal("workers' tallies read without a registered model")
		return nil
	}
	if s := summaryTokens([]raftmeta.ModelUsage{{}}, none); s != "" {
		t.Fatalf("no registered model: %q", s)
	}
	qwen := []raftmeta.ModelUsage{{Name: "qwen2-7b", Registered: true, BytesPerToken: 57344, Tokens: 20, ReplicaTokens: 20, ReplicaBytes: 20 * 57344}, {}}
	s := summaryTokens(qwen, func() map[string]transfer.ModelStats { return nil })
	if want := " | Tokens: qwen2-7b=20 (expected 1.1 MiB, actual 1.1 MiB)"; s != want {
		t.Fatalf("summary %q, want %q", s, want)
	}
	// With the workers' tallies from their heartbeats: the model's DRAM and NVMe bytes.
	s = summaryTokens(qwen, func() map[string]transfer.ModelStats {
		return map[string]transfer.ModelStats{"qwen2-7b": {DRAMBytes: 1 << 20, NVMeBytes: 3 << 20}}
	})
	if want := " | Tokens: qwen2-7b=20 (expected 1.1 MiB, actual 1.1 MiB, DRAM 1.0 MiB, NVMe 3.0 MiB)"; s != want {
		t.Fatalf("summary %q, want %q", s, want)
	}
}
