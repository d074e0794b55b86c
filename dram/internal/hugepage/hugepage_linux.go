//go:build linux

package hugepage

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"strconv"
	"strings"
	"unsafe"

	"golang.org/x/sys/unix"
)

// PageSize returns the system's base page size.
func PageSize() int64 { return int64(os.Getpagesize()) }

// MapHugeTLB maps size bytes (a multiple of HugePageSize) with MAP_HUGETLB. Without
// MAP_NORESERVE the kernel reserves every huge page at mmap time, so a shortage is an ENOMEM
// now instead of a SIGBUS on first touch later.
func MapHugeTLB(size int64) (Region, error) {
	if size <= 0 || size%HugePageSize != 0 {
		return Region{}, fmt.Errorf("hugepage: hugetlb size %d is not a positive multiple of %d", size, HugePageSize)
	}
	p, err := unix.MmapPtr(-1, 0, nil, uintptr(size), unix.PROT_READ|unix.PROT_WRITE,
		unix.MAP_PRIVATE|unix.MAP_ANONYMOUS|unix.MAP_HUGETLB)
	if err != nil {
		return Region{}, fmt.Errorf("%w: mmap MAP_HUGETLB of %d bytes (%d huge pages free): %v",
			ErrUnavailable, size, FreeHugePages(), err)
	}
	return Region{Mem: unsafe.Slice((*byte)(p), size), Kind: KindHugeTLB}, nil
}

// MapAnon maps size bytes (a multiple of PageSize()) of ordinary anonymous memory. With thp
// it also asks for transparent huge pages: the mapping is then placed on a 2 MiB boundary
// (THP only backs aligned 2 MiB ranges) and madvised MADV_HUGEPAGE. When THP is disabled
// system-wide or the madvise fails, the region is still returned, as KindPlain.
func MapAnon(size int64, thp bool) (Region, error) {
	if size <= 0 || size%PageSize() != 0 {
		return Region{}, fmt.Errorf("hugepage: size %d is not a positive multiple of the page size %d", size, PageSize())
	}
	prot := unix.PROT_READ | unix.PROT_WRITE
	flags := unix.MAP_PRIVATE | unix.MAP_ANONYMOUS
	if !thp || !THPEnabled() || size < HugePageSize {
		p, err := unix.MmapPtr(-1, 0, nil, uintptr(size), prot, flags)
		if err != nil {
			return Region{}, fmt.Errorf("hugepage: mmap of %d bytes: %w", size, err)
		}
		return Region{Mem: unsafe.Slice((*byte)(p), size), Kind: KindPlain}, nil
	}
	// Over-map by one huge page, then trim both ends to a 2 MiB-aligned window. The Ptr
	// variants are used because unix.Munmap only unmaps whole mappings made by unix.Mmap.
	full := uintptr(size + HugePageSize)
	base, err := unix.MmapPtr(-1, 0, nil, full, prot, flags)
	if err != nil {
		return Region{}, fmt.Errorf("hugepage: mmap of %d bytes: %w", full, err)
	}
	head := HugePageSize - uintptr(base)%HugePageSize
	if head == HugePageSize {
		head = 0
	}
	start := unsafe.Add(base, head)
	if head > 0 {
		if err := unix.MunmapPtr(base, head); err != nil {
			return Region{}, fmt.Errorf("hugepage: trimming head: %w", err)
		}
	}
	if tail := full - head - uintptr(size); tail > 0 {
		if err := unix.MunmapPtr(unsafe.Add(start, size), tail); err != nil {
			return Region{}, fmt.Errorf("hugepage: trimming tail: %w", err)
		}
	}
	mem := unsafe.Slice((*byte)(start), size)
	kind := KindTHP
	if err := unix.Madvise(mem, unix.MADV_HUGEPAGE); err != nil {
		kind = KindPlain
	}
	return Region{Mem: mem, Kind: kind}, nil
}

// Unmap releases a region returned by MapHugeTLB or MapAnon. The region must not be used
// afterwards: any access faults.
func Unmap(r Region) error {
	if len(r.Mem) == 0 {
		return nil
	}
	if err := unix.MunmapPtr(unsafe.Pointer(unsafe.SliceData(r.Mem)), uintptr(len(r.Mem))); err != nil {
		return fmt.Errorf("hugepage: munmap of %d bytes: %w", len(r.Mem), err)
	}
	return nil
}

// THPEnabled reports whether transparent huge pages can back a MADV_HUGEPAGE mapping:
// /sys/kernel/mm/transparent_hugepage/enabled is [always] or [madvise].
func THPEnabled() bool {
	b, err := os.ReadFile("/sys/kernel/mm/transparent_hugepage/enabled")
	if err != nil {
		return false
	}
	return bytes.Contains(b, []byte("[always]")) || bytes.Contains(b, []byte("[madvise]"))
}

// FreeHugePages returns HugePages_Free of /proc/meminfo (huge pages of the default size that
// are reserved and not yet used), or 0 when unknown.
func FreeHugePages() int64 {
	return meminfo("HugePages_Free:")
}

// TotalHugePages returns HugePages_Total of /proc/meminfo, or 0 when unknown.
func TotalHugePages() int64 {
	return meminfo("HugePages_Total:")
}

func meminfo(field string) int64 {
	f, err := os.Open("/proc/meminfo")
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		if rest, ok := strings.CutPrefix(line, field); ok {
			v, err := strconv.ParseInt(strings.Fields(rest)[0], 10, 64)
			if err != nil {
				return 0
			}
			return v
		}
	}
	return 0
}

// ResidencyOf reads /proc/self/smaps and sums, over the mappings inside mem, the resident
// bytes and the bytes backed by huge pages (AnonHugePages, and Private_/Shared_Hugetlb). It
// reads a file the size of the process's mapping list: call it for diagnostics and
// metrics, not on a hot path.
func ResidencyOf(mem []byte) (Residency, error) {
	if len(mem) == 0 {
		return Residency{}, nil
	}
	lo := uint64(uintptr(unsafe.Pointer(unsafe.SliceData(mem))))
	hi := lo + uint64(len(mem))
	f, err := os.Open("/proc/self/smaps")
	if err != nil {
		return Residency{}, fmt.Errorf("hugepage: %w", err)
	}
	defer f.Close()
	var r Residency
	inside := false
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		fields := strings.Fields(line)
		if len(fields) == 0 {
			continue
		}
		if start, end, ok := parseRange(fields[0]); ok {
			// A mapping header: "start-end perms offset dev inode [path]".
			inside = start >= lo && end <= hi
			continue
		}
		if !inside || len(fields) < 2 {
			continue
		}
		kb, err := strconv.ParseInt(fields[1], 10, 64)
		if err != nil {
			continue
		}
		switch fields[0] {
		case "Rss:":
			r.Resident += kb << 10
		case "AnonHugePages:":
			r.HugePages += kb << 10
		case "Private_Hugetlb:", "Shared_Hugetlb:":
			// hugetlb pages are not counted in Rss.
			r.Resident += kb << 10
			r.HugePages += kb << 10
		}
	}
	if err := sc.Err(); err != nil {
		return Residency{}, fmt.Errorf("hugepage: reading smaps: %w", err)
	}
	return r, nil
}

// parseRange parses the "start-end" hex address range of an smaps header line.
func parseRange(s string) (start, end uint64, ok bool) {
	a, b, found := strings.Cut(s, "-")
	if !found {
		return 0, 0, false
	}
	start, err1 := strconv.ParseUint(a, 16, 64)
	end, err2 := strconv.ParseUint(b, 16, 64)
	return start, end, err1 == nil && err2 == nil
}
