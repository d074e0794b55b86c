package raftmeta

import (
	"encoding/binary"
	"fmt"
	"maps"
	"regexp"
	"slices"

	"github.com/mooncake-go/mooncake/internal/base"
)

// Tenants: per-tenant quotas and usage (issue 21 item 1).
//
// A tenant is a namespace of keys (internal/base tenant.go): the FSM derives an object's tenant
// from its stored key, so objects carry no tenant field and the default tenant's records are
// unchanged. Per tenant the FSM keeps
//
//  1. its quota (SetTenantQuota), replicated, in the snapshot's tenants section;
//  2. its usage: objects and logical bytes (one replica's worth), kept by apply as objects come
//     and go and recomputed from the objects on restore (never stored).
//
// Apply enforces the DRAM quota: a PutEnd item that would take its tenant's bytes over it fails
// with base.ErrQuotaExceeded, so no put over quota is ever committed, whatever the leader's
// admission at PutStart let through. Every put lands in DRAM first, so the bytes a tenant may
// hold are bounded by its DRAM quota. The NVMe quota is stored and reported here and held by
// the workers (the master does not see tiers): each holds the tenant's bytes on its NVMe tier
// under its share of the quota (server/worker worker_tenants.go, tier/policy tenants.go).
//
// The default quota (Mooncake's /tenants/quota/_default policy) is the quota of every tenant
// without its own: SetTenantQuota with Default sets it, and everything that reads a tenant's
// quota (apply's check, Tenant, Tenants) reads its effective quota: its own when it has one
// (either figure non-zero: its own replaces the default whole, as Mooncake's explicit policy
// does), else the default. The default is a field of its own, not a tenant record, so a tenant
// that happens to be named "_default" (a legal id before the default existed) keeps meaning
// what it meant in old logs; the master refuses to set quotas of ids starting with '_' from
// now on (Mooncake reserves them) and maps "_default" to the default.

// Command types of the tenants range: 26, 28 and 29 (27 is the KV sessions').
const (
	TypeSetTenantQuota CommandType = 26
	TypeRemoveTenant   CommandType = 28
)

// SetTenantQuota sets a tenant's quota, or with Default the default quota (Tenant must then
// be ""). Zero means no limit; both zero removes the quota.
type SetTenantQuota struct {
	Tenant    string // "" is base.DefaultTenant
	DRAMBytes int64
	NVMeBytes int64
	// Default sets the default quota: that of every tenant without its own. It is a trailing
	// field of the encoding, present only when true, so the commands of older logs decode
	// as they were (a tenant's quota) and encode as they did.
	Default bool
}

// RemoveTenant removes the objects of one tenant: every one with All, else those whose key
// (the client's key, without the tenant prefix) the RE2 Pattern matches. Result.Removed counts
// them. Apply is O(objects).
type RemoveTenant struct {
	Tenant  string
	Pattern string
	All     bool
}

func (SetTenantQuota) Type() CommandType { return TypeSetTenantQuota }
func (RemoveTenant) Type() CommandType   { return TypeRemoveTenant }

func (c SetTenantQuota) Validate() error {
	if err := base.ValidateTenant(c.Tenant); err != nil {
		return err
	}
	if c.DRAMBytes < 0 || c.NVMeBytes < 0 {
		return invalidf("tenant %q: quota %d/%d bytes, want 0 (no limit) or more", c.Tenant, c.DRAMBytes, c.NVMeBytes)
	}
	if c.Default && c.Tenant != "" {
		return invalidf("the default quota names no tenant, not %q", c.Tenant)
	}
	return nil
}

func (c RemoveTenant) Validate() error {
	if err := base.ValidateTenant(c.Tenant); err != nil {
		return err
	}
	if c.All == (c.Pattern != "") {
		return invalidf("remove in tenant %q: want a pattern or all, not both or neither", c.Tenant)
	}
	if len(c.Pattern) > maxPatternLen {
		return invalidf("pattern of %d bytes, the limit is %d", len(c.Pattern), maxPatternLen)
	}
	if c.Pattern != "" {
		if _, err := regexp.Compile(c.Pattern); err != nil {
			return invalidf("pattern %q: %v", c.Pattern, err)
		}
	}
	return nil
}

func (c SetTenantQuota) appendFields(b []byte) []byte {
	b = appendStr(b, c.Tenant)
	b = binary.AppendVarint(b, c.DRAMBytes)
	b = binary.AppendVarint(b, c.NVMeBytes)
	if c.Default {
		b = appendBool(b, true)
	}
	return b
}

func (c RemoveTenant) appendFields(b []byte) []byte {
	b = appendStr(b, c.Tenant)
	b = appendStr(b, c.Pattern)
	return appendBool(b, c.All)
}

// decodeTenantCommand decodes the commands of the tenants range; nil for another type.
func decodeTenantCommand(t CommandType, d *decoder) Command {
	switch t {
	case TypeSetTenantQuota:
		var c SetTenantQuota
		c.Tenant = d.str(base.MaxTenantLen)
		c.DRAMBytes = d.varint()
		c.NVMeBytes = d.varint()
		if len(d.b) > 0 {
			// The trailing Default field is written only when true: false there would not
			// re-encode to the same bytes.
			if c.Default = d.boolean(); d.err == nil && (!c.Default || c.Tenant != "") {
				d.fail("SetTenantQuota: a trailing default flag must be true and name no tenant")
			}
		}
		return c
	case TypeRemoveTenant:
		var c RemoveTenant
		c.Tenant = d.str(base.MaxTenantLen)
		c.Pattern = d.str(maxPatternLen)
		c.All = d.boolean()
		return c
	}
	return nil
}

// tenantQuota is a quota: bytes in DRAM and on NVMe, 0 for no limit.
type tenantQuota struct{ dram, nvme int64 }

// tenantRec is one tenant's own quota and usage. A tenant with neither has no record.
type tenantRec struct {
	dramQuota, nvmeQuota int64 // its own quota; 0: no limit
	objects, bytes       int64 // Invariant: the sums over the tenant's objects
}

// hasOwnQuota reports whether the tenant has a quota of its own (which replaces the default).
func (r tenantRec) hasOwnQuota() bool { return r.dramQuota != 0 || r.nvmeQuota != 0 }

// quotaOf returns tenant t's effective quota and whether it is the default's.
func (st *state) quotaOf(t string) (q tenantQuota, inherited bool) {
	if r := st.tenants[t]; r.hasOwnQuota() {
		return tenantQuota{r.dramQuota, r.nvmeQuota}, false
	}
	return st.tenantDefault, st.tenantDefault != (tenantQuota{})
}

// applyTenant applies a tenants command; ok is false for another command.
func (st *state) applyTenant(c Command) (res Result, ok bool) {
	switch c := c.(type) {
	case SetTenantQuota:
		if c.Default {
			st.tenantDefault, st.tenantDefaultSet = tenantQuota{c.DRAMBytes, c.NVMeBytes}, true
			return Result{}, true
		}
		t := base.NormalizeTenant(c.Tenant)
		r := st.tenants[t]
		r.dramQuota, r.nvmeQuota = c.DRAMBytes, c.NVMeBytes
		st.setTenant(t, r)
		return Result{}, true
	case RemoveTenant:
		t := base.NormalizeTenant(c.Tenant)
		var re *regexp.Regexp
		if !c.All {
			var err error
			if re, err = regexp.Compile(c.Pattern); err != nil {
				return Result{Err: invalidf("pattern %q: %v", c.Pattern, err)}, true
			}
		}
		var res Result
		for k, i := range st.objects {
			kt, key := base.SplitTenantKey(k)
			if kt != t || (re != nil && !re.MatchString(key)) {
				continue
			}
			if st.recs.at(i).nreps() > 0 {
				res.Removed++
			}
			res.Gone = append(res.Gone, st.object(k, st.recs.at(i)))
			st.emitRemoved(KVRemoved, k, st.recs.at(i))
			st.removeAt(k, i)
		}
		return res, true
	}
	return Result{}, false
}

// setTenant stores r for t, or drops the record when it says nothing.
func (st *state) setTenant(t string, r tenantRec) {
	if r == (tenantRec{}) {
		delete(st.tenants, t)
		return
	}
	if st.tenants == nil {
		st.tenants = make(map[string]tenantRec)
	}
	st.tenants[t] = r
}

// countTenant adds sign × one object of size bytes to the tenant of key.
func (st *state) countTenant(key string, size, sign int64) {
	t := base.TenantOf(key)
	r := st.tenants[t]
	r.objects += sign
	r.bytes += sign * size
	st.setTenant(t, r)
}

// clearTenantUsage zeroes every tenant's usage (RemoveAll), keeping the quotas.
func (st *state) clearTenantUsage() {
	for t, r := range st.tenants {
		r.objects, r.bytes = 0, 0
		st.setTenant(t, r)
	}
}

// checkTenantQuota fails a put of size bytes at key that would take its tenant over its DRAM
// quota; oldSize is the size of the object it replaces (0 for none).
func (st *state) checkTenantQuota(key string, size, oldSize int64) error {
	t := base.TenantOf(key)
	q, inherited := st.quotaOf(t)
	if q.dram == 0 {
		return nil
	}
	r := st.tenants[t]
	if after := r.bytes - oldSize + size; after > q.dram {
		which := "its quota"
		if inherited {
			which = "the default quota"
		}
		return fmt.Errorf("raftmeta: put %q: tenant %q holds %d bytes, %d more is over %s of %d: %w",
			key, t, r.bytes, size-oldSize, which, q.dram, base.ErrQuotaExceeded)
	}
	return nil
}

// TenantUsage is one tenant's quota and usage as the FSM keeps them.
type TenantUsage struct {
	Tenant string
	// DRAMQuota and NVMeQuota are the tenant's effective quota (0: no limit): its own, or the
	// default quota when it has none (then DefaultQuota is true).
	DRAMQuota    int64
	NVMeQuota    int64
	DefaultQuota bool
	Objects      int64
	Bytes        int64 // logical bytes: one replica's worth
}

// usageOf returns tenant t's TenantUsage. REQUIRES: the FSM's mu (read).
func (st *state) usageOf(t string) TenantUsage {
	r := st.tenants[t]
	q, inherited := st.quotaOf(t)
	return TenantUsage{Tenant: t, DRAMQuota: q.dram, NVMeQuota: q.nvme, DefaultQuota: inherited, Objects: r.objects, Bytes: r.bytes}
}

// Tenants returns every tenant with a quota of its own or an object, by name.
func (n *Node) Tenants() []TenantUsage {
	n.fsm.mu.RLock()
	defer n.fsm.mu.RUnlock()
	st := n.fsm.st
	out := make([]TenantUsage, 0, len(st.tenants))
	for _, t := range slices.Sorted(maps.Keys(st.tenants)) {
		out = append(out, st.usageOf(t))
	}
	return out
}

// Tenant returns one tenant's quota and usage (for a tenant with neither, no usage and the
// default quota).
func (n *Node) Tenant(t string) TenantUsage {
	t = base.NormalizeTenant(t)
	n.fsm.mu.RLock()
	defer n.fsm.mu.RUnlock()
	return n.fsm.st.usageOf(t)
}

// DefaultTenantQuota returns the default quota, in bytes of DRAM and of NVMe (0: no limit),
// and whether it was ever set (a set that removed it included).
func (n *Node) DefaultTenantQuota() (dram, nvme int64, set bool) {
	n.fsm.mu.RLock()
	defer n.fsm.mu.RUnlock()
	q := n.fsm.st.tenantDefault
	return q.dram, q.nvme, n.fsm.st.tenantDefaultSet
}

// Snapshot section "tenants" (trailing, written only when some tenant has a quota or the
// default quota was ever set, so snapshots of clusters without quotas stay identical to older
// ones; usage is recomputed from the objects):
//
//	sectionTenants byte | version byte (1, or 2 once the default quota was set)
//	[version 2: default dram quota varint | default nvme quota varint (both 0: removed)]
//	n uvarint | n x { tenant string | dram quota varint | nvme quota varint }
//
// Version 1 is written while the default was never set, so such snapshots are what they were.
const (
	sectionTenants               = 50
	sectionTenantsVersion        = 1
	sectionTenantsVersionDefault = 2
)

func appendTenantsSection(b []byte, st *state) []byte {
	var quoted []string
	for t, r := range st.tenants {
		if r.hasOwnQuota() {
			quoted = append(quoted, t)
		}
	}
	def := st.tenantDefault
	if len(quoted) == 0 && !st.tenantDefaultSet {
		return b
	}
	slices.Sort(quoted)
	if !st.tenantDefaultSet {
		b = append(b, sectionTenants, sectionTenantsVersion)
	} else {
		b = append(b, sectionTenants, sectionTenantsVersionDefault)
		b = binary.AppendVarint(b, def.dram)
		b = binary.AppendVarint(b, def.nvme)
	}
	b = binary.AppendUvarint(b, uint64(len(quoted)))
	for _, t := range quoted {
		r := st.tenants[t]
		b = appendStr(b, t)
		b = binary.AppendVarint(b, r.dramQuota)
		b = binary.AppendVarint(b, r.nvmeQuota)
	}
	return b
}

// maxTenants bounds the quotas a snapshot section may list (a decoder bound, not a policy).
const maxTenants = 1 << 20

func readTenantsSection(d *snapReader, st *state) {
	v := d.byte1()
	if d.err == nil && v != sectionTenantsVersion && v != sectionTenantsVersionDefault {
		d.fail("unknown tenants section version %d", v)
		return
	}
	if v == sectionTenantsVersionDefault {
		def := tenantQuota{d.varint(), d.varint()}
		if d.err == nil && (def.dram < 0 || def.nvme < 0 || st.tenantDefaultSet) {
			d.fail("bad or repeated default tenant quota %d/%d", def.dram, def.nvme)
			return
		}
		st.tenantDefault, st.tenantDefaultSet = def, true
	}
	n := d.uvarint()
	if d.err == nil && n > maxTenants {
		d.fail("%d tenant quotas", n)
	}
	for i := uint64(0); i < n && d.err == nil; i++ {
		t := d.str(base.MaxTenantLen)
		dram, nvme := d.varint(), d.varint()
		if d.err != nil {
			return
		}
		r := st.tenants[t]
		if err := base.ValidateTenant(t); err != nil || dram < 0 || nvme < 0 || (dram == 0 && nvme == 0) || r.dramQuota != 0 || r.nvmeQuota != 0 {
			d.fail("bad or repeated quota of tenant %q", t)
			return
		}
		r.dramQuota, r.nvmeQuota = dram, nvme
		st.setTenant(t, r)
	}
}
