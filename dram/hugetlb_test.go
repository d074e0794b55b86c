package dram

import (
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/mooncake-go/mooncake/dram/internal/hugepage"
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

func TestArenaHugeTLB(t *testing.T) {
	const size = 6 << 20 // 3 huge pages
	reserveHugePages(t, size/hugepage.HugePageSize)

	for _, hp := range []HugePages{HugePagesRequire, HugePagesAuto} {
		a, err := NewArena(Options{Size: size - 100, HugePages: hp})
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
		if err := h.Release(); err != nil {
			t.Fatal(err)
		}
		if err := a.Close(); err != nil {
			t.Fatal(err)
		}
	}
}
