package lifecycle

import (
	"fmt"

	"github.com/mooncake-go/mooncake/internal/base"
)

// Tenant admission (issue 21 item 1). The FSM enforces a tenant's quota when a PutEnd is
// applied, so nothing over quota is ever committed; this is the early refusal at PutStart, so
// a put that cannot commit is refused before its bytes move. It counts what the FSM does not
// know yet: the tenant's puts in flight. An upsert is counted at its full size here (the object
// it replaces is still committed), so admission may refuse an upsert the FSM would take.

// TenantQuota is what the driver knows of one tenant when it places a put: its quota (from
// the FSM, replicated) and the bytes of its committed objects.
type TenantQuota struct {
	// DRAMBytes is the most bytes the tenant may hold; 0 means no limit.
	DRAMBytes int64
	// Used is the bytes of the tenant's committed objects (raftmeta.TenantUsage.Bytes).
	Used int64
}

// admitTenant applies rule 4 of PlacePut.
func (m *Machine) admitTenant(key string, size int64, q TenantQuota) error {
	if q.DRAMBytes == 0 {
		return nil
	}
	t := base.TenantOf(key)
	inFlight := m.tenantResv[t]
	if q.Used+inFlight+size > q.DRAMBytes {
		return fmt.Errorf("%w: tenant %q holds %s and has %s in flight: %s more is over its quota of %s",
			base.ErrQuotaExceeded, t, base.Bytes(q.Used), base.Bytes(inFlight), base.Bytes(size), base.Bytes(q.DRAMBytes))
	}
	return nil
}

// reserveTenant adds n bytes in flight to the tenant of key.
func (m *Machine) reserveTenant(key string, n int64) {
	t := base.TenantOf(key)
	if v := m.tenantResv[t] + n; v != 0 {
		m.tenantResv[t] = v
	} else {
		delete(m.tenantResv, t)
	}
}

// TenantInFlight returns the bytes of tenant t's puts in flight.
func (m *Machine) TenantInFlight(t string) int64 { return m.tenantResv[base.NormalizeTenant(t)] }
