package transfer

import "github.com/mooncake-go/mooncake/transfer/internal/wire"

// Tenants (docs/protocol.md, "Tenants"): removal scoped to one tenant, tenant quotas and usage.
type (
	TenantRemoveRequest   = wire.TenantRemoveRequest
	TenantQuota           = wire.TenantQuota
	TenantQuotaSetRequest = wire.TenantQuotaSetRequest
	TenantListResponse    = wire.TenantListResponse
)

// The opcodes of the tenant calls.
const (
	OpTenantRemove   = wire.OpTenantRemove
	OpTenantQuotaSet = wire.OpTenantQuotaSet
	OpTenantList     = wire.OpTenantList
)
