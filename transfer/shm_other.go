//go:build !linux

package transfer

import (
	"fmt"

	"github.com/mooncake-go/mooncake/internal/base"
)

// BootID returns "" off Linux: nothing is shared.
func BootID() string { return "" }

// MapSharedArena is not supported off Linux.
func MapSharedArena(*ShmOpenResponse) (*SharedArena, error) {
	return nil, fmt.Errorf("%w: shared memory needs Linux", base.ErrNotSupported)
}

// NewStagingArea is not supported off Linux.
func NewStagingArea(int64) (*StagingArea, error) {
	return nil, fmt.Errorf("%w: shared memory needs Linux", base.ErrNotSupported)
}

// MapStagingArea is not supported off Linux.
func MapStagingArea(*ShmPutOpenResponse) (*StagingArea, error) {
	return nil, fmt.Errorf("%w: shared memory needs Linux", base.ErrNotSupported)
}

func (a *mapping) unmap() {}

// NewShmGenTable is not supported off Linux.
func NewShmGenTable() (*ShmGenTable, error) {
	return nil, fmt.Errorf("%w: shared memory needs Linux", base.ErrNotSupported)
}
