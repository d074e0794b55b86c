package tier_test

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/mooncake-go/mooncake/internal/base"
	"github.com/mooncake-go/mooncake/tier"
)

// A tenant at its NVMe share loses its own least recently used NVMe objects at its next
// spills, each reported lost, while another tenant's spilled objects all stay; an object
// larger than its tenant's share is evicted from DRAM without a spill.
func TestTenantNVMeShare(t *testing.T) {
	const size = 32 * kib
	s := openNVMe(t, 64<<20)
	var mu sync.Mutex
	lost := map[string]string{}
	ev := tier.EventListener{ObjectLost: func(m base.ObjectMeta, why string) {
		mu.Lock()
		lost[m.Key] = why
		mu.Unlock()
	}}
	e := open(t, tier.Options{Arena: newArena(t, 256*kib), Lower: s, Events: ev})
	const share = 4 * size
	e.SetTenantNVMeShares(map[string]int64{"team-a": share, "team-c": size / 2})
	key := func(tenant string, i int) string {
		k, err := base.TenantKey(tenant, fmt.Sprint("k", i))
		if err != nil {
			t.Fatal(err)
		}
		return k
	}
	const n = 20
	for i := range n {
		mustPut(t, e, key("team-a", i), base.Version(2*i+1), size, tier.PutOptions{})
		mustPut(t, e, key("team-b", i), base.Version(2*i+2), size, tier.PutOptions{})
	}
	if err := e.Settle(context.Background()); err != nil {
		t.Fatal(err)
	}

	// team-b: nothing lost, every object where it was put or spilled.
	for i := range n {
		if l := listKey(e, key("team-b", i)); len(l) != 1 {
			t.Fatalf("team-b's k%d: %+v (lost: %q)", i, l, lost[key("team-b", i)])
		}
	}
	// team-a: at most its share on NVMe; the objects lost are its oldest (a prefix), the ones
	// kept on NVMe are newer than every lost one.
	m := e.Metrics()
	if got := m.TenantNVMeBytes["team-a"]; got > share || got == 0 {
		t.Fatalf("team-a holds %d bytes on NVMe, share %d", got, share)
	}
	if m.TenantNVMeBytes["team-b"] < 8*size {
		t.Fatalf("team-b holds only %d bytes on NVMe", m.TenantNVMeBytes["team-b"])
	}
	var nLost int
	for i := range n {
		k := key("team-a", i)
		l := listKey(e, k)
		if (len(l) == 0) != (i < len(lostOf(&mu, lost, "team-a"))) {
			t.Fatalf("team-a's k%d: %+v; lost %v", i, l, lostOf(&mu, lost, "team-a"))
		}
		if len(l) == 0 {
			nLost++
			if onLower(s, k) {
				t.Fatalf("team-a's k%d was reported lost but is on NVMe", i)
			}
		}
	}
	if nLost == 0 || m.NVMeQuotaEvictions != int64(nLost) || m.NVMeQuotaEvictedBytes != int64(nLost)*size || m.NVMeQuotaDrops != 0 {
		t.Fatalf("%d of team-a's objects lost; metrics %+v", nLost, m)
	}

	// team-c's share is smaller than its object: pushed out of DRAM, it is not spilled.
	c := key("team-c", 0)
	mustPut(t, e, c, 1000, size, tier.PutOptions{})
	for i := range 10 {
		mustPut(t, e, key("team-b", n+i), base.Version(2000+i), size, tier.PutOptions{})
	}
	if err := e.Settle(context.Background()); err != nil {
		t.Fatal(err)
	}
	if l := listKey(e, c); len(l) != 0 || onLower(s, c) {
		t.Fatalf("team-c's object over its share: %+v, on NVMe %t", l, onLower(s, c))
	}
	if m := e.Metrics(); m.NVMeQuotaDrops != 1 || m.NVMeQuotaDroppedBytes != size {
		t.Fatalf("metrics %+v", m)
	}
	mu.Lock()
	defer mu.Unlock()
	if lost[c] == "" {
		t.Fatal("team-c's object was not reported lost")
	}
	for k := range lost {
		if tn, _ := base.SplitTenantKey(k); tn == "team-b" {
			t.Fatalf("team-b's %q was lost: %s", k, lost[k])
		}
	}
}

// lostOf returns the keys of tenant's objects reported lost.
func lostOf(mu *sync.Mutex, lost map[string]string, tenant string) []string {
	mu.Lock()
	defer mu.Unlock()
	var out []string
	for k := range lost {
		if tn, _ := base.SplitTenantKey(k); tn == tenant {
			out = append(out, k)
		}
	}
	return out
}

// listKey is e.List(key) without the keys key is a prefix of.
func listKey(e *tier.Engine, key string) []base.ObjectMeta {
	var out []base.ObjectMeta
	for _, o := range e.List(key) {
		if o.Key == key {
			out = append(out, o.ObjectMeta)
		}
	}
	return out
}
