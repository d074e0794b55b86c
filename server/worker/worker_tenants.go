package worker

import (
	"context"

	"github.com/mooncake-go/mooncake/transfer"
)

// Tenant shares (issue 21 item 1): the worker's eviction takes from the tenants over their
// share of its DRAM first (tier/policy tenants.go). A tenant's share here is its quota times
// this worker's DRAM over the DRAM of every active worker: the quota spread over the cluster
// as placement spreads puts. Tenants without a quota have no share (never over it).
//
// The NVMe quota is shared the same way by NVMe capacity: a tenant's share of this worker's
// NVMe tier is its NVMe quota times this worker's NVMe over every active worker's. The tier
// holds it at spill time (tier/policy tenants.go): the tenant's own least recently used NVMe
// objects are evicted (reported lost) to make room, or the object leaves DRAM unspilled.

// tenantSharesEvery is how often, in heartbeats, the worker asks the leader for the tenants'
// quotas (every 10th: 10 s at the default 1 s interval). A quota change reaches the
// workers' eviction within that; admission and the raft apply enforce it at once.
const tenantSharesEvery = 10

// refreshTenantShares asks the leader at addr for the tenants' quotas and gives the engine
// this worker's shares. A failure keeps the shares it had (logged at debug: the next
// refresh tries again).
func (w *Worker) refreshTenantShares(addr string) {
	ctx, cancel := context.WithTimeout(w.ctx, w.heartbeatTimeout())
	defer cancel()
	var resp transfer.TenantListResponse
	if err := w.callMaster(ctx, addr, transfer.NewEmpty(transfer.OpTenantList), &resp); err != nil {
		w.log.Debug("tenant shares not refreshed", "master", addr, "err", err)
		return
	}
	w.eng.SetTenantShares(tenantShares(resp.Items, resp.DRAMCapacity, w.eng.Metrics().ArenaCapacityBytes,
		func(q transfer.TenantQuota) int64 { return q.DRAMBytes }))
	if w.store != nil {
		w.eng.SetTenantNVMeShares(tenantShares(resp.Items, resp.NVMeCapacity, w.store.Metrics().Capacity,
			func(q transfer.TenantQuota) int64 { return q.NVMeBytes }))
	}
}

// tenantShares computes this worker's shares of the quotas quota picks from a TenantList
// answer: each quota times capacity (this worker's) over total (the active workers').
func tenantShares(items []transfer.TenantQuota, total, capacity int64, quota func(transfer.TenantQuota) int64) map[string]int64 {
	if total <= 0 || capacity <= 0 {
		return nil
	}
	frac := min(float64(capacity)/float64(total), 1)
	var shares map[string]int64
	for _, t := range items {
		q := quota(t)
		if q <= 0 {
			continue
		}
		if shares == nil {
			shares = map[string]int64{}
		}
		shares[t.Tenant] = max(int64(float64(q)*frac), 1)
	}
	return shares
}
