package dram

import (
	"fmt"
	"log/slog"
	"strings"

	"github.com/mooncake-go/mooncake/internal/base"
)

// Mode is the kind of pages behind an arena, as mapped (not as asked for).
type Mode uint8

const (
	// ModePlain is ordinary pages of the system page size (4 KiB on x86-64).
	ModePlain Mode = iota
	// ModeTHP is a mapping (anonymous, or a shared memfd) advised MADV_HUGEPAGE: transparent
	// 2 MiB pages where the kernel finds them, base pages elsewhere.
	ModeTHP
	// ModeHugeTLB is a mapping of 2 MiB pages from the reserved pool: MAP_HUGETLB, or an
	// MFD_HUGETLB memfd for a shared arena.
	ModeHugeTLB
)

// String returns "plain", "thp" or "hugetlb".
func (m Mode) String() string {
	switch m {
	case ModePlain:
		return "plain"
	case ModeTHP:
		return "thp"
	case ModeHugeTLB:
		return "hugetlb"
	}
	return fmt.Sprintf("Mode(%d)", uint8(m))
}

// HugePages says which pages NewArena may use.
type HugePages uint8

const (
	// HugePagesAuto (the default) uses MAP_HUGETLB when enough huge pages are reserved, else
	// transparent huge pages when THP is enabled, else plain pages.
	HugePagesAuto HugePages = iota
	// HugePagesOff uses plain pages only.
	HugePagesOff
	// HugePagesRequire uses MAP_HUGETLB or fails NewArena with an error wrapping
	// ErrHugePagesUnavailable.
	HugePagesRequire
)

// String returns "auto", "off" or "require", the values ParseHugePages accepts.
func (h HugePages) String() string {
	switch h {
	case HugePagesAuto:
		return "auto"
	case HugePagesOff:
		return "off"
	case HugePagesRequire:
		return "require"
	}
	return fmt.Sprintf("HugePages(%d)", uint8(h))
}

// ParseHugePages parses "auto", "off" or "require" (case-insensitive). Other strings give an
// error wrapping base.ErrInvalidParams.
func ParseHugePages(s string) (HugePages, error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "auto", "":
		return HugePagesAuto, nil
	case "off", "false", "no":
		return HugePagesOff, nil
	case "require", "required", "on":
		return HugePagesRequire, nil
	}
	return 0, fmt.Errorf("%w: dram: huge pages %q: want auto, off or require", base.ErrInvalidParams, s)
}

// Set implements flag.Value.
func (h *HugePages) Set(s string) error {
	v, err := ParseHugePages(s)
	if err != nil {
		return err
	}
	*h = v
	return nil
}

// UnmarshalText implements encoding.TextUnmarshaler (JSON config strings).
func (h *HugePages) UnmarshalText(b []byte) error { return h.Set(string(b)) }

// MarshalText implements encoding.TextMarshaler.
func (h HugePages) MarshalText() ([]byte, error) { return []byte(h.String()), nil }

// DefaultAlignment is the default Options.Alignment: one cache line, so no two objects share
// a line (no false sharing between a writer and a reader of neighbours) and copies start
// aligned. It costs on average 32 bytes per object, nothing next to 1 KiB+ objects.
const DefaultAlignment = 64

// MaxAlignment bounds Options.Alignment.
const MaxAlignment = 1 << 30

// Options configure NewArena. A zero field means its default.
type Options struct {
	// Size is the arena's size in bytes; required (> 0). It is rounded up to 2 MiB (the huge
	// page size) with HugePagesAuto and HugePagesRequire, whatever mode results, to the system
	// page size with HugePagesOff, and to the alignment; Arena.Capacity reports the result.
	Size int64
	// Alignment of every allocation's offset and the granule sizes are rounded up to: a power
	// of two up to MaxAlignment. The default is DefaultAlignment (64). The mapping starts on a
	// page boundary (2 MiB for hugetlb and thp), so addresses are aligned as the offsets are up
	// to that page size.
	Alignment int64
	// HugePages chooses the pages; the default is HugePagesAuto.
	HugePages HugePages
	// Shared backs the arena with a memfd so a process on this host can map it (see
	// Arena.Share); the default is false (an anonymous mapping). The page choice is the same
	// as without it: a hugetlb memfd when huge pages are reserved (and HugePages allows), else
	// a memfd advised MADV_HUGEPAGE when shmem THP allows
	// (/sys/kernel/mm/transparent_hugepage/shmem_enabled), else a plain memfd.
	Shared bool
	// Prefault faults in every page of the arena when it is mapped (madvise
	// MADV_POPULATE_WRITE), so the first put into a range pays no page faults and no page
	// zeroing: on 4 KiB pages that made first-touch puts 2-3x slower than puts into reused
	// ranges (docs/benchmarks.md). The cost moves to start: the whole arena becomes resident
	// at once (RSS = Size) and NewArena takes about 0.3 s per GiB for an anonymous arena and
	// about 1 s per GiB for a shared (memfd) one of 4 KiB pages (BenchmarkArenaPrefault, on a
	// loaded 2-core VM). The default is false: pages are backed on first touch, or by
	// Populate in the background.
	Prefault bool
	// Populate faults in the arena's pages from a background goroutine after NewArena
	// returns, lowest offsets first, using at most half of one core (populate.go), so puts
	// mostly find their pages there without NewArena waiting for it; Arena.Populated
	// reports the progress. Ignored with Prefault (everything is populated already). The
	// default is false.
	Populate bool
	// populateStep and populateFn replace populateStepBytes and hugepage.Populate in
	// tests; zero in production.
	populateStep int64
	populateFn   func([]byte) error
	// Logger receives one Info line per arena saying which mode was mapped and why. The
	// default discards.
	Logger *slog.Logger
}

// EnsureDefaults fills zero fields with their defaults.
func (o *Options) EnsureDefaults() {
	if o.Alignment == 0 {
		o.Alignment = DefaultAlignment
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
}

// Validate checks the options; it presumes EnsureDefaults has been called. Errors wrap
// base.ErrInvalidParams.
func (o *Options) Validate() error {
	if o.Size <= 0 {
		return fmt.Errorf("%w: dram: arena size %d must be positive", base.ErrInvalidParams, o.Size)
	}
	if o.Alignment <= 0 || o.Alignment&(o.Alignment-1) != 0 || o.Alignment > MaxAlignment {
		return fmt.Errorf("%w: dram: alignment %d must be a power of two up to %d", base.ErrInvalidParams, o.Alignment, MaxAlignment)
	}
	if o.HugePages > HugePagesRequire {
		return fmt.Errorf("%w: dram: unknown huge pages setting %d", base.ErrInvalidParams, o.HugePages)
	}
	return nil
}
