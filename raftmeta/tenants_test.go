package raftmeta

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/mooncake-go/mooncake/internal/base"
)

func formatTenants(f *fsm) string {
	var out []string
	for _, t := range slices.Sorted(maps.Keys(f.st.tenants)) {
		r := f.st.tenants[t]
		out = append(out, fmt.Sprintf("%s dram_quota=%d nvme_quota=%d objects=%d bytes=%d", t, r.dramQuota, r.nvmeQuota, r.objects, r.bytes))
	}
	if len(out) == 0 {
		return "(none)\n"
	}
	return strings.Join(out, "\n") + "\n"
}

// checkTenantInvariants recomputes every tenant's usage from the objects.
func checkTenantInvariants(t testing.TB, st *state) {
	t.Helper()
	want := map[string][2]int64{}
	for k, i := range st.objects {
		u := want[base.TenantOf(k)]
		u[0]++
		u[1] += st.recs.at(i).size()
		want[base.TenantOf(k)] = u
	}
	for tn, r := range st.tenants {
		if r == (tenantRec{}) {
			t.Fatalf("tenant %q: an empty record is kept", tn)
		}
		if u := want[tn]; u != [2]int64{r.objects, r.bytes} {
			t.Fatalf("tenant %q: usage %d/%d, recomputed %d/%d", tn, r.objects, r.bytes, u[0], u[1])
		}
		delete(want, tn)
	}
	if len(want) != 0 {
		t.Fatalf("tenants with objects and no record: %v", want)
	}
}

func TestTenantCommandsRoundTrip(t *testing.T) {
	for _, c := range []Command{
		SetTenantQuota{Tenant: "team-a", DRAMBytes: 1 << 30, NVMeBytes: 0},
		SetTenantQuota{Tenant: "", DRAMBytes: 0, NVMeBytes: 5},
		RemoveTenant{Tenant: "team-a", Pattern: "^k"},
		RemoveTenant{Tenant: "default", All: true},
	} {
		b := EncodeCommand(c)
		got, err := DecodeCommand(b)
		if err != nil {
			t.Fatal(err)
		}
		if got != c {
			t.Fatalf("round trip of %+v gave %+v", c, got)
		}
	}
	for _, c := range []Command{
		SetTenantQuota{Tenant: "a b"}, SetTenantQuota{Tenant: "a", DRAMBytes: -1},
		RemoveTenant{Tenant: "a"}, RemoveTenant{Tenant: "a", Pattern: "x", All: true}, RemoveTenant{Tenant: "a", Pattern: "("},
	} {
		if err := c.Validate(); err == nil {
			t.Fatalf("%+v validated", c)
		}
	}
}
