//go:build linux

package hugepage

import (
	"bufio"
	"bytes"
	"errors"
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
	return Region{Mem: unsafe.Slice((*byte)(p), size), Kind: KindHugeTLB, FD: -1}, nil
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
		return Region{Mem: unsafe.Slice((*byte)(p), size), Kind: KindPlain, FD: -1}, nil
	}
	mem, err := mapAligned(-1, size, flags)
	if err != nil {
		return Region{}, err
	}
	kind := KindTHP
	if err := unix.Madvise(mem, unix.MADV_HUGEPAGE); err != nil {
		kind = KindPlain
	}
	return Region{Mem: mem, Kind: kind, FD: -1}, nil
}

// mapAligned maps size bytes of fd (or anonymous memory when fd is -1) read-write with
// flags, at an address that is a multiple of HugePageSize: THP only backs aligned 2 MiB
// ranges. It reserves size + 2 MiB of address space (PROT_NONE, no memory), maps the real
// mapping with MAP_FIXED over the aligned window inside it, and unmaps both ends. MAP_FIXED
// is safe here because the window belongs to our own reservation. The Ptr variants are used
// because unix.Munmap only unmaps whole mappings made by unix.Mmap.
func mapAligned(fd int, size int64, flags int) ([]byte, error) {
	full := uintptr(size + HugePageSize)
	base, err := unix.MmapPtr(-1, 0, nil, full, unix.PROT_NONE,
		unix.MAP_PRIVATE|unix.MAP_ANONYMOUS|unix.MAP_NORESERVE)
	if err != nil {
		return nil, fmt.Errorf("hugepage: reserving %d bytes of address space: %w", full, err)
	}
	head := (HugePageSize - uintptr(base)%HugePageSize) % HugePageSize
	start := unsafe.Add(base, head)
	p, err := unix.MmapPtr(fd, 0, start, uintptr(size), unix.PROT_READ|unix.PROT_WRITE, flags|unix.MAP_FIXED)
	if err != nil {
		_ = unix.MunmapPtr(base, full)
		return nil, fmt.Errorf("hugepage: mmap of %d bytes: %w", size, err)
	}
	if p != start {
		// MAP_FIXED either maps at start or fails; anything else is a kernel contract breach.
		_ = unix.MunmapPtr(base, full)
		return nil, fmt.Errorf("hugepage: MAP_FIXED mapped at %p, asked %p", p, start)
	}
	if head > 0 {
		if err := unix.MunmapPtr(base, head); err != nil {
			_ = unix.MunmapPtr(start, full-head)
			return nil, fmt.Errorf("hugepage: trimming head: %w", err)
		}
	}
	if tail := full - head - uintptr(size); tail > 0 {
		if err := unix.MunmapPtr(unsafe.Add(start, size), tail); err != nil {
			_ = unix.MunmapPtr(start, full-head)
			return nil, fmt.Errorf("hugepage: trimming tail: %w", err)
		}
	}
	return unsafe.Slice((*byte)(start), size), nil
}

// MapShared maps size bytes of a new memfd ("mooncake-arena") MAP_SHARED, read-write, so
// that another process of the same user can map the same pages through
// /proc/<pid>/fd/<Region.FD>. The Region owns the fd; Unmap closes it.
//
// With hugetlb the memfd is MFD_HUGETLB (a hugetlbfs file of 2 MiB pages from the reserved
// pool) and size must be a multiple of HugePageSize. hugetlbfs reserves the pages of a
// MAP_SHARED mapping in mmap (hugetlb_reserve_pages, as for MAP_HUGETLB without
// MAP_NORESERVE), so a shortage is an error wrapping ErrUnavailable now, never a SIGBUS on
// first touch. Without hugetlb size must be a multiple of PageSize(); the mapping is then
// placed on a 2 MiB boundary and madvised MADV_HUGEPAGE when shmem THP can honour it
// (ShmemTHPEnabled), giving KindTHP, else KindPlain.
//
// The memfd is sealed (F_SEAL_SHRINK|F_SEAL_GROW, and F_SEAL_FUTURE_WRITE where the kernel
// has it, 5.1+): nobody who opens it through /proc can resize it under the mapping (which
// would SIGBUS this process) or, with FUTURE_WRITE, write to it or map it writable; this
// mapping, made before the seal, stays writable.
func MapShared(size int64, hugetlb bool) (Region, error) {
	return mapShared(size, hugetlb, true)
}

// MapSharedPlain is MapShared without huge pages of any kind: a memfd of base pages, never
// madvised (KindPlain).
func MapSharedPlain(size int64) (Region, error) {
	return mapShared(size, false, false)
}

func mapShared(size int64, hugetlb, thp bool) (r Region, err error) {
	page := PageSize()
	if hugetlb {
		page = HugePageSize
	}
	if size <= 0 || size%page != 0 {
		return Region{}, fmt.Errorf("hugepage: shared size %d is not a positive multiple of %d", size, page)
	}
	flags := unix.MFD_CLOEXEC | unix.MFD_ALLOW_SEALING
	if hugetlb {
		flags |= unix.MFD_HUGETLB
	}
	// MFD_NOEXEC_SEAL (6.3+) keeps vm.memfd_noexec=2 systems from refusing the memfd; older
	// kernels reject the flag with EINVAL, so retry without it.
	fd, err := unix.MemfdCreate("mooncake-arena", flags|unix.MFD_NOEXEC_SEAL)
	if errors.Is(err, unix.EINVAL) {
		fd, err = unix.MemfdCreate("mooncake-arena", flags)
	}
	if err != nil {
		if hugetlb {
			return Region{}, fmt.Errorf("%w: memfd_create(MFD_HUGETLB): %v", ErrUnavailable, err)
		}
		return Region{}, fmt.Errorf("hugepage: memfd_create: %w", err)
	}
	defer func() {
		if err != nil {
			_ = unix.Close(fd)
		}
	}()
	if err := unix.Ftruncate(fd, size); err != nil {
		return Region{}, fmt.Errorf("hugepage: ftruncate memfd to %d bytes: %w", size, err)
	}
	kind := KindPlain
	var mem []byte
	switch {
	case hugetlb:
		// No MAP_NORESERVE: the mmap reserves every huge page of the file now.
		p, merr := unix.MmapPtr(fd, 0, nil, uintptr(size), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
		if merr != nil {
			return Region{}, fmt.Errorf("%w: mmap of a %d-byte hugetlb memfd (%d huge pages free): %v",
				ErrUnavailable, size, FreeHugePages(), merr)
		}
		mem, kind = unsafe.Slice((*byte)(p), size), KindHugeTLB
	case thp && ShmemTHPEnabled() && size >= HugePageSize:
		if mem, err = mapAligned(fd, size, unix.MAP_SHARED); err != nil {
			return Region{}, err
		}
		if unix.Madvise(mem, unix.MADV_HUGEPAGE) == nil {
			kind = KindTHP
		}
	default:
		p, merr := unix.MmapPtr(fd, 0, nil, uintptr(size), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
		if merr != nil {
			return Region{}, fmt.Errorf("hugepage: mmap of a %d-byte memfd: %w", size, merr)
		}
		mem = unsafe.Slice((*byte)(p), size)
	}
	if err := seal(fd); err != nil {
		_ = unix.MunmapPtr(unsafe.Pointer(unsafe.SliceData(mem)), uintptr(size))
		return Region{}, err
	}
	return Region{Mem: mem, Kind: kind, FD: fd}, nil
}

// seal forbids resizing fd and, where the kernel supports F_SEAL_FUTURE_WRITE, new writes and
// writable mappings through any fd of the file. It must run after this process's writable
// mapping is made (FUTURE_WRITE refuses later ones).
func seal(fd int) error {
	const base = unix.F_SEAL_SHRINK | unix.F_SEAL_GROW | unix.F_SEAL_SEAL
	_, err := unix.FcntlInt(uintptr(fd), unix.F_ADD_SEALS, base|unix.F_SEAL_FUTURE_WRITE)
	if errors.Is(err, unix.EINVAL) { // before 5.1: no F_SEAL_FUTURE_WRITE
		_, err = unix.FcntlInt(uintptr(fd), unix.F_ADD_SEALS, base)
	}
	if err != nil {
		return fmt.Errorf("hugepage: sealing the memfd: %w", err)
	}
	return nil
}

// FileID returns the inode number and device of fd (fstat st_ino, st_dev): what a process
// that opens /proc/<pid>/fd/<fd> compares to be sure it opened the same file.
func FileID(fd int) (ino, dev uint64, err error) {
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return 0, 0, fmt.Errorf("hugepage: fstat fd %d: %w", fd, err)
	}
	return uint64(st.Ino), uint64(st.Dev), nil
}

// Unmap releases a region returned by MapHugeTLB, MapAnon or MapShared, and closes its fd
// (FD >= 0). The region must not be used afterwards: any access faults. Unmap of the zero
// Region does nothing.
func Unmap(r Region) error {
	if len(r.Mem) == 0 {
		return nil
	}
	var errs []error
	if err := unix.MunmapPtr(unsafe.Pointer(unsafe.SliceData(r.Mem)), uintptr(len(r.Mem))); err != nil {
		errs = append(errs, fmt.Errorf("hugepage: munmap of %d bytes: %w", len(r.Mem), err))
	}
	if r.FD >= 0 {
		// Closing is independent of the munmap: a mapping keeps its file alive on its own.
		if err := unix.Close(r.FD); err != nil {
			errs = append(errs, fmt.Errorf("hugepage: closing memfd %d: %w", r.FD, err))
		}
	}
	return errors.Join(errs...)
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

// ShmemTHPEnabled reports whether transparent huge pages can back a shmem (memfd) mapping
// advised MADV_HUGEPAGE. The per-size control
// /sys/kernel/mm/transparent_hugepage/hugepages-2048kB/shmem_enabled (6.11+) decides when it
// is not [inherit]; otherwise /sys/kernel/mm/transparent_hugepage/shmem_enabled does:
// [always], [within_size], [advise] or [force] can, [never] and [deny] cannot.
func ShmemTHPEnabled() bool {
	const dir = "/sys/kernel/mm/transparent_hugepage/"
	if b, err := os.ReadFile(dir + "hugepages-2048kB/shmem_enabled"); err == nil && !bytes.Contains(b, []byte("[inherit]")) {
		return shmemAllows(b)
	}
	b, err := os.ReadFile(dir + "shmem_enabled")
	return err == nil && shmemAllows(b)
}

func shmemAllows(b []byte) bool {
	for _, v := range []string{"[always]", "[within_size]", "[advise]", "[force]"} {
		if bytes.Contains(b, []byte(v)) {
			return true
		}
	}
	return false
}

// FreeHugePages returns HugePages_Free of /proc/meminfo (huge pages of the default size that
// are reserved and not yet used), or 0 when unknown.
func FreeHugePages() int64 {
	return meminfo("HugePages_Free:")
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
			f := strings.Fields(rest)
			if len(f) == 0 {
				return 0 // a field with no value: unknown, never a panic
			}
			v, err := strconv.ParseInt(f[0], 10, 64)
			if err != nil {
				return 0
			}
			return v
		}
	}
	return 0
}

// ResidencyOf reads /proc/self/smaps and sums, over the mappings inside mem, the resident
// bytes and the bytes backed by huge pages (AnonHugePages, ShmemPmdMapped and FilePmdMapped
// for THP, Private_/Shared_Hugetlb for hugetlb). Rss counts the shmem pages of a memfd
// mapping that this process has mapped (touched through this mapping). It
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
	// The kernel merges an anonymous mapping with an adjacent one of the same flags (the Go
	// heap, another arena), so the arena may be part of a larger VMA whose smaps totals
	// include memory that is not ours. Such a VMA ("straddling") has its resident bytes
	// counted exactly with mincore over the overlap, and its huge-page bytes clamped to
	// the overlap; a VMA wholly inside mem is summed from smaps as it stands.
	var inside, straddling bool
	var overlap int64
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
			straddling = !inside && start < hi && end > lo
			if straddling {
				from, to := max(start, lo), min(end, hi)
				overlap = int64(to - from)
				n, err := mincoreResident(mem[from-lo : to-lo])
				if err != nil {
					return Residency{}, err
				}
				r.Resident += n
			}
			continue
		}
		if (!inside && !straddling) || len(fields) < 2 {
			continue
		}
		kb, err := strconv.ParseInt(fields[1], 10, 64)
		if err != nil {
			continue
		}
		switch fields[0] {
		case "Rss:":
			if inside {
				r.Resident += kb << 10
			}
		case "AnonHugePages:", "ShmemPmdMapped:", "FilePmdMapped:":
			// THP mapped by PMD: anonymous, shmem (memfd) and page-cache file pages; all
			// three are also in Rss.
			r.HugePages += clampTo(kb<<10, inside, overlap)
		case "Private_Hugetlb:", "Shared_Hugetlb:":
			// hugetlb pages are not counted in Rss (nor merged with other mappings, but
			// clamp anyway).
			if inside {
				r.Resident += kb << 10
			}
			r.HugePages += clampTo(kb<<10, inside, overlap)
		}
	}
	if err := sc.Err(); err != nil {
		return Residency{}, fmt.Errorf("hugepage: reading smaps: %w", err)
	}
	return r, nil
}

// clampTo returns n for a VMA wholly inside the range asked about, and at most overlap for
// one that straddles it (its smaps figure covers memory outside the range).
func clampTo(n int64, inside bool, overlap int64) int64 {
	if inside {
		return n
	}
	return min(n, overlap)
}

// mincoreResident counts the resident bytes of mem (page aligned at its start, as every
// mapping here is) with mincore(2): one byte of answer per base page.
func mincoreResident(mem []byte) (int64, error) {
	page := int64(os.Getpagesize())
	vec := make([]byte, (int64(len(mem))+page-1)/page)
	// x/sys/unix has no Mincore wrapper on Linux; the raw call is three words.
	_, _, errno := unix.Syscall(unix.SYS_MINCORE, uintptr(unsafe.Pointer(unsafe.SliceData(mem))),
		uintptr(len(mem)), uintptr(unsafe.Pointer(unsafe.SliceData(vec))))
	if errno != 0 {
		return 0, fmt.Errorf("hugepage: mincore of %d bytes: %w", len(mem), errno)
	}
	var n int64
	for _, v := range vec {
		if v&1 != 0 {
			n += page
		}
	}
	return n, nil
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

// Populate faults in every page of mem for writing, so later writes find their pages
// mapped (no page fault, no zeroing on the put path). It uses madvise(MADV_POPULATE_WRITE)
// (Linux 5.14+), which fails with ENOMEM instead of killing the process when memory runs
// out, and leaves the bytes of pages already present as they are; on older kernels (EINVAL)
// it falls back to Touch. Either way it is safe while other goroutines write into mem: a
// background populator runs beside puts.
func Populate(mem []byte) error {
	if len(mem) == 0 {
		return nil
	}
	err := unix.Madvise(mem, unix.MADV_POPULATE_WRITE)
	if err == nil {
		return nil
	}
	if !errors.Is(err, unix.EINVAL) {
		return fmt.Errorf("hugepage: madvise(MADV_POPULATE_WRITE) of %d bytes: %w", len(mem), err)
	}
	Touch(mem)
	return nil
}
