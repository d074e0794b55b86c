package master

import (
	"maps"
	"slices"
	"sync"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/mooncake-go/mooncake/internal/base"
)

// Per-tenant metrics, Mooncake's names (master_metric_manager.cpp): quota, usage and
// refusals, one series per tenant with a quota or an object (leader and followers alike: the
// quota and usage are replicated state), refusals per tenant counted by the master that
// refused (the leader).
var (
	descTenantMaxBytes  = prometheus.NewDesc("mooncake_tenant_quota_max_bytes", "A tenant's DRAM quota: the most bytes of objects it may hold (0: no limit).", []string{"tenant_id"}, nil)
	descTenantUsedBytes = prometheus.NewDesc("mooncake_tenant_quota_used_bytes", "Bytes of a tenant's committed objects (one replica's worth).", []string{"tenant_id"}, nil)
	descTenantObjects   = prometheus.NewDesc("mooncake_tenant_quota_committed_count", "A tenant's committed objects.", []string{"tenant_id"}, nil)
	descTenantInFlight  = prometheus.NewDesc("mooncake_tenant_quota_reserved_bytes", "Bytes of a tenant's puts in flight (leader only; 0 on followers).", []string{"tenant_id"}, nil)
	descTenantOver      = prometheus.NewDesc("mooncake_tenant_quota_over_quota", "1 when a tenant holds more than its quota (a quota lowered under its use), else 0.", []string{"tenant_id"}, nil)
	descTenantExplicit  = prometheus.NewDesc("mooncake_tenant_quota_explicit_policy", "1 when a tenant's quota is its own, 0 when it is the default quota's (tenant_id=\"_default\" in mooncake_tenant_quota_max_bytes).", []string{"tenant_id"}, nil)
)

// tenantCounter counts events per tenant.
type tenantCounter struct {
	mu sync.Mutex
	n  map[string]uint64 // protected by mu
}

func (c *tenantCounter) inc(t string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.n == nil {
		c.n = map[string]uint64{}
	}
	c.n[t]++
}

func (c *tenantCounter) snapshot() map[string]uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return maps.Clone(c.n)
}

func describeTenants(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descTenantMaxBytes, descTenantUsedBytes, descTenantObjects, descTenantInFlight, descTenantOver, descTenantExplicit} {
		ch <- d
	}
}

// collectTenants emits the per-tenant series (descTenantRejects with reason "quota_exceeded",
// Mooncake's only reason here), and as Mooncake does the default quota as the max_bytes of the
// pseudo-tenant "_default" when one is set (left out if a tenant of an older cluster is
// named so: its own series keep the label).
func (m *Master) collectTenants(ch chan<- prometheus.Metric) {
	named := false
	for _, u := range m.node.Tenants() {
		named = named || u.Tenant == base.DefaultQuotaTenant
		explicit := 0.0
		if !u.DefaultQuota && (u.DRAMQuota != 0 || u.NVMeQuota != 0) {
			explicit = 1
		}
		ch <- prometheus.MustNewConstMetric(descTenantExplicit, prometheus.GaugeValue, explicit, u.Tenant)
		inFlight := m.tenantInFlight(u.Tenant)
		over := 0.0
		if u.DRAMQuota > 0 && u.Bytes > u.DRAMQuota {
			over = 1
		}
		ch <- prometheus.MustNewConstMetric(descTenantMaxBytes, prometheus.GaugeValue, float64(u.DRAMQuota), u.Tenant)
		ch <- prometheus.MustNewConstMetric(descTenantUsedBytes, prometheus.GaugeValue, float64(u.Bytes), u.Tenant)
		ch <- prometheus.MustNewConstMetric(descTenantObjects, prometheus.GaugeValue, float64(u.Objects), u.Tenant)
		ch <- prometheus.MustNewConstMetric(descTenantInFlight, prometheus.GaugeValue, float64(inFlight), u.Tenant)
		ch <- prometheus.MustNewConstMetric(descTenantOver, prometheus.GaugeValue, over, u.Tenant)
	}
	if dram, nvme, _ := m.node.DefaultTenantQuota(); !named && (dram != 0 || nvme != 0) {
		ch <- prometheus.MustNewConstMetric(descTenantMaxBytes, prometheus.GaugeValue, float64(dram), base.DefaultQuotaTenant)
	}
	rejects := m.met.tenantRejects.snapshot()
	for _, t := range slices.Sorted(maps.Keys(rejects)) {
		ch <- prometheus.MustNewConstMetric(descTenantRejects, prometheus.CounterValue, float64(rejects[t]), t, "quota_exceeded")
	}
}

// tenantInFlight returns the bytes of tenant t's puts in flight (0 on a follower).
func (m *Master) tenantInFlight(t string) int64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.mu.lc.TenantInFlight(t)
}
