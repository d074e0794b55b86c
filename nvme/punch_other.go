//go:build !linux

package nvme

import (
	"fmt"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/mooncake-go/mooncake/internal/base"
)

// punchHole: hole punching is only used on Linux; elsewhere GC copies live records.
func punchHole(vfs.File, int64, int64) error {
	return fmt.Errorf("nvme: punch hole: %w", base.ErrNotSupported)
}
