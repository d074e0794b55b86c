package lifecycle

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/mooncake-go/mooncake/internal/base"
)

// formatTenantsInFlight lists the bytes in flight of the named tenants (the default tenant's
// are the workers' reserved bytes already shown).
func formatTenantsInFlight(m *Machine) string {
	var b strings.Builder
	for _, t := range slices.Sorted(maps.Keys(m.tenantResv)) {
		if t != base.DefaultTenant {
			fmt.Fprintf(&b, "tenant %s in_flight=%d\n", t, m.TenantInFlight(t))
		}
	}
	return b.String()
}
