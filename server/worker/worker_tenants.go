package worker

import (
	"context"

	"github.com/mooncake-go/mooncake/transfer"
)

// Tenant shares (issue 21 item 1): the worker's eviction takes from the tenants over their
// share of its DRAM first (tier/policy tenants.go). A tenant's share here is its quota times
// this worker's DRAM over the DRAM of every active worker: the quota spread over the cluster
// as placement spreads puts. Tenants without a quota have no share (never over it).

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
	w.eng.SetTenantShares(tenantShares(&resp, w.eng.Metrics().ArenaCapacityBytes))
}

// tenantShares computes this worker's shares from a TenantList answer and its DRAM capacity.
func tenantShares(resp *transfer.TenantListResponse, capacity int64) map[string]int64 {
	if resp.DRAMCapacity <= 0 || capacity <= 0 {
		return nil
	}
	frac := min(float64(capacity)/float64(resp.DRAMCapacity), 1)
	var shares map[string]int64
	for _, t := range resp.Items {
		if t.DRAMBytes <= 0 {
			continue
		}
		if shares == nil {
			shares = map[string]int64{}
		}
		shares[t.Tenant] = max(int64(float64(t.DRAMBytes)*frac), 1)
	}
	return shares
}
