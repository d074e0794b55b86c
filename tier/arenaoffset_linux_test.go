package tier_test

import (
	"bytes"
	"fmt"
	"os"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/mooncake-go/mooncake/dram"
	"github.com/mooncake-go/mooncake/internal/base"
	"github.com/mooncake-go/mooncake/tier"
	"github.com/mooncake-go/mooncake/tier/tiertest"
)

func addr(b []byte) uintptr { return uintptr(unsafe.Pointer(unsafe.SliceData(b))) }

// TestReaderArenaOffset: a Reader's ArenaOffset says where its bytes are in the arena for a
// DRAM hit, a lower-tier hit read into a DRAM range and a promoted hit, and is false for a
// lower-tier hit read into a Go buffer (arena full). Where it is true, Bytes() is the arena's
// own memory at that offset (not a copy), and a process that maps the shared arena through
// /proc sees the object's bytes there.
func TestReaderArenaOffset(t *testing.T) {
	const arenaSize, size = 1 << 20, 100 * kib
	l := tiertest.NewMemLower()
	const lowerKeys = arenaSize/size + 2 // more than the arena holds at once
	for i := range lowerKeys {
		k := fmt.Sprint("low", i)
		if err := l.Put(k, 1, pattern(k, 1, size), false); err != nil {
			t.Fatal(err)
		}
	}
	a, err := dram.NewArena(dram.Options{Size: arenaSize, HugePages: dram.HugePagesOff, Shared: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := a.Close(); err != nil {
			t.Errorf("arena close: %v", err)
		}
	})
	e := open(t, tier.Options{Arena: a, Lower: l})

	// The arena's base address: a Handle's Bytes is the arena's memory at its Offset (dram
	// tests that), so every arena-backed Reader must satisfy addr(Bytes) == base + offset.
	h, err := a.Alloc(1)
	if err != nil {
		t.Fatal(err)
	}
	arenaBase := addr(h.Bytes()) - uintptr(h.Offset())
	if err := h.Release(); err != nil {
		t.Fatal(err)
	}

	// The peer's view, mapped as a same-host client does.
	si, ok := a.Share()
	if !ok {
		t.Fatal("shared arena without ShareInfo")
	}
	f, err := os.OpenFile(fmt.Sprintf("/proc/self/fd/%d", si.FD), os.O_RDONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	peer, err := unix.Mmap(int(f.Fd()), 0, int(si.Size), unix.PROT_READ, unix.MAP_SHARED)
	f.Close()
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := unix.Munmap(peer); err != nil {
			t.Error(err)
		}
	}()

	check := func(r *tier.Reader, wantTier base.Tier, wantOK bool) {
		t.Helper()
		m := r.Meta()
		if r.Tier() != wantTier {
			t.Fatalf("%q: tier %v, want %v", m.Key, r.Tier(), wantTier)
		}
		if !bytes.Equal(r.Bytes(), pattern(m.Key, m.Version, int(m.Size))) {
			t.Fatalf("%q: wrong bytes", m.Key)
		}
		off, ok := r.ArenaOffset()
		if ok != wantOK {
			t.Fatalf("%q (%v): ArenaOffset ok %v, want %v", m.Key, r.Tier(), ok, wantOK)
		}
		if !ok {
			if off != 0 {
				t.Fatalf("%q: offset %d with ok false", m.Key, off)
			}
			return
		}
		if off < 0 || off+m.Size > a.Capacity() {
			t.Fatalf("%q: offset %d size %d outside the arena (%d)", m.Key, off, m.Size, a.Capacity())
		}
		if got := addr(r.Bytes()); got != arenaBase+uintptr(off) {
			t.Fatalf("%q: Bytes at %#x, but arena offset %d is at %#x: not the arena's memory", m.Key, got, off, arenaBase+uintptr(off))
		}
		if !bytes.Equal(peer[off:off+m.Size], r.Bytes()) {
			t.Fatalf("%q: the peer mapping at offset %d does not hold the object", m.Key, off)
		}
	}

	// A DRAM hit.
	mustPut(t, e, "dram", 1, size, tier.PutOptions{HardPin: true})
	rd, err := e.Get("dram", 0)
	if err != nil {
		t.Fatal(err)
	}
	check(rd, base.TierDRAM, true)

	// Lower-tier hits (first hits: not promoted) read into DRAM ranges the Readers own, until
	// the arena is full; the next is read into a Go buffer.
	var readers []*tier.Reader
	sawHeap := false
	for i := 0; i < lowerKeys && !sawHeap; i++ {
		fits := a.Stats().LargestFree >= size // nothing else allocates meanwhile
		r, err := e.Get(fmt.Sprint("low", i), 0)
		if err != nil {
			t.Fatal(err)
		}
		readers = append(readers, r)
		check(r, base.TierNVMe, fits)
		sawHeap = !fits
	}
	if !sawHeap || len(readers) < 2 {
		t.Fatalf("%d lower-tier reads, heap case reached %v", len(readers), sawHeap)
	}
	for _, r := range readers {
		r.Release()
	}
	rd.Release()

	// A promoted hit: low0's second hit keeps its DRAM range as the object's copy.
	r, err := e.Get("low0", 0)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Release()
	check(r, base.TierNVMe, true)
	if m := e.Metrics(); m.Promotions != 1 {
		t.Fatalf("low0 not promoted on its second hit: %+v", m)
	}
	r2, err := e.Get("low0", 0)
	if err != nil {
		t.Fatal(err)
	}
	defer r2.Release()
	check(r2, base.TierDRAM, true)
	o1, _ := r.ArenaOffset()
	o2, _ := r2.ArenaOffset()
	if o1 != o2 {
		t.Fatalf("the promoted copy moved: %d then %d", o1, o2)
	}
}
