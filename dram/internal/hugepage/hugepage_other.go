//go:build !linux

package hugepage

import (
	"fmt"
	"os"
)

// PageSize returns the system's base page size.
func PageSize() int64 { return int64(os.Getpagesize()) }

// MapHugeTLB is unavailable outside Linux.
func MapHugeTLB(size int64) (Region, error) {
	return Region{}, fmt.Errorf("%w: MAP_HUGETLB is Linux-only", ErrUnavailable)
}

// MapAnon returns size bytes from the Go heap outside Linux: the fallback that lets the
// module build and test anywhere. The bytes are not off-heap and never huge-page backed.
func MapAnon(size int64, thp bool) (Region, error) {
	if size <= 0 || size%PageSize() != 0 {
		return Region{}, fmt.Errorf("hugepage: size %d is not a positive multiple of the page size %d", size, PageSize())
	}
	return Region{Mem: make([]byte, size), Kind: KindPlain, FD: -1}, nil
}

// MapShared is unavailable outside Linux: memfd_create is Linux-only.
func MapShared(size int64, hugetlb bool) (Region, error) {
	return Region{}, fmt.Errorf("%w: memfd_create is Linux-only", ErrUnavailable)
}

// MapSharedPlain is unavailable outside Linux: memfd_create is Linux-only.
func MapSharedPlain(size int64) (Region, error) {
	return Region{}, fmt.Errorf("%w: memfd_create is Linux-only", ErrUnavailable)
}

// FileID is unavailable outside Linux (no shared regions).
func FileID(fd int) (ino, dev uint64, err error) {
	return 0, 0, fmt.Errorf("%w: no shared regions outside Linux", ErrUnavailable)
}

// ShmemTHPEnabled is false outside Linux.
func ShmemTHPEnabled() bool { return false }

// Unmap drops the region; the GC reclaims it.
func Unmap(r Region) error { return nil }

// THPEnabled is false outside Linux.
func THPEnabled() bool { return false }

// FreeHugePages is 0 outside Linux.
func FreeHugePages() int64 { return 0 }

// ResidencyOf is not supported outside Linux.
func ResidencyOf(mem []byte) (Residency, error) {
	return Residency{}, fmt.Errorf("%w: residency is read from /proc/self/smaps (Linux-only)", ErrUnavailable)
}

// Populate touches every page of mem (a Go heap slice outside Linux).
func Populate(mem []byte) error {
	Touch(mem)
	return nil
}
