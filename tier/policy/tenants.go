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
//
// # NVMe shares
//
// The policy also counts each tenant's bytes on the lower tier (entries with OnLower: spilled,
// durable, found at Open, or DRAM copies of objects also on the lower tier), and the engine may
// give it each tenant's share of this worker's lower tier (SetTenantNVMeShares: the tenant's
// NVMe quota times this worker's NVMe capacity over the active workers'). The share is held at
// spill time: before an object of a tenant with a share is written, SpillPlan decides whether
// it fits under the share, evicting that tenant's own least recently used lower-tier objects
// (never another tenant's, never kept copies: durable or found at Open, never hard-pinned or
// busy ones) to make it fit; if it cannot fit, the object is not spilled and the engine drops
// it from DRAM. Durable objects reach the lower tier at put, not by a spill: they count toward
// the share but are never refused or evicted for it.
//
// Invariant: tenantLower[t] is the sum of the sizes of t's entries with OnLower; tenants with
// none have no entry.

// SetTenantShares replaces every tenant's DRAM share on this worker, in bytes (nil: none).
func (p *Policy) SetTenantShares(shares map[string]int64) { p.shares = positive(shares) }

// positive returns a copy of shares without the shares <= 0 (none).
func positive(shares map[string]int64) map[string]int64 {
	out := maps.Clone(shares)
	for t, n := range out {
		if n <= 0 {
			delete(out, t)
		}
	}
	return out
}

// addBytes adds n to m[t], keeping no entry for 0.
func addBytes(m *map[string]int64, t string, n int64) {
	if *m == nil {
		*m = map[string]int64{}
	}
	if v := (*m)[t] + n; v != 0 {
		(*m)[t] = v
	} else {
		delete(*m, t)
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
	addBytes(&p.tenantDRAM, e.Tenant, sign*e.Size)
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

// SetTenantNVMeShares replaces every tenant's share of this worker's lower tier, in bytes
// (nil: none; a share <= 0 is none).
func (p *Policy) SetTenantNVMeShares(shares map[string]int64) { p.nvmeShares = positive(shares) }

// TenantNVMeShare returns tenant t's share of the lower tier (0: none).
func (p *Policy) TenantNVMeShare(t string) int64 { return p.nvmeShares[t] }

// TenantLower returns the bytes of tenant t's objects on the lower tier.
func (p *Policy) TenantLower(t string) int64 { return p.tenantLower[t] }

// TenantsLower returns every tenant's bytes on the lower tier (a copy; tenants with none are
// absent).
func (p *Policy) TenantsLower() map[string]int64 { return maps.Clone(p.tenantLower) }

// countLower adds sign × e's size to the lower tier's totals and to its tenant's lower-tier
// bytes (every change of e.OnLower's count).
func (p *Policy) countLower(e *entry, sign int64) {
	p.lowerBytes += sign * e.Size
	p.lowerObjects += int(sign)
	addBytes(&p.tenantLower, e.Tenant, sign*e.Size)
}

// SpillPlan decides, before the engine writes the object id (LocSpilling) to the lower tier,
// whether it fits under its tenant's NVMe share. spill: write it; victims (possibly none)
// are the tenant's own lower-tier objects, least recently used first, that must go first,
// already forgotten by the policy (ActionDrop: the engine deletes them from the lower tier
// and reports them lost). !spill: the object cannot fit (larger than the share, or the rest
// is kept copies, hard-pinned or busy); nothing was evicted and the engine drops the object
// (SpillDone(id, false)). A tenant without a share always spills.
func (p *Policy) SpillPlan(id ID, busy func(ID) bool) (victims []Victim, spill bool) {
	e, ok := p.m[id]
	if !ok || e.loc != LocSpilling {
		return nil, true // not the policy's to refuse: the engine's checks decide
	}
	share, ok := p.nvmeShares[e.Tenant]
	if !ok {
		return nil, true
	}
	over := p.tenantLower[e.Tenant] + e.Size - share
	if over <= 0 {
		return nil, true
	}
	if e.Size > share {
		return nil, false
	}
	var picked []*entry
	var freed int64
	for c := p.lowerLRU.front(); c != nil && freed < over; c = p.lowerLRU.next(c) {
		if c.Tenant == e.Tenant && !c.HardPin && (busy == nil || !busy(c.ID)) {
			picked = append(picked, c)
			freed += c.Size
		}
	}
	if freed < over {
		return nil, false
	}
	for _, c := range picked {
		victims = append(victims, Victim{ID: c.ID, Size: c.Size, Action: ActionDrop})
		p.Remove(c.ID)
	}
	return victims, true
}
