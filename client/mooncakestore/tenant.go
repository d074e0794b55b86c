package mooncakestore

import (
	"fmt"

	"github.com/mooncake-go/mooncake/internal/base"
)

// SetTenantID sets the tenant of the next Setup (Mooncake's setup option tenant_id): every key
// of the store is then in that tenant's namespace, and its puts count against the tenant's
// quota (client.Config.TenantID). "" or "default" is the default tenant. It must be called
// before Setup.
func (s *Store) SetTenantID(t string) error {
	if err := base.ValidateTenant(t); err != nil {
		return wrap(ErrSetupFailed, err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.c != nil || s.closed {
		return wrap(ErrSetupFailed, fmt.Errorf("%w: SetTenantID after Setup or Close", base.ErrInvalidParams))
	}
	s.tenant = t
	return nil
}
