package hugepage

import (
	"errors"
	"sync/atomic"
	"unsafe"
)

// Kind is the kind of pages behind a mapping.
type Kind uint8

const (
	// KindPlain is ordinary pages of the system page size.
	KindPlain Kind = iota
	// KindTHP is a mapping (anonymous, or a shared memfd) advised with MADV_HUGEPAGE: the
	// kernel backs it with 2 MiB pages when it can (khugepaged or at fault time), with base
	// pages otherwise.
	KindTHP
	// KindHugeTLB is a MAP_HUGETLB mapping or a mapping of an MFD_HUGETLB memfd: 2 MiB pages
	// from the reserved pool (/proc/sys/vm/nr_hugepages), reserved for the whole mapping when
	// it is made.
	KindHugeTLB
)

// HugePageSize is the huge page size used for hugetlb and THP mappings: the default 2 MiB
// size of x86-64 and most arm64 kernels.
const HugePageSize = 2 << 20

// ErrUnavailable marks a request for a kind of pages the system cannot give now (no huge
// pages reserved, THP disabled). Use errors.Is(err, ErrUnavailable).
var ErrUnavailable = errors.New("hugepage: unavailable")

// Region is one mapping. Mem is its whole length; it must be released with Unmap.
type Region struct {
	Mem  []byte
	Kind Kind
	// FD is the memfd behind a MapShared region, owned by the Region (Unmap closes it), and
	// -1 for anonymous mappings. NB: the zero Region has FD 0; only regions returned by this
	// package have a meaningful FD, and Unmap ignores the zero Region.
	FD int
}

// RoundUp rounds size up to a multiple of page (a power of two). It returns -1 on overflow.
func RoundUp(size, page int64) int64 {
	r := (size + page - 1) &^ (page - 1)
	if r < size {
		return -1
	}
	return r
}

// Residency is how much of a region the kernel has backed with memory, from
// /proc/self/smaps: Resident counts every backed byte, HugePages those backed by 2 MiB
// pages (transparent or hugetlb).
type Residency struct {
	Resident  int64
	HugePages int64
}

// Touch faults in every page of mem for writing by adding zero to one aligned word of each
// page atomically: a write fault that changes no byte, even if another goroutine is writing
// the same word (a plain store of zero could overwrite a put's byte). mem must start on a
// page boundary, as every mapping here does. Out of memory it takes the process down (a page
// fault cannot fail softly): Populate tries MADV_POPULATE_WRITE first for that reason.
func Touch(mem []byte) {
	page := PageSize()
	for off := int64(0); off+4 <= int64(len(mem)); off += page {
		atomic.AddUint32((*uint32)(unsafe.Pointer(&mem[off])), 0)
	}
}
