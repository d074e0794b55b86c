package memory

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
		r := BuildReport(Inputs{Models: models, Workers: []WorkerMemory{w}, ReplicaBytes: replica, ThresholdPct: threshold})
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
	r0 := BuildReport(Inputs{Models: []raftmeta.ModelUsage{none}, Workers: []WorkerMemory{removed}, ReservedBytes: int64(exact)})
	if !strings.Contains(r0.Reason, "largest cause: pending") {
		t.Fatalf("written without PutEnd under a reservation: %s", r0.Reason)
	}
	// A worker that does not answer is left out of the sums.
	r := BuildReport(Inputs{Models: []raftmeta.ModelUsage{none}, Workers: []WorkerMemory{{ID: "w", Error: "timeout", ArenaAllocated: 5}}})
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

// TestModelAllocated: a model's allocated view sums its copies on the workers that answered,
// and its causes split allocated - actual exactly.
func TestModelAllocated(t *testing.T) {
	const obj = 14 << 20
	u := raftmeta.ModelUsage{Name: "qwen2-7b", Registered: true, BytesPerToken: 57344, Objects: 3, Tokens: 3 * 256,
		ReplicaTokens: 3 * 256, ReplicaBytes: 3 * obj}
	w1 := WorkerMemory{ID: "w1", Models: []WorkerModelMemory{{Model: "qwen2-7b", DRAMObjects: 2, DRAMAllocated: 2*obj + 2048, DRAMLogical: 2 * obj,
		NVMeObjects: 2, NVMeAllocated: 2*obj + 8192, NVMeLogical: 2 * obj}}}
	w2 := WorkerMemory{ID: "w2", Models: []WorkerModelMemory{{Model: "qwen2-7b", DRAMObjects: 1, DRAMAllocated: obj + 1024, DRAMLogical: obj},
		{Model: "stray", NVMeObjects: 1, NVMeAllocated: 4096, NVMeLogical: 100}}}
	down := WorkerMemory{ID: "w3", Error: "timeout", Models: []WorkerModelMemory{{Model: "qwen2-7b", DRAMObjects: 9, DRAMAllocated: 9 * obj}}}
	r := BuildReport(Inputs{Models: []raftmeta.ModelUsage{u}, Workers: []WorkerMemory{w1, w2, down}})
	if len(r.Models) != 2 {
		t.Fatalf("models %+v", r.Models)
	}
	q := r.Models[0]
	if q.DRAMObjects != 3 || q.DRAMAllocated != 3*obj+3072 || q.NVMeObjects != 2 || q.NVMeAllocated != 2*obj+8192 ||
		q.AllocatedBytes != q.DRAMAllocated+q.NVMeAllocated {
		t.Fatalf("qwen2-7b %+v", q)
	}
	var sum int64
	got := map[string]int64{}
	for _, c := range q.AllocatedCauses {
		sum += c.Bytes
		got[c.Name] = c.Bytes
	}
	if sum != q.AllocatedBytes-q.ActualBytes || got[CauseAlignment] != 3072 || got[CauseNVMeHeaders] != 8192 || got[CauseExtraCopies] != 2*obj {
		t.Fatalf("allocated causes %+v (sum %d, want %d)", q.AllocatedCauses, sum, q.AllocatedBytes-q.ActualBytes)
	}
	// A model the metadata does not name is listed with its copies.
	if s := r.Models[1]; s.Name != "stray" || s.NVMeAllocated != 4096 || s.Registered {
		t.Fatalf("stray %+v", s)
	}
}
