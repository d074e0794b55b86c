package hugepage

import (
	"runtime"
	"testing"
	"unsafe"

	"github.com/mooncake-go/mooncake/internal/testutil"
)

func TestMain(m *testing.M) { testutil.VerifyNoLeaks(m) }

func TestRoundUp(t *testing.T) {
	f := func(size, page, want int64) {
		t.Helper()
		if got := RoundUp(size, page); got != want {
			t.Fatalf("RoundUp(%d, %d) = %d, want %d", size, page, got, want)
		}
	}
	f(1, 4096, 4096)
	f(4096, 4096, 4096)
	f(4097, 4096, 8192)
	f(3<<20, HugePageSize, 4<<20)
	f(1<<63-1, HugePageSize, -1)
}

func TestMapAnon(t *testing.T) {
	for _, thp := range []bool{false, true} {
		r, err := MapAnon(4*HugePageSize, thp)
		if err != nil {
			t.Fatal(err)
		}
		if len(r.Mem) != 4*HugePageSize {
			t.Fatalf("len %d", len(r.Mem))
		}
		addr := uintptr(unsafe.Pointer(unsafe.SliceData(r.Mem)))
		if runtime.GOOS == "linux" && addr%uintptr(PageSize()) != 0 { // elsewhere it is a Go slice
			t.Fatalf("mapping at %#x is not page aligned", addr)
		}
		if r.Kind == KindTHP && addr%HugePageSize != 0 {
			t.Fatalf("THP mapping at %#x is not 2 MiB aligned", addr)
		}
		if thp && THPEnabled() && r.Kind != KindTHP {
			t.Fatalf("THP enabled but got kind %d", r.Kind)
		}
		if !thp && r.Kind != KindPlain {
			t.Fatalf("plain mapping got kind %d", r.Kind)
		}
		// Touch the first and last byte of every huge page.
		for off := 0; off < len(r.Mem); off += HugePageSize {
			r.Mem[off], r.Mem[off+HugePageSize-1] = 1, 2
		}
		if err := Unmap(r); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := MapAnon(100, false); err == nil {
		t.Fatal("unaligned size accepted")
	}
	if _, err := MapHugeTLB(HugePageSize + 1); err == nil {
		t.Fatal("unaligned hugetlb size accepted")
	}
}

func TestResidency(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("residency comes from /proc/self/smaps: Linux only")
	}
	const size = 8 * HugePageSize
	r, err := MapAnon(size, true)
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := Unmap(r); err != nil {
			t.Fatal(err)
		}
	}()
	before, err := ResidencyOf(r.Mem)
	if err != nil {
		t.Fatal(err)
	}
	if before.Resident != 0 {
		t.Fatalf("untouched mapping has %d resident bytes", before.Resident)
	}
	// Touch half of it.
	for off := 0; off < size/2; off += int(PageSize()) {
		r.Mem[off] = 1
	}
	after, err := ResidencyOf(r.Mem)
	if err != nil {
		t.Fatal(err)
	}
	if after.Resident < size/2 || after.Resident > size || after.HugePages > after.Resident {
		t.Fatalf("after touching %d bytes: %+v", size/2, after)
	}
	t.Logf("kind %d: %+v (THP enabled: %v)", r.Kind, after, THPEnabled())
	if r.Kind == KindPlain && after.HugePages != 0 && !THPEnabled() {
		t.Fatalf("plain mapping reports huge pages: %+v", after)
	}
}

func uintptrOf(b []byte) uintptr { return uintptr(unsafe.Pointer(unsafe.SliceData(b))) }

// TestResidencyOfPartOfAMapping: the kernel merges an anonymous mapping with a neighbour
// of the same flags, so an arena can be part of a larger VMA. ResidencyOf must count only
// the bytes of the range it is asked about (this once read 0 for a merged, fully
// pre-faulted arena on a CI machine).
func TestResidencyOfPartOfAMapping(t *testing.T) {
	const size = 16 << 20
	r, err := MapAnon(size, false)
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := Unmap(r); err != nil {
			t.Fatal(err)
		}
	}()
	page := int(PageSize())
	for off := 0; off < 4<<20; off += page { // the first 4 MiB of the mapping
		r.Mem[off] = 1
	}
	got, err := ResidencyOf(r.Mem[2<<20 : 10<<20]) // straddles the touched part
	if err != nil {
		t.Fatal(err)
	}
	if got.Resident != 2<<20 {
		t.Fatalf("resident %d bytes of the sub-range, want %d", got.Resident, 2<<20)
	}
	if got.HugePages > got.Resident {
		t.Fatalf("huge pages %d > resident %d", got.HugePages, got.Resident)
	}
}
