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

func (a *SharedArena) unmap() {}

// NewShmGenTable is not supported off Linux.
func NewShmGenTable() (*ShmGenTable, error) {
	return nil, fmt.Errorf("%w: shared memory needs Linux", base.ErrNotSupported)
}

// Close does nothing off Linux (no table is ever made).
func (t *ShmGenTable) Close() error { return nil }
