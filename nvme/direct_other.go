//go:build !linux

package nvme

import (
	"fmt"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/mooncake-go/mooncake/internal/base"
)

// setDirect: O_DIRECT is only used on Linux; elsewhere extents are written buffered.
func setDirect(vfs.File) error { return fmt.Errorf("nvme: O_DIRECT: %w", base.ErrNotSupported) }
