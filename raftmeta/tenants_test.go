package raftmeta

import (
	"bytes"
	"encoding/binary"
	"errors"
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
		line := fmt.Sprintf("%s dram_quota=%d nvme_quota=%d objects=%d bytes=%d", t, r.dramQuota, r.nvmeQuota, r.objects, r.bytes)
		if q, inherited := f.st.quotaOf(t); inherited {
			line += fmt.Sprintf(" default_quota=%d/%d", q.dram, q.nvme)
		}
		out = append(out, line)
	}
	if d := f.st.tenantDefault; f.st.tenantDefaultSet {
		out = append([]string{fmt.Sprintf("(default) dram_quota=%d nvme_quota=%d", d.dram, d.nvme)}, out...)
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
		SetTenantQuota{Default: true, DRAMBytes: 100, NVMeBytes: 7},
		SetTenantQuota{Default: true},
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
		SetTenantQuota{Default: true, Tenant: "a"}, SetTenantQuota{Default: true, NVMeBytes: -1},
		RemoveTenant{Tenant: "a"}, RemoveTenant{Tenant: "a", Pattern: "x", All: true}, RemoveTenant{Tenant: "a", Pattern: "("},
	} {
		if err := c.Validate(); err == nil {
			t.Fatalf("%+v validated", c)
		}
	}
}

// TestSetTenantQuotaOldEncoding: the default quota is a trailing field, so a command 26 of an
// older log (no trailing byte) decodes as a tenant's quota and encodes to the same bytes, and
// a trailing false (which no encoder writes) is refused.
func TestSetTenantQuotaOldEncoding(t *testing.T) {
	old := []byte{commandVersion, byte(TypeSetTenantQuota)}
	old = appendStr(old, "_default")
	old = binary.AppendVarint(old, 100)
	old = binary.AppendVarint(old, 0)
	c, err := DecodeCommand(old)
	if err != nil {
		t.Fatal(err)
	}
	if want := (SetTenantQuota{Tenant: "_default", DRAMBytes: 100}); c != want {
		t.Fatalf("old encoding decoded as %+v, want %+v", c, want)
	}
	if b := EncodeCommand(c); !bytes.Equal(b, old) {
		t.Fatalf("re-encoding differs:\n%x\n%x", b, old)
	}
	if _, err := DecodeCommand(append(slices.Clone(old), 0)); !errors.Is(err, ErrBadCommand) {
		t.Fatalf("trailing false: %v, want ErrBadCommand", err)
	}
	if _, err := DecodeCommand(append(slices.Clone(old), 1)); !errors.Is(err, ErrBadCommand) {
		t.Fatalf("default naming a tenant: %v, want ErrBadCommand", err)
	}
}
