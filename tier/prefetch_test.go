package tier_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/mooncake-go/mooncake/internal/base"
	"github.com/mooncake-go/mooncake/tier"
)

// Prefetch promotes an NVMe-only object at once (no hit admission), moves a spill-mode
// object out of NVMe, counts no hit, and the next Get is a DRAM hit.
func TestPrefetchPromotesAtOnce(t *testing.T) {
	s := openNVMe(t, 64<<20)
	const size = 100 * kib
	e := open(t, tier.Options{Arena: newArena(t, 1<<20), Lower: s})
	mustPut(t, e, "cold", 1, size, tier.PutOptions{})
	for i := range 20 { // push it out of DRAM, filling DRAM
		mustPut(t, e, fmt.Sprint("k", i), base.Version(10+i), size, tier.PutOptions{})
	}
	if err := e.SpillAll(context.Background()); err != nil {
		t.Fatal(err)
	}
	if l := e.List("cold"); len(l) != 1 || l[0].Tier != base.TierNVMe {
		t.Fatalf("before prefetch: %+v", l)
	}
	if _, err := e.Prefetch("cold", 2); !errors.Is(err, base.ErrInvalidVersion) {
		t.Fatalf("prefetch of another version: %v", err)
	}
	if _, err := e.Prefetch("absent", 0); !errors.Is(err, base.ErrObjectNotFound) {
		t.Fatalf("prefetch of an absent key: %v", err)
	}
	before := e.Metrics()
	if res, err := e.Prefetch("cold", 1); err != nil || res != tier.PrefetchPromoted {
		t.Fatalf("prefetch: %v %v", res, err)
	}
	if l := e.List("cold"); len(l) != 1 || l[0].Tier != base.TierDRAM || l[0].OnLower || onLower(s, "cold") {
		t.Fatalf("after prefetch: %+v (still on NVMe: %v)", l, onLower(s, "cold"))
	}
	m := e.Metrics()
	if m.Prefetched != before.Prefetched+1 || m.Promotions != before.Promotions+1 ||
		m.HitsNVMe != before.HitsNVMe || m.HitsDRAM != before.HitsDRAM {
		t.Fatalf("metrics before %+v after %+v", before, m)
	}
	if res, err := e.Prefetch("cold", 0); err != nil || res != tier.PrefetchInDRAM {
		t.Fatalf("second prefetch: %v %v", res, err)
	}
	mustGet(t, e, "cold", 1, size)
	if m2 := e.Metrics(); m2.HitsDRAM != m.HitsDRAM+1 || m2.HitsNVMe != m.HitsNVMe {
		t.Fatalf("the read after prefetch was not a DRAM hit: %+v", m2)
	}
}
