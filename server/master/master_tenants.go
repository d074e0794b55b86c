package master

import (
	"context"
	"errors"

	"github.com/mooncake-go/mooncake/internal/base"
	"github.com/mooncake-go/mooncake/raftmeta"
	"github.com/mooncake-go/mooncake/server/lifecycle"
	"github.com/mooncake-go/mooncake/transfer"
)

// Tenants (issue 21 item 1): the master's side of namespaces and quotas. A tenant's keys
// arrive already namespaced (base.TenantKey), so lookups, puts and removes of keys need nothing
// here; what does:
//
//  1. removal scoped to a tenant: TenantRemove, and RemoveByRegex/RemoveAll, which are the
//     default tenant's (a client of the default tenant never removes another tenant's objects);
//  2. quotas: SetTenantQuota commits the quota (raft command 26); PutStart refuses a put over
//     quota (lifecycle admission, counting puts in flight) and the FSM refuses to commit one;
//  3. usage per tenant for status, the admin HTTP and metrics (raftmeta.Node.Tenants);
//  4. the default quota, that of every tenant without its own (Mooncake's _default policy):
//     raftmeta keeps it and reports each tenant's effective quota, so admission, the apply
//     check, TenantList (the workers' shares), status and metrics apply it with nothing
//     more here than naming it: the tenant id "_default" (base.DefaultQuotaTenant) in
//     setTenantQuota. Other ids starting with '_' are refused there, as Mooncake reserves them.
//
// The NVMe quota is kept in the raft state like the DRAM quota, but the master does not see
// which tier holds an object: the workers enforce it. TenantList gives them each quota and the
// active workers' NVMe capacity; each holds a tenant's objects on its NVMe tier under its share
// (server/worker worker_tenants.go, tier/policy tenants.go).

func init() {
	masterCalls[transfer.OpTenantRemove] = masterCall{op: noOp, timeout: applyTimeout, serve: serveTenantRemove}
	masterCalls[transfer.OpTenantQuotaSet] = masterCall{op: noOp, timeout: applyTimeout, serve: serveTenantQuotaSet}
	masterCalls[transfer.OpTenantList] = masterCall{op: noOp, serve: serveTenantList}
}

func serveTenantRemove(ctx context.Context, m *Master, req transfer.Message) (transfer.Message, error, error) {
	r := req.(*transfer.TenantRemoveRequest)
	n, err := m.removeTenant(ctx, r.Tenant, r.Pattern, r.All)
	if err != nil {
		return nil, nil, err
	}
	return transfer.NewCountResponse(transfer.OpTenantRemove, int64(n)), nil, nil
}

func serveTenantQuotaSet(ctx context.Context, m *Master, req transfer.Message) (transfer.Message, error, error) {
	q := req.(*transfer.TenantQuotaSetRequest).Quota
	return nil, nil, m.setTenantQuota(ctx, q.Tenant, q.DRAMBytes, q.NVMeBytes)
}

func serveTenantList(_ context.Context, m *Master, _ transfer.Message) (transfer.Message, error, error) {
	if !m.ensureLeader() {
		return nil, nil, m.notLeader()
	}
	resp := &transfer.TenantListResponse{}
	for _, s := range m.activeSegments() {
		resp.DRAMCapacity += s.DRAMCapacity
		resp.NVMeCapacity += s.NVMeCapacity
	}
	for _, u := range m.node.Tenants() {
		resp.Items = append(resp.Items, transfer.TenantQuota{Tenant: u.Tenant, DRAMBytes: u.DRAMQuota,
			NVMeBytes: u.NVMeQuota, Objects: u.Objects, Bytes: u.Bytes})
	}
	return resp, nil, nil
}

// removeTenant removes tenant t's objects whose key (without the tenant prefix) matches
// pattern, or all of them, in one raft commit.
func (m *Master) removeTenant(ctx context.Context, t, pattern string, all bool) (int, error) {
	if err := base.ValidateTenant(t); err != nil {
		return 0, err
	}
	t = base.NormalizeTenant(t)
	if pattern == "" {
		all = true // the empty pattern matches every key, as RemoveByRegex's always did
	}
	cmd := raftmeta.RemoveTenant{Tenant: t, Pattern: pattern, All: all}
	if err := cmd.Validate(); err != nil {
		return 0, err
	}
	return m.removeMatching(ctx, cmd)
}

// setTenantQuota commits tenant t's quota (0: no limit), or the default quota when t is
// base.DefaultQuotaTenant. Leader only.
func (m *Master) setTenantQuota(ctx context.Context, t string, dram, nvme int64) error {
	cmd := raftmeta.SetTenantQuota{Tenant: base.NormalizeTenant(t), DRAMBytes: dram, NVMeBytes: nvme}
	if t == base.DefaultQuotaTenant {
		cmd = raftmeta.SetTenantQuota{Default: true, DRAMBytes: dram, NVMeBytes: nvme}
	} else if err := base.ValidateQuotaTenant(t); err != nil {
		return err
	}
	if err := cmd.Validate(); err != nil {
		return err
	}
	if !m.ensureLeader() {
		return m.notLeader()
	}
	res, err := m.node.Apply(ctx, cmd)
	if err != nil {
		return err
	}
	if res.Err != nil {
		return res.Err
	}
	m.log.Info("master: tenant quota set", "tenant", t, "default", cmd.Default, "dram_bytes", dram, "nvme_bytes", nvme)
	return nil
}

// seedDefaultTenantQuota commits Config.DefaultTenantQuotaBytes as the default quota when
// the raft state never had one (leader loop, each tick while leading: one raft commit, then
// nothing). A failure is logged and retried at the next tick.
func (m *Master) seedDefaultTenantQuota() {
	if m.cfg.DefaultTenantQuotaBytes <= 0 {
		return
	}
	if _, _, set := m.node.DefaultTenantQuota(); set {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), applyTimeout)
	defer cancel()
	if err := m.setTenantQuota(ctx, base.DefaultQuotaTenant, int64(m.cfg.DefaultTenantQuotaBytes), 0); err != nil {
		m.log.Warn("default tenant quota not seeded from --default_tenant_quota_bytes; retrying", "err", err)
	}
}

// tenantAdmission returns what PutStart's admission needs to know of key's tenant.
func (m *Master) tenantAdmission(key string) lifecycle.TenantQuota {
	u := m.node.Tenant(base.TenantOf(key))
	return lifecycle.TenantQuota{DRAMBytes: u.DRAMQuota, Used: u.Bytes}
}

// countQuotaReject counts a put refused for its tenant's quota (mooncake_tenant_quota_reject_total).
func (m *Master) countQuotaReject(key string, err error) {
	if errors.Is(err, base.ErrQuotaExceeded) {
		m.met.tenantRejects.inc(base.TenantOf(key))
	}
}

// TenantStatus is one tenant in Status and in the admin HTTP's /tenants/quota answers, with
// Mooncake's field names (its /tenants/quota/query answer).
type TenantStatus struct {
	TenantID string `json:"tenant_id"`
	// MaxBytes is the DRAM quota: the most bytes of objects the tenant may hold (0: no limit).
	MaxBytes int64 `json:"max_bytes"`
	// NVMeMaxBytes is the NVMe quota: the most bytes of the tenant's objects the workers' NVMe
	// tiers hold, each worker holding its share (0: no limit).
	NVMeMaxBytes int64 `json:"nvme_max_bytes"`
	// UsedBytes and CommittedCount are the tenant's committed objects (one replica's worth).
	UsedBytes      int64 `json:"used_bytes"`
	CommittedCount int64 `json:"committed_count"`
	// ReservedBytes is the bytes of its puts in flight (leader only; 0 on followers).
	ReservedBytes int64 `json:"reserved_bytes"`
	// HasExplicitPolicy (Mooncake's field) is true when the quota above is the tenant's own;
	// false, the quota is the default quota's (0 and 0 when none is set).
	HasExplicitPolicy bool `json:"has_explicit_policy"`
}

// tenantStatus returns t's TenantStatus. REQUIRES: m.mu not held.
func (m *Master) tenantStatus(u raftmeta.TenantUsage) TenantStatus {
	own := !u.DefaultQuota && (u.DRAMQuota != 0 || u.NVMeQuota != 0)
	return TenantStatus{TenantID: u.Tenant, MaxBytes: u.DRAMQuota, NVMeMaxBytes: u.NVMeQuota,
		UsedBytes: u.Bytes, CommittedCount: u.Objects, ReservedBytes: m.tenantInFlight(u.Tenant), HasExplicitPolicy: own}
}

// defaultTenantStatus returns the default quota as a TenantStatus of the pseudo-tenant
// "_default" (Mooncake's GET /tenants/quota/_default answer): quota only, no usage.
func (m *Master) defaultTenantStatus() TenantStatus {
	dram, nvme, _ := m.node.DefaultTenantQuota()
	return TenantStatus{TenantID: base.DefaultQuotaTenant, MaxBytes: dram, NVMeMaxBytes: nvme}
}

// tenantStatuses returns every tenant with a quota or an object. REQUIRES: m.mu not held.
func (m *Master) tenantStatuses() []TenantStatus {
	out := []TenantStatus{}
	for _, u := range m.node.Tenants() {
		out = append(out, m.tenantStatus(u))
	}
	return out
}
