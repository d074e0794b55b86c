package base

import (
	"fmt"
	"strings"
)

// Tenants are namespaces of keys (docs/protocol.md, "Tenants"). A client names its tenant once,
// at setup; every key it sends is stored as TenantKey(tenant, key). The default tenant's keys
// are stored unchanged, so the wire, the raft log and the nvme index of a cluster that never
// names a tenant are what they were before tenants existed. Another tenant's keys are stored as
//
//	| 0x00 | tenant id (1 to MaxTenantLen bytes of [A-Za-z0-9._-]) | 0x00 | key |
//
// A stored key that starts with 0x00 therefore always belongs to a named tenant, and the
// default tenant may not use keys that start with 0x00 (ValidateTenantKey refuses them).

// DefaultTenant is Mooncake's tenant id of clients that name none.
const DefaultTenant = "default"

// DefaultQuotaTenant names the default quota where a tenant id is expected (Mooncake's
// pseudo-tenant of GET/PUT /tenants/quota/_default): the quota of every tenant without its
// own. It is not a tenant: setting its quota sets the default (ValidateQuotaTenant).
const DefaultQuotaTenant = "_default"

// MaxTenantLen bounds a tenant id.
const MaxTenantLen = 128

// tenantMark opens (and closes) the tenant id of a stored key outside the default tenant.
const tenantMark = '\x00'

// NormalizeTenant returns the tenant id clients use for t: "" is DefaultTenant.
func NormalizeTenant(t string) string {
	if t == "" {
		return DefaultTenant
	}
	return t
}

// ValidateTenant reports whether t can name a tenant: "" (the default), or 1 to MaxTenantLen
// bytes of [A-Za-z0-9._-]. Use errors.Is(err, ErrInvalidParams) to check for its error.
func ValidateTenant(t string) error {
	if len(t) > MaxTenantLen {
		return fmt.Errorf("%w: tenant id is %d bytes, the limit is %d", ErrInvalidParams, len(t), MaxTenantLen)
	}
	for i := 0; i < len(t); i++ {
		c := t[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-') {
			return fmt.Errorf("%w: tenant id %q: only letters, digits, '.', '_' and '-' are allowed", ErrInvalidParams, t)
		}
	}
	return nil
}

// ValidateQuotaTenant reports whether t can be given a quota of its own: ValidateTenant, and
// not starting with '_', which Mooncake reserves for pseudo-tenants (DefaultQuotaTenant).
// Such ids stay legal for keys (older clusters may hold objects in one). Use
// errors.Is(err, ErrInvalidParams) to check for its error.
func ValidateQuotaTenant(t string) error {
	if err := ValidateTenant(t); err != nil {
		return err
	}
	if strings.HasPrefix(t, "_") {
		return fmt.Errorf("%w: tenant_id %q: ids starting with '_' are reserved (%s names the default quota of tenants without their own)",
			ErrInvalidParams, t, DefaultQuotaTenant)
	}
	return nil
}

// TenantPrefix returns the prefix of every stored key of tenant t: "" for the default tenant.
// REQUIRES: ValidateTenant(t) == nil.
func TenantPrefix(t string) string {
	if t = NormalizeTenant(t); t == DefaultTenant {
		return ""
	}
	return string(tenantMark) + t + string(tenantMark)
}

// TenantKey returns the stored key of key in tenant t and checks it (ValidateKey, and no
// leading 0x00 in the default tenant). Use errors.Is(err, ErrInvalidKey) to check its error.
// REQUIRES: ValidateTenant(t) == nil.
func TenantKey(t, key string) (string, error) {
	p := TenantPrefix(t)
	if p == "" && len(key) > 0 && key[0] == tenantMark {
		return "", fmt.Errorf("%w: keys of the default tenant may not start with a NUL byte (it marks another tenant's key)", ErrInvalidKey)
	}
	if err := ValidateKey(key); err != nil {
		return "", err
	}
	if len(p)+len(key) > MaxKeyLen {
		return "", fmt.Errorf("%w: key is %d bytes, the limit in tenant %q is %d", ErrInvalidKey, len(key), t, MaxKeyLen-len(p))
	}
	return p + key, nil
}

// SplitTenantKey returns the tenant and the client's key of a stored key. A key that starts
// with 0x00 but has no closing mark (which no client writes) reads as the default tenant's.
func SplitTenantKey(stored string) (tenant, key string) {
	if len(stored) == 0 || stored[0] != tenantMark {
		return DefaultTenant, stored
	}
	end := strings.IndexByte(stored[1:], tenantMark)
	if end <= 0 {
		return DefaultTenant, stored
	}
	return stored[1 : 1+end], stored[2+end:]
}

// TenantOf returns the tenant of a stored key.
func TenantOf(stored string) string {
	t, _ := SplitTenantKey(stored)
	return t
}
