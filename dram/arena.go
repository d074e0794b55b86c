package dram

import (
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mooncake-go/mooncake/dram/internal/hugepage"
	"github.com/mooncake-go/mooncake/internal/invariants"
)

// Arena is one region of memory mapped outside the Go heap, with an offset allocator handing
// out ranges of it as refcounted Handles. It is goroutine-safe.
//
// Ownership: the Arena owns the mapping. Every Handle it returns holds one reference; the
// range is returned to the allocator (and may be handed out again) only when the last
// reference is released. Close unmaps, and refuses to while any handle is live.
type Arena struct {
	// Immutable after NewArena.
	region   hugepage.Region // region.Mem[:capacity] is the arena; len(region.Mem) >= capacity
	mem      []byte          // region.Mem[:capacity]
	mode     Mode
	capacity int64
	logger   *slog.Logger
	// share is what Share reports; share.FD is region.FD (-1 when not shared).
	share ShareInfo

	// leaks counts handles collected while their range was still allocated (invariants
	// builds only; see leak.go).
	leaks atomic.Int64

	// populated is the bytes from offset 0 faulted in ahead of the allocator (see
	// Populated). Invariant: populated <= capacity.
	populated atomic.Int64
	// populator is the background population (Options.Populate; populate.go), nil without
	// it. Set by NewArena, stopped by Close.
	populator *populator

	// mu protects alloc, requested and closed. It is a leaf lock: nothing else is locked while it is
	// held, and no callback runs under it.
	mu struct {
		sync.Mutex
		alloc     *allocator
		requested int64 // sum of Handle.n over live handles
		closed    bool
	}
}

// NewArena maps an arena of opts.Size bytes (rounded up as Options.Size says), anonymous or,
// with opts.Shared, a memfd (see Share), and logs the mode it got once at Info. Errors wrap
// base.ErrInvalidParams for bad options and ErrHugePagesUnavailable for HugePagesRequire
// without enough reserved huge pages.
func NewArena(opts Options) (*Arena, error) {
	opts.EnsureDefaults()
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	region, reason, err := mapArena(opts)
	if err != nil {
		return nil, err
	}
	capacity := int64(len(region.Mem))
	// The mapping is a multiple of its page size; alignments above it round it down.
	capacity &^= opts.Alignment - 1
	if capacity <= 0 {
		_ = hugepage.Unmap(region)
		return nil, fmt.Errorf("%w: dram: alignment %d larger than the arena (%d bytes)", ErrInvalidSize, opts.Alignment, len(region.Mem))
	}
	a := &Arena{
		region:   region,
		mem:      region.Mem[:capacity:capacity],
		mode:     modeOf(region.Kind),
		capacity: capacity,
		logger:   opts.Logger,
		share:    ShareInfo{FD: region.FD, Size: int64(len(region.Mem)), ID: newArenaID()},
	}
	if opts.Shared {
		ino, dev, err := hugepage.FileID(region.FD)
		if err != nil {
			_ = hugepage.Unmap(region)
			return nil, fmt.Errorf("dram: shared arena: %w", err)
		}
		a.share.Inode, a.share.Dev = ino, dev
	}
	var prefault time.Duration
	if opts.Prefault {
		start := time.Now()
		if err := hugepage.Populate(region.Mem); err != nil {
			_ = hugepage.Unmap(region)
			return nil, fmt.Errorf("dram: pre-faulting the arena of %d bytes: %w", len(region.Mem), err)
		}
		prefault = time.Since(start)
		a.populated.Store(capacity)
	}
	a.mu.alloc = newAllocator(capacity, opts.Alignment)
	a.logger.Info("dram arena mapped",
		"mode", a.mode.String(), "shared", opts.Shared, "capacity_bytes", capacity, "requested_bytes", opts.Size,
		"alignment", opts.Alignment, "huge_pages", opts.HugePages.String(), "reason", reason,
		"prefault", opts.Prefault, "prefault_seconds", prefault.Seconds(), "populate", opts.Populate && !opts.Prefault)
	if opts.Populate && !opts.Prefault {
		a.startPopulate(opts.populateStep, opts.populateFn)
	}
	return a, nil
}

// newArenaID draws a random non-zero arena ID. math/rand/v2's global source is seeded by
// the runtime from OS randomness, which is enough: the ID only has to differ between
// arenas (a client tells a restarted worker's new arena from the old one by it), it is not
// a secret.
func newArenaID() uint64 {
	for {
		if id := rand.Uint64(); id != 0 {
			return id
		}
	}
}

// ShareInfo is what a process on the same host needs to map a shared arena: open
// /proc/<pid>/fd/<FD> read-only, check that fstat's st_ino and st_dev equal Inode and Dev
// (the fd number may have been reused by another file), mmap Size bytes PROT_READ,
// MAP_SHARED, and read a Handle's bytes at its Offset.
type ShareInfo struct {
	// FD is the arena's memfd in this process. It is owned by the Arena and closed by Close;
	// callers never close it.
	FD int
	// Size is the whole mapping's length in bytes: >= Capacity (the mapping is rounded to
	// its page size, the capacity further down to the alignment). Handle offsets are below
	// Capacity.
	Size int64
	// Inode and Dev are st_ino and st_dev of the memfd.
	Inode, Dev uint64
	// ID is a random non-zero number drawn by NewArena: a different arena (a restarted
	// worker) has a different ID, even at the same FD.
	ID uint64
}

// Share returns how another process on this host can map the arena, and true, for an arena
// made with Options.Shared; false for an anonymous one and after Close. The fd in it stays
// open until Close.
//
// The bytes at a Handle's Offset are valid for a peer exactly as long as for this process:
// while a reference to the Handle is held. The peer's mapping is read-only: the memfd is
// sealed against writes and resizing through any other fd (see internal/hugepage).
func (a *Arena) Share() (ShareInfo, bool) {
	if a.share.FD < 0 {
		return ShareInfo{}, false
	}
	a.mu.Lock()
	closed := a.mu.closed
	a.mu.Unlock()
	if closed {
		return ShareInfo{}, false
	}
	return a.share, true
}

func modeOf(k hugepage.Kind) Mode {
	switch k {
	case hugepage.KindHugeTLB:
		return ModeHugeTLB
	case hugepage.KindTHP:
		return ModeTHP
	}
	return ModePlain
}

// roundSize rounds size up to page and to align; it fails on overflow.
func roundSize(size, page, align int64) (int64, error) {
	r := hugepage.RoundUp(size, max(page, align))
	if r < 0 {
		return 0, fmt.Errorf("%w: dram: arena size %d overflows when rounded to %d", ErrTooLarge, size, max(page, align))
	}
	return r, nil
}

// mapArena maps the region opts ask for and says why it got the kind it got. The fallback
// order is the same with and without Shared: hugetlb, then THP, then plain pages.
func mapArena(opts Options) (hugepage.Region, string, error) {
	prefix := ""
	hugeTLB := hugepage.MapHugeTLB
	thp := func(size int64) (hugepage.Region, error) { return hugepage.MapAnon(size, true) }
	plain := func(size int64) (hugepage.Region, error) { return hugepage.MapAnon(size, false) }
	thpEnabled := hugepage.THPEnabled()
	if opts.Shared {
		prefix = "shared; "
		hugeTLB = func(size int64) (hugepage.Region, error) { return hugepage.MapShared(size, true) }
		thp = func(size int64) (hugepage.Region, error) { return hugepage.MapShared(size, false) }
		plain = hugepage.MapSharedPlain
		thpEnabled = hugepage.ShmemTHPEnabled()
	}
	if opts.HugePages != HugePagesOff {
		size, err := roundSize(opts.Size, hugepage.HugePageSize, opts.Alignment)
		if err != nil {
			return hugepage.Region{}, "", err
		}
		r, err := hugeTLB(size)
		if err == nil {
			return r, prefix + "huge pages reserved", nil
		}
		if opts.HugePages == HugePagesRequire {
			return hugepage.Region{}, "", fmt.Errorf("%w: %w (reserve them with: echo %d > /proc/sys/vm/nr_hugepages)",
				ErrHugePagesUnavailable, err, size/hugepage.HugePageSize)
		}
		r, err = thp(size)
		if err != nil {
			return hugepage.Region{}, "", fmt.Errorf("dram: mapping %d bytes: %w", size, err)
		}
		what := "transparent huge pages"
		if opts.Shared {
			what = "shmem transparent huge pages"
		}
		if r.Kind == hugepage.KindTHP {
			return r, prefix + "no huge pages reserved; " + what + " enabled", nil
		}
		if thpEnabled { // enabled, but the madvise failed
			return r, prefix + "no huge pages reserved; madvise(MADV_HUGEPAGE) failed", nil
		}
		return r, prefix + "no huge pages reserved; " + what + " disabled", nil
	}
	size, err := roundSize(opts.Size, hugepage.PageSize(), opts.Alignment)
	if err != nil {
		return hugepage.Region{}, "", err
	}
	r, err := plain(size)
	if err != nil {
		return hugepage.Region{}, "", fmt.Errorf("dram: mapping %d bytes: %w", size, err)
	}
	return r, prefix + "huge pages off", nil
}

// Mode returns the kind of pages the arena got.
func (a *Arena) Mode() Mode { return a.mode }

// Capacity returns the arena's size in bytes: Options.Size rounded up (see Options.Size).
func (a *Arena) Capacity() int64 { return a.capacity }

// Alloc reserves size bytes and returns a Handle holding one reference. The caller owns that
// reference and must Release it (directly or by passing the handle on to someone who will).
// The bytes are not zeroed: they hold whatever the previous owner left.
//
// Errors: size <= 0 wraps ErrInvalidSize (base.ErrInvalidParams); size > Capacity wraps
// ErrTooLarge (base.ErrTooLarge); no free block large enough wraps ErrArenaFull
// (base.ErrNoSpace); after Close, ErrClosed.
func (a *Arena) Alloc(size int64) (*Handle, error) {
	if size <= 0 {
		return nil, fmt.Errorf("%w: %d bytes", ErrInvalidSize, size)
	}
	if size > a.capacity {
		return nil, fmt.Errorf("%w: %d bytes requested, capacity %d", ErrTooLarge, size, a.capacity)
	}
	a.mu.Lock()
	if a.mu.closed {
		a.mu.Unlock()
		return nil, ErrClosed
	}
	al, ok := a.mu.alloc.alloc(size)
	if !ok {
		free, largest := a.mu.alloc.capacity-a.mu.alloc.used, a.mu.alloc.largestFree()
		a.mu.Unlock()
		return nil, fmt.Errorf("%w: %d bytes requested, %d free, largest free block %d", ErrArenaFull, size, free, largest)
	}
	a.mu.requested += size
	a.mu.Unlock()
	h := &Handle{arena: a, al: al, n: size}
	h.refs.Store(1)
	if invariants.Enabled {
		a.watchLeak(h)
	}
	return h, nil
}

// free returns h's range to the allocator. Called once, by the Release that dropped the last
// reference.
func (a *Arena) free(h *Handle) error {
	a.mu.Lock()
	err := a.mu.alloc.free(h.al)
	if err == nil {
		a.mu.requested -= h.n
	}
	a.mu.Unlock()
	if err != nil {
		// The handle's refcount said live but the allocator disagrees: metadata corruption.
		return errors.Join(ErrForeignHandle, invariants.AssertionFailedf("dram: freeing handle at offset %d: %v", h.al.off, err))
	}
	return nil
}

// Stats is a snapshot of an arena's accounting.
type Stats struct {
	Mode     Mode
	Capacity int64 // bytes
	// Used is bytes reserved by live allocations (each rounded up to the alignment);
	// Used + Free == Capacity.
	Used int64
	Free int64
	// Requested is the sum of the sizes asked for by live allocations (<= Used).
	Requested int64
	// LargestFree is the largest block Alloc can hand out now.
	LargestFree int64
	// Fragmentation is 1 - LargestFree/Free: 0 when the free space is one block (or there is
	// none), towards 1 as it splinters.
	Fragmentation float64
	// LiveAllocs counts allocations not yet freed.
	LiveAllocs int64
	// FreeBlocks counts free blocks.
	FreeBlocks int64
	// MetadataBytes is what the allocator's bookkeeping costs on the Go heap (handles not
	// included).
	MetadataBytes int64
	// LeakedAllocs counts handles garbage-collected before their last Release (detected in
	// invariants builds only; always 0 otherwise). Their ranges stay allocated.
	LeakedAllocs int64
	// Populated is the bytes faulted in ahead of the allocator (Arena.Populated).
	Populated int64
}

// Stats returns a snapshot of the arena's accounting. It takes the arena's lock briefly.
func (a *Arena) Stats() Stats {
	a.mu.Lock()
	defer a.mu.Unlock()
	al := a.mu.alloc
	s := Stats{
		Mode:          a.mode,
		Capacity:      a.capacity,
		Used:          al.used,
		Free:          al.capacity - al.used,
		Requested:     a.mu.requested,
		LargestFree:   al.largestFree(),
		LiveAllocs:    al.live,
		FreeBlocks:    al.freeBlocks,
		MetadataBytes: al.metadataBytes(),
		LeakedAllocs:  a.leaks.Load(),
		Populated:     a.populated.Load(),
	}
	if s.Free > 0 {
		s.Fragmentation = 1 - float64(s.LargestFree)/float64(s.Free)
	}
	return s
}

// Residency says how much of the arena the kernel has backed with memory: Resident bytes
// (touched at least once; plain and THP arenas are populated on first touch, hugetlb ones
// count their pages once touched) and how many of them sit on huge pages. It reads
// /proc/self/smaps (Linux only), which costs about a millisecond per thousand mappings:
// for metrics and diagnostics, not hot paths. It is how to check that a thp arena really
// got huge pages.
func (a *Arena) Residency() (Residency, error) {
	a.mu.Lock()
	closed := a.mu.closed
	a.mu.Unlock()
	if closed {
		return Residency{}, ErrClosed
	}
	// NB: not under a.mu: reading smaps takes milliseconds and must not stall Alloc. It only
	// compares addresses, so a concurrent Close (munmap) at worst makes the answer 0.
	r, err := hugepage.ResidencyOf(a.mem)
	if err != nil {
		return Residency{}, fmt.Errorf("dram: %w", err)
	}
	return Residency{Resident: r.Resident, HugePages: r.HugePages}, nil
}

// Residency is what Arena.Residency returns.
type Residency struct {
	Resident  int64 // bytes backed by memory
	HugePages int64 // of which on 2 MiB pages
}

// Close unmaps the arena and, for a shared arena, closes its memfd (processes that mapped it
// keep their mappings, and the memory, until they unmap). If handles are still live it
// returns an error wrapping ErrLiveHandles (an assertion in invariants builds) and leaves the
// arena open, so no live handle ever points at unmapped memory; release them and Close
// again. Closing twice returns nil. A background population still running is stopped (after
// its current step) before the unmap.
func (a *Arena) Close() error {
	closedNow, err := a.markClosed()
	if !closedNow {
		return err
	}
	// Not under a.mu: the populator never takes it, and every user of the mapping checks
	// closed under it first.
	a.stopPopulate()
	return hugepage.Unmap(a.region)
}

// markClosed is Close's part under a.mu: it refuses with live handles, else marks the arena
// closed; closedNow is true for the one call that closed it.
func (a *Arena) markClosed() (closedNow bool, err error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.mu.closed {
		return false, nil
	}
	if live := a.mu.alloc.live; live > 0 {
		return false, errors.Join(
			fmt.Errorf("%w: %d handles (%d bytes) not released", ErrLiveHandles, live, a.mu.alloc.used),
			invariants.AssertionFailedf("dram: Close with %d live handles", live))
	}
	if invariants.Enabled {
		// Everything is released: the allocator must be whole again.
		if err := a.mu.alloc.verify(); err != nil || a.mu.alloc.freeBlocks != 1 || a.mu.requested != 0 {
			return false, invariants.AssertionFailedf("dram: allocator not whole at Close: %v (free blocks %d, requested %d)",
				err, a.mu.alloc.freeBlocks, a.mu.requested)
		}
	}
	a.mu.closed = true
	return true, nil
}
