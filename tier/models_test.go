package tier_test

import (
	"context"
	"fmt"
	"log/slog"
	"testing"

	"github.com/mooncake-go/mooncake/internal/base"
	"github.com/mooncake-go/mooncake/nvme"
	"github.com/mooncake-go/mooncake/tier"
)

// usageByModel returns e.ModelUsage() keyed by model.
func usageByModel(e *tier.Engine) map[string]tier.ModelUsage {
	out := map[string]tier.ModelUsage{}
	for _, u := range e.ModelUsage() {
		out[u.Model] = u
	}
	return out
}

// checkSums checks the per-model tallies against what the arena and the store count as a
// whole: with no put in flight and no reader, every allocated arena byte is a DRAM copy of
// some model, and every live NVMe byte a record of some model.
func checkSums(t *testing.T, when string, e *tier.Engine, s *nvme.Store) map[string]tier.ModelUsage {
	t.Helper()
	us := usageByModel(e)
	var dram, nvmeB, dramN, nvmeN int64
	for _, u := range us {
		dram += u.DRAMBytes
		nvmeB += u.NVMeBytes
		dramN += u.DRAMObjects
		nvmeN += u.NVMeObjects
	}
	m := e.Metrics()
	if dram != m.ArenaUsedBytes || dramN != m.DRAM.Objects {
		t.Fatalf("%s: models hold %d DRAM objects, %d bytes; the engine %d objects, the arena %d bytes allocated (%+v)",
			when, dramN, dram, m.DRAM.Objects, m.ArenaUsedBytes, us)
	}
	if live := s.Metrics().LiveBytes; nvmeB != live || nvmeN != m.NVMe.Objects {
		t.Fatalf("%s: models hold %d NVMe objects, %d bytes; the engine %d objects, the store %d live bytes (%+v)",
			when, nvmeN, nvmeB, m.NVMe.Objects, live, us)
	}
	return us
}

// TestModelUsage follows one model's bytes through DRAM, a spill, a promotion, a removal and a
// restart, over the real nvme store: the tallies always sum to the arena's allocated bytes and
// the store's live bytes, and each model's share is its objects' own.
func TestModelUsage(t *testing.T) {
	dir := t.TempDir()
	openStore := func() *nvme.Store {
		s, err := nvme.Open(nvme.Options{Dir: dir, Capacity: 1 << 30, Sync: nvme.SyncNone, Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	s := openStore()
	a := newArena(t, 4<<20)
	e, err := tier.Open(tier.Options{Arena: a, Lower: s})
	if err != nil {
		t.Fatal(err)
	}
	// Sizes that are not multiples of the arena's alignment nor of NVMe blocks, so allocated
	// bytes differ from logical ones.
	const size = 100*kib + 7
	for i := range 6 {
		mustPut(t, e, fmt.Sprint("qwen/", i), base.Version(i+1), size, tier.PutOptions{Model: "qwen2-7b"})
	}
	mustPut(t, e, "llama/0", 1, 3*kib+1, tier.PutOptions{Model: "llama"})
	mustPut(t, e, "plain", 1, 5*kib, tier.PutOptions{})
	us := checkSums(t, "after puts", e, s)
	q := us["qwen2-7b"]
	if q.DRAMObjects != 6 || q.DRAMBytes <= 6*size || q.DRAMLogical != 6*size || q.NVMeObjects != 0 {
		t.Fatalf("qwen2-7b after puts: %+v (logical %d)", q, 6*size)
	}
	if us["llama"].DRAMObjects != 1 || us[""].DRAMObjects != 1 {
		t.Fatalf("after puts: %+v", us)
	}

	// SpillAll writes every object to NVMe, keeping the DRAM copies: both tiers count them.
	if err := e.SpillAll(context.Background()); err != nil {
		t.Fatal(err)
	}
	us = checkSums(t, "after SpillAll", e, s)
	if q := us["qwen2-7b"]; q.NVMeObjects != 6 || q.NVMeBytes <= q.NVMeLogical || q.NVMeLogical != 6*size || q.DRAMObjects != 6 {
		t.Fatalf("qwen2-7b after SpillAll: %+v", q)
	}

	// Fill DRAM with another model: eviction drops the qwen copies (already on NVMe) and
	// spills the rest.
	for i := range 40 {
		mustPut(t, e, fmt.Sprint("fill/", i), 1, size, tier.PutOptions{Model: "filler"})
	}
	if err := e.SpillAll(context.Background()); err != nil { // waits for queued spills too
		t.Fatal(err)
	}
	us = checkSums(t, "after eviction", e, s)
	if q := us["qwen2-7b"]; q.NVMeObjects != 6 || q.DRAMObjects == 6 {
		t.Fatalf("qwen2-7b after eviction: %+v", q)
	}
	if m := e.Metrics(); m.EvictPasses == 0 || m.EvictedBytes < 3*kib*(m.EvictionsWatermark+m.EvictionsPressure) {
		t.Fatalf("eviction counters %+v", m)
	}

	// Two hits promote qwen/0 back into DRAM.
	before := usageByModel(e)["qwen2-7b"].DRAMObjects
	for range 3 {
		mustGet(t, e, "qwen/0", 0, size)
	}
	us = checkSums(t, "after promotion", e, s)
	if us["qwen2-7b"].DRAMObjects != before+1 && e.Metrics().PromotionsSkipped == 0 {
		t.Fatalf("qwen/0 not promoted: %+v", us["qwen2-7b"])
	}

	// Removing a model's objects takes them out of both tiers.
	for i := range 6 {
		if err := e.Remove(fmt.Sprint("qwen/", i), 0); err != nil {
			t.Fatal(err)
		}
	}
	us = checkSums(t, "after removal", e, s)
	if q, ok := us["qwen2-7b"]; ok {
		t.Fatalf("qwen2-7b after removal: %+v", q)
	}

	// A restart finds the objects on NVMe with their models: the store keeps each one's tag
	// and the tags' names.
	if err := e.SpillAll(context.Background()); err != nil {
		t.Fatal(err)
	}
	want := map[string]int64{}
	for _, u := range e.ModelUsage() {
		want[u.Model] = u.NVMeObjects
	}
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = openStore()
	t.Cleanup(func() { _ = s.Close() })
	e2 := open(t, tier.Options{Arena: a, Lower: s})
	us = checkSums(t, "after restart", e2, s)
	if len(us) != 3 || us["filler"].NVMeObjects != want["filler"] || us["llama"].NVMeObjects != 1 || us[""].NVMeObjects != 1 {
		t.Fatalf("after restart: %+v, want NVMe objects %v", us, want)
	}
	// A model new since the restart gets a tag of its own, also kept.
	mustPut(t, e2, "mistral/0", 1, size, tier.PutOptions{Model: "mistral", Persistence: base.PersistenceDurable})
	if us := checkSums(t, "after a durable put", e2, s); us["mistral"].NVMeObjects != 1 || us["filler"].NVMeObjects != want["filler"] {
		t.Fatalf("after a durable put: %+v", us)
	}
	// And its name survives the next restart.
	if err := e2.Close(); err != nil {
		t.Fatal(err)
	}
	_ = s.Close()
	s3 := openStore()
	t.Cleanup(func() { _ = s3.Close() })
	e3 := open(t, tier.Options{Arena: a, Lower: s3})
	if us := checkSums(t, "after the second restart", e3, s3); us["mistral"].NVMeObjects != 1 || len(us) != 4 {
		t.Fatalf("after the second restart: %+v", us)
	}
}
