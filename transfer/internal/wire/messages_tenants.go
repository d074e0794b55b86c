package wire

import (
	"fmt"

	"github.com/mooncake-go/mooncake/internal/base"
)

// Tenants (issue 21 item 1; opcodes 130-139). A tenant is a namespace of keys: a client of
// tenant t sends every key as base.TenantKey(t, key), so the key-carrying calls need no new
// field, and the default tenant's keys are sent as they always were. What cannot be said with
// a key is said here: removal scoped to one tenant, and the tenants' quotas and usage. See
// docs/protocol.md, "Tenants".

// MaxTenants bounds the items of one TenantListResponse.
const MaxTenants = 1 << 16

// TenantRemoveRequest (op 130) removes the objects of one tenant: every one with All, else
// those whose key (without the tenant prefix) the RE2 Pattern matches. The response is a
// CountResponse. RemoveByRegex and RemoveAll are this call for the default tenant.
type TenantRemoveRequest struct {
	Tenant  string
	Pattern string
	All     bool
}

func (m *TenantRemoveRequest) Op() Op { return OpTenantRemove }
func (m *TenantRemoveRequest) Encode(e *Encoder) {
	e.Str(m.Tenant)
	e.Str(m.Pattern)
	e.Bool(m.All)
}
func (m *TenantRemoveRequest) Decode(d *Decoder) {
	m.Tenant = d.Str(base.MaxTenantLen, "tenant")
	m.Pattern = d.Str(MaxPatternLen, "pattern")
	m.All = d.Bool()
}

// TenantQuota is one tenant's quota and usage (TenantListResponse), or the quota to set
// (TenantQuotaSetRequest, whose usage fields are ignored). A quota of 0 means no limit.
type TenantQuota struct {
	Tenant    string
	DRAMBytes int64
	NVMeBytes int64
	Objects   int64
	Bytes     int64
}

func (q *TenantQuota) encode(e *Encoder) {
	e.Str(q.Tenant)
	e.I64(q.DRAMBytes)
	e.I64(q.NVMeBytes)
	e.I64(q.Objects)
	e.I64(q.Bytes)
}

func (q *TenantQuota) decode(d *Decoder) {
	q.Tenant = d.Str(base.MaxTenantLen, "tenant")
	q.DRAMBytes = d.I64()
	q.NVMeBytes = d.I64()
	q.Objects = d.I64()
	q.Bytes = d.I64()
}

// TenantQuotaSetRequest (op 131) sets a tenant's quota: one raft commit. The response is
// Empty. Safe to resend: setting the same quota twice is setting it once.
type TenantQuotaSetRequest struct{ Quota TenantQuota }

func (m *TenantQuotaSetRequest) Op() Op            { return OpTenantQuotaSet }
func (m *TenantQuotaSetRequest) Encode(e *Encoder) { m.Quota.encode(e) }
func (m *TenantQuotaSetRequest) Decode(d *Decoder) { m.Quota.decode(d) }

// TenantListResponse (op 132; the request is Empty) lists every tenant with a quota or an
// object, by name, and the DRAM and NVMe capacity of the active workers (a worker's share of
// a tenant's DRAM quota is the quota times its DRAM over DRAMCapacity, of its NVMe quota the
// quota times its NVMe over NVMeCapacity: server/worker worker_tenants.go). NVMeCapacity is a
// trailing optional field, present only when > 0.
type TenantListResponse struct {
	DRAMCapacity int64
	Items        []TenantQuota
	NVMeCapacity int64
}

func (m *TenantListResponse) Op() Op { return OpTenantList }
func (m *TenantListResponse) Encode(e *Encoder) {
	e.I64(m.DRAMCapacity)
	e.Count(len(m.Items))
	for i := range m.Items {
		m.Items[i].encode(e)
	}
	if m.NVMeCapacity > 0 {
		e.I64(m.NVMeCapacity)
	}
}
func (m *TenantListResponse) Decode(d *Decoder) {
	m.DRAMCapacity = d.I64()
	// A tenant is at least its name's length (4) and four 8-byte numbers.
	n := d.Count(36, MaxTenants, "tenants")
	m.Items = make([]TenantQuota, n)
	for i := range m.Items {
		m.Items[i].decode(d)
	}
	if d.Err() == nil && d.Remaining() > 0 {
		if m.NVMeCapacity = d.I64(); d.Err() == nil && m.NVMeCapacity <= 0 {
			d.Fail(fmt.Errorf("%w: NVMe capacity %d (leave the field out)", base.ErrInvalidParams, m.NVMeCapacity))
		}
	}
}

// newTenantRequest returns an empty request of a tenants op (nil for another op).
func newTenantRequest(op Op) Message {
	switch op {
	case OpTenantRemove:
		return new(TenantRemoveRequest)
	case OpTenantQuotaSet:
		return new(TenantQuotaSetRequest)
	case OpTenantList:
		return NewEmpty(op)
	}
	return nil
}

// newTenantResponse returns an empty response of a tenants op (nil for another op).
func newTenantResponse(op Op) Message {
	switch op {
	case OpTenantRemove:
		return NewCountResponse(op, 0)
	case OpTenantQuotaSet:
		return NewEmpty(op)
	case OpTenantList:
		return new(TenantListResponse)
	}
	return nil
}
