package tier_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"testing"

	"github.com/mooncake-go/mooncake/internal/base"
	"github.com/mooncake-go/mooncake/nvme"
	"github.com/mooncake-go/mooncake/tier"
)

// openNVMe opens a real nvme store of capacity bytes in a temporary directory, closed at the
// end of the test (after the engine: cleanups run last registered first).
func openNVMe(t *testing.T, capacity int64) *nvme.Store {
	t.Helper()
	s, err := nvme.Open(nvme.Options{Dir: t.TempDir(), Capacity: capacity, Sync: nvme.SyncNone,
		Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Errorf("nvme close: %v", err)
		}
	})
	return s
}

func onLower(s *nvme.Store, key string) bool {
	_, err := s.Stat(key)
	return err == nil
}

// A promotion moves a spilled object to DRAM (its NVMe copy is deleted: exclusive tiers);
// a durable object keeps its NVMe copy; evicted again, the moved object is spilled again.
func TestPromotionMovesSpilledObject(t *testing.T) {
	s := openNVMe(t, 64<<20)
	const size = 100 * kib
	e := open(t, tier.Options{Arena: newArena(t, 1<<20), Lower: s})
	mustPut(t, e, "spilled", 1, size, tier.PutOptions{})
	mustPut(t, e, "durable", 2, size, tier.PutOptions{Persistence: base.PersistenceDurable})
	for i := range 20 { // push both out of DRAM
		mustPut(t, e, fmt.Sprint("k", i), base.Version(10+i), size, tier.PutOptions{})
	}
	if err := e.SpillAll(context.Background()); err != nil { // waits for the queued spills
		t.Fatal(err)
	}
	for _, k := range []string{"spilled", "durable"} {
		if l := e.List(k); len(l) != 1 || l[0].Tier != base.TierNVMe || !onLower(s, k) {
			t.Fatalf("%s before promotion: %+v", k, l)
		}
		for range 2 { // second-hit admission
			mustGet(t, e, k, 0, size)
		}
		if l := e.List(k); len(l) != 1 || l[0].Tier != base.TierDRAM {
			t.Fatalf("%s not promoted: %+v (metrics %+v)", k, l, e.Metrics())
		}
	}
	if onLower(s, "spilled") || e.List("spilled")[0].OnLower {
		t.Fatal("the promoted spill-mode object kept its NVMe copy")
	}
	if !onLower(s, "durable") || !e.List("durable")[0].OnLower {
		t.Fatal("the promoted durable object lost its NVMe copy")
	}
	if m := e.Metrics(); m.PromotionsMoved != 1 || m.Promotions != 2 {
		t.Fatalf("metrics %+v", m)
	}
	for i := range 20 {
		mustPut(t, e, fmt.Sprint("k", i), base.Version(100+i), size, tier.PutOptions{})
	}
	if err := e.SpillAll(context.Background()); err != nil {
		t.Fatal(err)
	}
	if !onLower(s, "spilled") {
		t.Fatal("the promoted object, evicted again, was not spilled again")
	}
	mustGet(t, e, "spilled", 1, size)
	mustGet(t, e, "durable", 2, size)
}

// A full NVMe tier evicts its least recently used spilled objects to take a new spill,
// reporting each lost; durable objects and objects found at Open stay.
func TestLowerEvictsLeastRecentlyUsed(t *testing.T) {
	const size = 64 * kib
	s := openNVMe(t, 1<<20) // about 15 objects
	var mu sync.Mutex
	lost := map[string]bool{}
	var bgErrs []error
	ev := tier.EventListener{
		ObjectLost: func(m base.ObjectMeta, why string) { mu.Lock(); lost[m.Key] = true; mu.Unlock() },
		BackgroundError: func(err error) {
			mu.Lock()
			bgErrs = append(bgErrs, err)
			mu.Unlock()
		},
	}
	e := open(t, tier.Options{Arena: newArena(t, 256*kib), Lower: s, Events: ev})
	mustPut(t, e, "durable", 1, size, tier.PutOptions{Persistence: base.PersistenceDurable})
	const n = 60
	hot := -1
	for i := range n {
		mustPut(t, e, fmt.Sprint("k", i), base.Version(10+i), size, tier.PutOptions{})
		if i == n-10 {
			// One hit on the oldest object left on NVMe makes it the most recent there:
			// the fewer than 15 writes left evict the others first.
			// NB: no spill may run between choosing the oldest object and reading it (a
			// background spill would evict it first): finish the spills in flight, then the
			// oldest object is the first one a get finds.
			if err := e.SpillAll(context.Background()); err != nil {
				t.Fatal(err)
			}
			for j := 0; hot < 0 && j < i; j++ {
				_, _, tr, err := getV(e, fmt.Sprint("k", j), 0)
				if errors.Is(err, base.ErrObjectNotFound) {
					continue
				}
				if err != nil || tr != base.TierNVMe {
					t.Fatalf("k%d: served from %v, err %v", j, tr, err)
				}
				hot = j
			}
			if hot < 0 {
				t.Fatal("no object left on NVMe to read")
			}
		}
	}
	if err := e.SpillAll(context.Background()); err != nil {
		t.Fatal(err)
	}
	m := e.Metrics()
	mu.Lock()
	defer mu.Unlock()
	if m.SpillErrors != 0 || m.LowerEvictions == 0 || int64(len(lost)) != m.LowerEvictions || len(bgErrs) != 0 {
		t.Fatalf("metrics %+v, lost %d, background errors %v", m, len(lost), bgErrs)
	}
	if !lost["k0"] || lost[fmt.Sprint("k", n-1)] || lost["durable"] {
		t.Fatalf("lost %v", lost)
	}
	if hotKey, next := fmt.Sprint("k", hot), fmt.Sprint("k", hot+1); hot < 1 || !lost[next] || lost[hotKey] {
		t.Fatalf("%s was read after %s was spilled: it goes after it (lost %v)", hotKey, next, lost)
	}
	for _, o := range e.List("") {
		if lost[o.Key] {
			t.Fatalf("%s reported lost but still indexed", o.Key)
		}
		if o.Tier == base.TierNVMe && !onLower(s, o.Key) {
			t.Fatalf("%s indexed on NVMe but not there", o.Key)
		}
		if _, _, err := get(e, o.Key, 0); err != nil {
			t.Fatalf("get %s: %v", o.Key, err)
		}
	}
	for k := range lost {
		if e.Exists(k) || onLower(s, k) {
			t.Fatalf("%s lost but still held", k)
		}
		if _, _, err := get(e, k, 0); !errors.Is(err, base.ErrObjectNotFound) {
			t.Fatalf("get of lost %s: %v", k, err)
		}
	}
	if !onLower(s, "durable") {
		t.Fatal("the durable object was evicted from NVMe")
	}
	// A durable put to the full NVMe tier makes room the same way rather than failing. NB:
	// "full" is not exact (an eviction may free more than one object's room), so durable puts
	// go on until one had to evict: each must succeed and land on NVMe, and one must evict
	// before the durable objects alone fill the tier (about 15 objects).
	mu.Unlock()
	for k := 0; ; k++ {
		before := e.Metrics().LowerEvictions
		key := fmt.Sprint("durable", k+2)
		mustPut(t, e, key, base.Version(2+k), size, tier.PutOptions{Persistence: base.PersistenceDurable})
		if !onLower(s, key) {
			mu.Lock()
			t.Fatalf("durable put %s is not on NVMe: metrics %+v", key, e.Metrics())
		}
		if e.Metrics().LowerEvictions > before {
			break
		}
		if k >= 10 {
			mu.Lock()
			t.Fatalf("10 durable puts to a full NVMe tier evicted nothing: metrics %+v", e.Metrics())
		}
	}
	mu.Lock()
}

// Objects found on NVMe at Open may have been durable (the mode is not recorded there):
// a full NVMe tier never evicts them, only what was spilled since.
func TestLowerKeepsObjectsFoundAtOpen(t *testing.T) {
	const size = 64 * kib
	s := openNVMe(t, 1<<20) // about 15 objects
	a := newArena(t, 256*kib)
	e1, err := tier.Open(tier.Options{Arena: a, Lower: s})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 8 {
		mustPut(t, e1, fmt.Sprint("old", i), base.Version(1+i), size, tier.PutOptions{})
	}
	if err := e1.SpillAll(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := e1.Close(); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	lost := map[string]bool{}
	e := open(t, tier.Options{Arena: a, Lower: s, Events: tier.EventListener{
		ObjectLost: func(m base.ObjectMeta, why string) { mu.Lock(); lost[m.Key] = true; mu.Unlock() }}})
	for i := range 30 {
		mustPut(t, e, fmt.Sprint("new", i), base.Version(100+i), size, tier.PutOptions{})
	}
	if err := e.SpillAll(context.Background()); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if e.Metrics().LowerEvictions == 0 || !lost["new0"] {
		t.Fatalf("nothing spilled since Open was evicted: lost %v, metrics %+v", lost, e.Metrics())
	}
	for i := range 8 {
		k := fmt.Sprint("old", i)
		if lost[k] || !onLower(s, k) {
			t.Fatalf("%s, found at Open, was evicted", k)
		}
		mustGet(t, e, k, base.Version(1+i), size)
	}
}
