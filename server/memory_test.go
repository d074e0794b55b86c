package server

import (
	"strings"
	"testing"

	"github.com/mooncake-go/mooncake/raftmeta"
)

// TestMemoryReportArithmetic: the causes always sum to the difference, and the verdict names
// the largest one.
func TestMemoryReportArithmetic(t *testing.T) {
	const bpt = 57344
	qwen := func(objects, tokens, bytes, untokened int64) raftmeta.ModelUsage {
		return raftmeta.ModelUsage{Name: "qwen2-7b", Registered: true, BytesPerToken: bpt, Objects: objects, Tokens: tokens,
			ReplicaTokens: tokens, Bytes: bytes, ReplicaBytes: bytes, UntokenedReplicaBytes: untokened}
	}
	none := raftmeta.ModelUsage{}
	f := func(name string, models []raftmeta.ModelUsage, w WorkerMemory, threshold float64, wantVerdict, wantReason string) {
		t.Helper()
		var replica int64
		for _, m := range models {
			replica += m.ReplicaBytes
		}
		r := buildMemoryReport(memoryInputs{models: models, workers: []WorkerMemory{w}, replicaBytes: replica, thresholdPct: threshold})
		var sum int64
		for _, c := range r.Causes {
			sum += c.Bytes
		}
		if sum != r.Difference {
			t.Fatalf("%s: causes sum to %d, difference %d: %+v", name, sum, r.Difference, r.Causes)
		}
		if r.Verdict != wantVerdict || !strings.Contains(r.Reason, wantReason) {
			t.Fatalf("%s: verdict %s (%s), want %s containing %q", name, r.Verdict, r.Reason, wantVerdict, wantReason)
		}
	}
	exact := 100 * bpt
	dram := func(logical, waste, pending, held int64) WorkerMemory {
		return WorkerMemory{ID: "w", ArenaCapacity: 1 << 30, ArenaAllocated: logical + waste + pending + held, CommittedLogical: logical,
			AlignmentWaste: waste, PendingBytes: pending, HeldBytes: held}
	}
	f("empty", []raftmeta.ModelUsage{none}, dram(0, 0, 0, 0), 0, VerdictExpected, "nothing is stored")
	f("exact", []raftmeta.ModelUsage{qwen(10, 100, int64(exact), 0), none}, dram(int64(exact), 0, 0, 0), 0, VerdictExpected, "+0.00%")
	f("waste within", []raftmeta.ModelUsage{qwen(10, 100, int64(exact), 0), none}, dram(int64(exact), 4096, 0, 0), 0, VerdictExpected, "within 5.0%")
	f("waste over a tight threshold", []raftmeta.ModelUsage{qwen(10, 100, int64(exact), 0), none}, dram(int64(exact), int64(exact)/50, 0, 0), 1,
		VerdictUnexpected, "largest cause: alignment")
	f("fewer tokens", []raftmeta.ModelUsage{qwen(10, 50, int64(exact), 0), none}, dram(int64(exact), 0, 0, 0), 0, VerdictUnexpected, "largest cause: token_mismatch")
	f("held", []raftmeta.ModelUsage{qwen(10, 100, int64(exact), 0), none}, dram(int64(exact), 0, 0, int64(exact)), 0, VerdictUnexpected, "largest cause: held")
	f("pending", []raftmeta.ModelUsage{qwen(10, 100, int64(exact), 0), none}, dram(int64(exact), 0, int64(exact)/2, 0), 0, VerdictUnexpected, "largest cause: pending")
	f("untokened", []raftmeta.ModelUsage{qwen(10, 100, int64(exact), 0), {Objects: 3, ReplicaBytes: int64(exact)}}, dram(2*int64(exact), 0, 0, 0), 0,
		VerdictUnexpected, "largest cause: no_tokens")
	lost := dram(int64(exact)/2, 0, 0, 0)
	f("lost objects", []raftmeta.ModelUsage{qwen(10, 100, int64(exact), 0), none}, lost, 0, VerdictUnexpected, "largest cause: unexplained")
	removed := dram(int64(exact), 0, 0, 0)
	f("drop not yet applied", []raftmeta.ModelUsage{none}, removed, 0, VerdictUnexpected, "largest cause: extra_copies")
	r0 := buildMemoryReport(memoryInputs{models: []raftmeta.ModelUsage{none}, workers: []WorkerMemory{removed}, reservedBytes: int64(exact)})
	if !strings.Contains(r0.Reason, "largest cause: pending") {
		t.Fatalf("written without PutEnd under a reservation: %s", r0.Reason)
	}
	// A worker that does not answer is left out of the sums.
	r := buildMemoryReport(memoryInputs{models: []raftmeta.ModelUsage{none}, workers: []WorkerMemory{{ID: "w", Error: "timeout", ArenaAllocated: 5}}})
	if r.ActualBytes != 0 || r.Verdict != VerdictExpected {
		t.Fatalf("silent worker counted: %+v", r)
	}
}

func TestMemorySaturationLines(t *testing.T) {
	w := WorkerMemory{ID: "w1", Saturated: true}
	r := MemoryReport{Workers: []WorkerMemory{w}, Tokens: 7, ExpectedBytes: 100, ActualBytes: 100}
	r.Judge(0)
	if len(r.Saturation) != 1 || r.Saturation[0] != "worker w1: saturated, as expected for 7 retained tokens" {
		t.Fatalf("saturation %q", r.Saturation)
	}
	r.ActualBytes, r.Difference = 200, 100
	r.Judge(0)
	if len(r.Saturation) != 1 || r.Saturation[0] != "worker w1: saturated, 100 bytes unexplained" {
		t.Fatalf("saturation %q", r.Saturation)
	}
}

func TestSummaryTokens(t *testing.T) {
	if s := summaryTokens([]raftmeta.ModelUsage{{}}); s != "" {
		t.Fatalf("no registered model: %q", s)
	}
	s := summaryTokens([]raftmeta.ModelUsage{{Name: "qwen2-7b", Registered: true, BytesPerToken: 57344, Tokens: 20, ReplicaTokens: 20, ReplicaBytes: 20 * 57344}, {}})
	if want := " | Tokens: qwen2-7b=20 (expected 1.1 MiB, actual 1.1 MiB)"; s != want {
		t.Fatalf("summary %q, want %q", s, want)
	}
}
