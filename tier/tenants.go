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

// SetTenantNVMeShares gives the policy each tenant's share of this engine's lower tier, in
// bytes (tier/policy tenants.go): a spill of a tenant at its share first evicts that tenant's
// least recently used lower-tier objects, or is not made (the object leaves DRAM, reported
// lost). nil or empty: no shares.
func (e *Engine) SetTenantNVMeShares(shares map[string]int64) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.mu.pol.SetTenantNVMeShares(shares)
}

// TenantsOverShare returns the tenants whose DRAM bytes exceed their share, by name.
func (e *Engine) TenantsOverShare() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.mu.pol.TenantsOverShare()
}

// TenantNVMeShare returns tenant t's share of this engine's lower tier, in bytes (0: none).
func (e *Engine) TenantNVMeShare(t string) int64 {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.mu.pol.TenantNVMeShare(t)
}
