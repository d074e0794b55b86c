package tier_test

import (
	"bytes"
	"errors"
	"fmt"
	"testing"

	"github.com/mooncake-go/mooncake/internal/base"
	"github.com/mooncake-go/mooncake/tier"
)

// TestGetDRAM: GetDRAM serves an object in DRAM like Get, fails like Get for a missing key or
// version, and declines (ok false, nothing held or counted) an object only on the lower
// tier, which Get then serves.
func TestGetDRAM(t *testing.T) {
	e, _ := newSpill(t, 1<<20, tier.Options{})
	const n, size = 40, 100 * kib
	for i := range n {
		mustPut(t, e, fmt.Sprint("k", i), base.Version(i+1), size, tier.PutOptions{})
	}
	last := fmt.Sprint("k", n-1)
	r, ok, err := e.GetDRAM(last, base.Version(n))
	if !ok || err != nil || r.Tier() != base.TierDRAM || !bytes.Equal(r.Bytes(), pattern(last, base.Version(n), size)) {
		t.Fatalf("GetDRAM of the newest object: ok %v err %v", ok, err)
	}
	r.Release()
	if _, ok, err := e.GetDRAM("nope", 0); !ok || !errors.Is(err, base.ErrObjectNotFound) {
		t.Fatalf("GetDRAM of a missing key: ok %v err %v", ok, err)
	}
	if _, ok, err := e.GetDRAM(last, 1); !ok || err == nil {
		t.Fatalf("GetDRAM of a wrong version: ok %v err %v", ok, err)
	}
	// k0 was spilled to make room: GetDRAM declines it, Get reads it from NVMe.
	before := e.Metrics()
	if r, ok, err := e.GetDRAM("k0", 1); ok || r != nil || err != nil {
		t.Fatalf("GetDRAM of a spilled object: ok %v err %v", ok, err)
	}
	if after := e.Metrics(); after.HitsDRAM != before.HitsDRAM || after.HitsNVMe != before.HitsNVMe || after.Misses != before.Misses {
		t.Fatalf("a declined GetDRAM counted: %+v -> %+v", before, after)
	}
	if tr := mustGet(t, e, "k0", 1, size); tr != base.TierNVMe {
		t.Fatalf("k0 served from %v", tr)
	}
}
