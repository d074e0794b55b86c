package policy

import (
	"maps"
	"slices"
)

// # Tenant shares
//
// Objects carry their tenant (Object.Tenant, from the key: internal/base tenant.go). The
// policy counts each tenant's bytes resident in DRAM (LocDRAM, pinned ones included; objects
// being spilled are on their way out and do not count), and the engine may give it each
// tenant's share of this worker's DRAM (SetTenantShares: the worker learns them from the
// leader, which divides each tenant's quota over the workers by DRAM capacity). Evict then
// takes its victims from the tenants over their share first, in the usual victim order and
// only as far as each is over, skipping soft-pinned objects; only then do the usual passes
// run. A tenant without a share is never over it.
//
// Invariant: tenantDRAM[t] is the sum of the sizes of t's LocDRAM entries; tenants with none
// have no entry.

// SetTenantShares replaces every tenant's DRAM share on this worker, in bytes (nil: none).
func (p *Policy) SetTenantShares(shares map[string]int64) {
	p.shares = maps.Clone(shares)
	for t, n := range p.shares {
		if n <= 0 {
			delete(p.shares, t)
		}
	}
}

// TenantDRAM returns the bytes of tenant t's objects resident in DRAM.
func (p *Policy) TenantDRAM(t string) int64 { return p.tenantDRAM[t] }

// TenantsOverShare returns the tenants whose DRAM bytes exceed their share, by name.
func (p *Policy) TenantsOverShare() []string {
	var out []string
	for t, share := range p.shares {
		if p.tenantDRAM[t] > share {
			out = append(out, t)
		}
	}
	slices.Sort(out)
	return out
}

// countTenant adds sign × e's size to its tenant's DRAM bytes (placeDRAM, unplaceDRAM).
func (p *Policy) countTenant(e *entry, sign int64) {
	if p.tenantDRAM == nil {
		p.tenantDRAM = map[string]int64{}
	}
	if n := p.tenantDRAM[e.Tenant] + sign*e.Size; n != 0 {
		p.tenantDRAM[e.Tenant] = n
	} else {
		delete(p.tenantDRAM, e.Tenant)
	}
}

// evictOverShare is Evict's first pass: victims of the tenants over their share, up to target
// bytes and up to what each is over. It returns the victims and the bytes they free.
func (p *Policy) evictOverShare(target, now int64) ([]Victim, int64) {
	over := map[string]int64{}
	for t, share := range p.shares {
		if n := p.tenantDRAM[t] - share; n > 0 {
			over[t] = n
		}
	}
	var victims []Victim
	var freed int64
	for _, l := range []*list{&p.probation, &p.protected} {
		for e := l.front(); e != nil && freed < target && len(over) > 0; {
			next := l.next(e)
			if n := over[e.Tenant]; n > 0 && e.readers == 0 && e.SoftPinUntil <= now {
				victims = append(victims, p.evictEntry(e))
				freed += e.Size
				if n -= e.Size; n > 0 {
					over[e.Tenant] = n
				} else {
					delete(over, e.Tenant)
				}
			}
			e = next
		}
	}
	return victims, freed
}
