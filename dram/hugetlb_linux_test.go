package dram

import (
	"errors"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/mooncake-go/mooncake/dram/internal/hugepage"
	"github.com/mooncake-go/mooncake/internal/base"
)

const nrHugePagesPath = "/proc/sys/vm/nr_hugepages"

// reserveHugePages raises nr_hugepages so that n more huge pages are free, and restores the
// old value when the test ends. It skips the test when it cannot (not root, no sysfs, the
// kernel found too little contiguous memory).
func reserveHugePages(t *testing.T, n int64) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skipf("hugetlb path not tested: needs root to write %s (run the tests as root, or reserve pages first)", nrHugePagesPath)
	}
	old, err := os.ReadFile(nrHugePagesPath)
	if err != nil {
		t.Skipf("hugetlb path not tested: %v", err)
	}
	oldN, err := strconv.ParseInt(strings.TrimSpace(string(old)), 10, 64)
	if err != nil {
		t.Skipf("hugetlb path not tested: parsing %s: %v", nrHugePagesPath, err)
	}
	want := oldN + n
	if err := os.WriteFile(nrHugePagesPath, []byte(strconv.FormatInt(want, 10)), 0); err != nil {
		t.Skipf("hugetlb path not tested: %s is not writable: %v", nrHugePagesPath, err)
	}
	t.Cleanup(func() {
		if err := os.WriteFile(nrHugePagesPath, old, 0); err != nil {
			t.Errorf("restoring %s to %s: %v", nrHugePagesPath, strings.TrimSpace(string(old)), err)
		}
	})
	if free := hugepage.FreeHugePages(); free < n {
		t.Skipf("hugetlb path not tested: asked the kernel for %d more huge pages, %d are free", n, free)
	}
}

func TestArenaHugeTLB(t *testing.T) { sharings(t, testArenaHugeTLB) }

func testArenaHugeTLB(t *testing.T, shared bool) {
	const size = 6 << 20 // 3 huge pages
	reserveHugePages(t, size/hugepage.HugePageSize)

	for _, hp := range []HugePages{HugePagesRequire, HugePagesAuto} {
		a, err := NewArena(Options{Size: size - 100, HugePages: hp, Shared: shared})
		if err != nil {
			t.Fatalf("%v: %v", hp, err)
		}
		if a.Mode() != ModeHugeTLB || a.Capacity() != size {
			t.Fatalf("%v: mode %v capacity %d, want hugetlb %d", hp, a.Mode(), a.Capacity(), size)
		}
		h, err := a.Alloc(size)
		if err != nil {
			t.Fatal(err)
		}
		b := h.Bytes()
		fill(b, 0x5A)
		if err := checkFill(b, 0x5A); err != nil {
			t.Fatal(err)
		}
		if r, err := a.Residency(); err != nil || r.Resident != size || r.HugePages != size {
			t.Fatalf("%v: residency %+v, %v; want all %d bytes on huge pages", hp, r, err, size)
		}
		if si, ok := a.Share(); ok != shared || (shared && si.Size != size) {
			t.Fatalf("Share %+v %v", si, ok)
		} else if ok {
			// A peer maps the hugetlb memfd and sees the bytes (no second reservation: the
			// file's pages are already reserved).
			// The subtest unmaps the peer's view when it ends, before the next arena wants
			// the pages.
			t.Run(hp.String()+"-peer", func(t *testing.T) {
				peer := peerMap(t, si)
				if err := checkFill(peer[h.Offset():h.Offset()+h.Len()], 0x5A); err != nil {
					t.Fatalf("%v: peer view: %v", hp, err)
				}
			})
		}
		if err := h.Release(); err != nil {
			t.Fatal(err)
		}
		if err := a.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

// TestArenaHugeTLBShortage reserves fewer huge pages than an arena needs: NewArena must say so
// (Require) or fall back (Auto) at once, never map pages that SIGBUS on first touch. hugetlb
// reserves a mapping's pages in mmap, for MAP_HUGETLB and for a MAP_SHARED hugetlb memfd
// alike; this test fails (by crashing) if a mapping ever came back without its reservation.
func TestArenaHugeTLBShortage(t *testing.T) { sharings(t, testArenaHugeTLBShortage) }

func testArenaHugeTLBShortage(t *testing.T, shared bool) {
	const reserved = 2
	reserveHugePages(t, reserved)
	const size = (reserved + 1) * hugepage.HugePageSize
	if free := hugepage.FreeHugePages(); free > reserved {
		t.Skipf("%d huge pages free (another user reserved some): cannot make a shortage of %d", free, reserved+1)
	}
	_, err := NewArena(Options{Size: size, HugePages: HugePagesRequire, Shared: shared})
	if !errors.Is(err, ErrHugePagesUnavailable) || !errors.Is(err, base.ErrNotSupported) {
		t.Fatalf("Require with %d of %d huge pages: %v", reserved, size/hugepage.HugePageSize, err)
	}
	t.Logf("Require: %v", err)
	// Two arenas that fit one at a time: the second must fail at NewArena, since the first
	// holds the reservation even though it never touched a page.
	first := newTestArena(t, Options{Size: reserved * hugepage.HugePageSize, HugePages: HugePagesRequire, Shared: shared})
	if first.Mode() != ModeHugeTLB {
		t.Fatalf("first arena mode %v", first.Mode())
	}
	if _, err := NewArena(Options{Size: hugepage.HugePageSize, HugePages: HugePagesRequire, Shared: shared}); !errors.Is(err, ErrHugePagesUnavailable) {
		t.Fatalf("second arena with every page reserved by the first: %v", err)
	}
	// Auto falls back to THP or plain pages, and every byte of it is usable.
	a := newTestArena(t, Options{Size: size, Shared: shared})
	if a.Mode() == ModeHugeTLB {
		t.Fatalf("Auto got hugetlb with %d pages reserved by another arena", reserved)
	}
	for _, ar := range []*Arena{first, a} {
		h, err := ar.Alloc(ar.Capacity())
		if err != nil {
			t.Fatal(err)
		}
		fill(h.Bytes(), 0x77) // touches every page: a missing reservation would SIGBUS here
		if err := checkFill(h.Bytes(), 0x77); err != nil {
			t.Fatal(err)
		}
		if err := h.Release(); err != nil {
			t.Fatal(err)
		}
	}
}
