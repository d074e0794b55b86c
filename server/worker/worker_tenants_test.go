package worker

import (
	"maps"
	"testing"

	"github.com/mooncake-go/mooncake/transfer"
)

// A worker's share of each quota is the quota times its capacity over the active workers':
// DRAM shares from the DRAM quotas, NVMe shares from the NVMe quotas; no total, no shares.
func TestTenantShares(t *testing.T) {
	items := []transfer.TenantQuota{
		{Tenant: "a", DRAMBytes: 1000, NVMeBytes: 4000},
		{Tenant: "b", DRAMBytes: 600},
		{Tenant: "c", NVMeBytes: 3},
		{Tenant: "d", Bytes: 50},
	}
	dram := func(q transfer.TenantQuota) int64 { return q.DRAMBytes }
	nvme := func(q transfer.TenantQuota) int64 { return q.NVMeBytes }
	for _, tc := range []struct {
		name            string
		total, capacity int64
		quota           func(transfer.TenantQuota) int64
		want            map[string]int64
	}{
		{"dram", 400, 100, dram, map[string]int64{"a": 250, "b": 150}},
		{"nvme", 1 << 40, 1 << 38, nvme, map[string]int64{"a": 1000, "c": 1}},
		{"nvme, an old leader's answer", 0, 1 << 38, nvme, nil},
		{"no nvme here", 1 << 40, 0, nvme, nil},
		{"capacity above the total (a stale total)", 100, 400, nvme, map[string]int64{"a": 4000, "c": 3}},
	} {
		if got := tenantShares(items, tc.total, tc.capacity, tc.quota); !maps.Equal(got, tc.want) {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
}
