package base

import (
	"fmt"
	"strings"
)

// MaxKVSessionIDLen bounds a KV session id (Mooncake's kv_session: nonempty, at most 4096
// bytes, no NUL byte).
const MaxKVSessionIDLen = 4096

// MaxStoredKVSessionIDLen bounds a stored KV session id: a client's id with its tenant's
// prefix (TenantKVSessionID).
const MaxStoredKVSessionIDLen = MaxKVSessionIDLen + MaxTenantLen + 2

// ValidateKVSessionID checks a client's KV session id as Mooncake does; errors wrap
// ErrInvalidParams.
func ValidateKVSessionID(id string) error {
	if id == "" || len(id) > MaxKVSessionIDLen || strings.IndexByte(id, 0) >= 0 {
		return fmt.Errorf("%w: KV session id of %d bytes: want 1 to %d bytes without NUL", ErrInvalidParams, len(id), MaxKVSessionIDLen)
	}
	return nil
}

// TenantKVSessionID returns the stored id of session id in tenant t: KV sessions are per
// tenant, and their ids are namespaced as keys are (TenantPrefix; docs/protocol.md,
// "Tenants"), so the default tenant's stored ids are its ids. Errors wrap ErrInvalidParams.
// REQUIRES: ValidateTenant(t) == nil.
func TenantKVSessionID(t, id string) (string, error) {
	if err := ValidateKVSessionID(id); err != nil {
		return "", err
	}
	return TenantPrefix(t) + id, nil
}

// ValidateStoredKVSessionID checks a stored KV session id (what masters and the raft log
// hold): a client's id, optionally behind a tenant's prefix. Errors wrap ErrInvalidParams.
func ValidateStoredKVSessionID(stored string) error {
	t, id := SplitTenantKey(stored)
	if t != DefaultTenant || len(id) != len(stored) {
		if err := ValidateTenant(t); err != nil || t == DefaultTenant {
			return fmt.Errorf("%w: KV session id of %d bytes has a bad tenant prefix", ErrInvalidParams, len(stored))
		}
	}
	return ValidateKVSessionID(id)
}
