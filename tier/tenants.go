package tier

// SetTenantShares gives the policy each tenant's share of this engine's DRAM, in bytes
// (tier/policy tenants.go): eviction takes from the tenants over their share first. nil or
// empty: no shares. The server refreshes them from the leader (server/worker
// worker_tenants.go).
func (e *Engine) SetTenantShares(shares map[string]int64) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.mu.pol.SetTenantShares(shares)
}

// TenantsOverShare returns the tenants whose DRAM bytes exceed their share, by name.
func (e *Engine) TenantsOverShare() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.mu.pol.TenantsOverShare()
}
