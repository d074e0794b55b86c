package dram

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"runtime"
	"strings"
	"testing"

	"github.com/mooncake-go/mooncake/dram/internal/hugepage"
	"github.com/mooncake-go/mooncake/internal/base"
	"github.com/mooncake-go/mooncake/internal/invariants"
)

// sharings runs f once on anonymous arenas and once on shared (memfd) ones: a shared arena
// must behave exactly like an anonymous one.
func sharings(t *testing.T, f func(t *testing.T, shared bool)) {
	t.Helper()
	for _, shared := range []bool{false, true} {
		name := "anon"
		if shared {
			name = "shared"
		}
		t.Run(name, func(t *testing.T) {
			if shared && runtime.GOOS != "linux" {
				t.Skip("shared arenas are memfds: Linux only")
			}
			f(t, shared)
		})
	}
}

func newTestArena(t *testing.T, opts Options) *Arena {
	t.Helper()
	a, err := NewArena(opts)
	if err != nil {
		t.Fatalf("NewArena(%+v): %v", opts, err)
	}
	t.Cleanup(func() {
		if err := a.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return a
}

// misuse runs fn, which misuses a handle: in invariants builds it must panic, otherwise it
// must return an error matching want.
func misuse(t *testing.T, want error, fn func() error) {
	t.Helper()
	var err error
	panicked := func() (p bool) {
		defer func() {
			if r := recover(); r != nil {
				p = true
			}
		}()
		err = fn()
		return false
	}()
	if invariants.Enabled {
		if !panicked {
			t.Fatalf("invariants build: want an assertion panic, got err %v", err)
		}
		return
	}
	if panicked || !errors.Is(err, want) {
		t.Fatalf("got err %v (panicked %v), want %v", err, panicked, want)
	}
}

func TestArenaPlain(t *testing.T) { sharings(t, testArenaPlain) }

func testArenaPlain(t *testing.T, shared bool) {
	var logBuf bytes.Buffer
	a := newTestArena(t, Options{Size: 1<<20 + 1, HugePages: HugePagesOff, Shared: shared,
		Logger: slog.New(slog.NewTextHandler(&logBuf, nil))})
	if a.Mode() != ModePlain {
		t.Fatalf("mode %v, want plain", a.Mode())
	}
	page := int64(os.Getpagesize())
	if want := (1<<20 + page) &^ (page - 1); a.Capacity() != want {
		t.Fatalf("capacity %d, want %d", a.Capacity(), want)
	}
	if !strings.Contains(logBuf.String(), "mode=plain") || !strings.Contains(logBuf.String(), fmt.Sprintf("shared=%v", shared)) {
		t.Fatalf("mode not logged: %q", logBuf.String())
	}
	if _, ok := a.Share(); ok != shared {
		t.Fatalf("Share ok %v, want %v", ok, shared)
	}
	h, err := a.Alloc(1000)
	if err != nil {
		t.Fatal(err)
	}
	b := h.Bytes()
	if len(b) != 1000 || cap(b) != 1000 || h.Len() != 1000 || h.Offset()%DefaultAlignment != 0 {
		t.Fatalf("len %d cap %d Len %d off %d", len(b), cap(b), h.Len(), h.Offset())
	}
	for i := range b {
		b[i] = byte(i)
	}
	s := a.Stats()
	if s.Used != 1024 || s.Requested != 1000 || s.LiveAllocs != 1 || s.Used+s.Free != s.Capacity || s.LargestFree != s.Free || s.Fragmentation != 0 {
		t.Fatalf("stats %+v", s)
	}
	if err := h.Release(); err != nil {
		t.Fatal(err)
	}
	if h.Bytes() != nil {
		t.Fatal("Bytes of a released handle must be nil")
	}
	if s := a.Stats(); s.Used != 0 || s.LiveAllocs != 0 || s.FreeBlocks != 1 || s.Requested != 0 {
		t.Fatalf("stats after release %+v", s)
	}
}

func TestArenaAutoWithoutReservedPages(t *testing.T) { sharings(t, testArenaAutoWithoutReservedPages) }

func testArenaAutoWithoutReservedPages(t *testing.T, shared bool) {
	if hugepage.FreeHugePages() > 0 {
		t.Skip("huge pages are reserved on this machine: Auto would pick hugetlb (TestArenaHugeTLB covers it)")
	}
	a := newTestArena(t, Options{Size: 3 << 20, Shared: shared})
	want := ModePlain
	if thp := hugepage.THPEnabled(); (!shared && thp) || (shared && hugepage.ShmemTHPEnabled()) {
		want = ModeTHP
	}
	if a.Mode() != want {
		t.Fatalf("mode %v, want %v", a.Mode(), want)
	}
	if a.Capacity() != 4<<20 {
		t.Fatalf("capacity %d, want 4 MiB (rounded to 2 MiB pages)", a.Capacity())
	}
	h, err := a.Alloc(a.Capacity())
	if err != nil {
		t.Fatal(err)
	}
	b := h.Bytes()
	for i := 0; i < len(b); i += os.Getpagesize() {
		b[i] = 1
	}
	r, err := a.Residency()
	if runtime.GOOS != "linux" {
		r, err = Residency{Resident: a.Capacity()}, nil // no smaps to read
	}
	if err != nil || r.Resident != a.Capacity() {
		t.Fatalf("residency after touching every page: %+v, %v", r, err)
	}
	if a.Mode() == ModePlain && r.HugePages != 0 && !hugepage.THPEnabled() && !hugepage.ShmemTHPEnabled() {
		t.Fatalf("plain arena on huge pages: %+v", r)
	}
	t.Logf("mode %v residency %+v", a.Mode(), r)
	if err := h.Release(); err != nil {
		t.Fatal(err)
	}
	if _, err := NewArena(Options{Size: 3 << 20, HugePages: HugePagesRequire, Shared: shared}); !errors.Is(err, ErrHugePagesUnavailable) || !errors.Is(err, base.ErrNotSupported) {
		t.Fatalf("Require without reserved pages: %v", err)
	}
}

func TestArenaErrors(t *testing.T) { sharings(t, testArenaErrors) }

func testArenaErrors(t *testing.T, shared bool) {
	a := newTestArena(t, Options{Size: 64 << 10, HugePages: HugePagesOff, Shared: shared})
	for _, sz := range []int64{0, -1, -1 << 62} {
		if _, err := a.Alloc(sz); !errors.Is(err, ErrInvalidSize) || !errors.Is(err, base.ErrInvalidParams) {
			t.Fatalf("Alloc(%d): %v", sz, err)
		}
	}
	if _, err := a.Alloc(a.Capacity() + 1); !errors.Is(err, ErrTooLarge) || !errors.Is(err, base.ErrTooLarge) {
		t.Fatalf("oversized: %v", err)
	}
	h, err := a.Alloc(a.Capacity() - 100)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.Alloc(1024); !errors.Is(err, ErrArenaFull) || !errors.Is(err, base.ErrNoSpace) {
		t.Fatalf("full: %v", err)
	}
	if err := h.Retain(); err != nil {
		t.Fatal(err)
	}
	if err := h.Release(); err != nil {
		t.Fatal(err)
	}
	misuse(t, ErrLiveHandles, a.Close)
	if err := h.Release(); err != nil {
		t.Fatal(err)
	}
	misuse(t, ErrReleased, h.Release)
	misuse(t, ErrReleased, h.Retain)
	misuse(t, ErrForeignHandle, (&Handle{}).Release)
	misuse(t, ErrForeignHandle, (*Handle)(nil).Release)
	if s := a.Stats(); s.LiveAllocs != 0 || s.Used != 0 {
		t.Fatalf("misuse changed the accounting: %+v", s)
	}

	for _, o := range []Options{{}, {Size: -5}, {Size: 1 << 20, Alignment: 48}, {Size: 1 << 20, HugePages: 9}} {
		o.Shared = shared
		if _, err := NewArena(o); !errors.Is(err, base.ErrInvalidParams) {
			t.Fatalf("NewArena(%+v): %v", o, err)
		}
	}
}

func TestArenaCloseLive(t *testing.T) { sharings(t, testArenaCloseLive) }

func testArenaCloseLive(t *testing.T, shared bool) {
	a, err := NewArena(Options{Size: 64 << 10, HugePages: HugePagesOff, Shared: shared})
	if err != nil {
		t.Fatal(err)
	}
	h, err := a.Alloc(4096)
	if err != nil {
		t.Fatal(err)
	}
	misuse(t, ErrLiveHandles, a.Close)
	// The arena stayed open: the handle is still usable.
	h.Bytes()[0] = 1
	if err := h.Release(); err != nil {
		t.Fatal(err)
	}
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	if err := a.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if _, err := a.Alloc(10); !errors.Is(err, ErrClosed) || !errors.Is(err, base.ErrClosed) {
		t.Fatalf("Alloc after Close: %v", err)
	}
}

func TestParseHugePages(t *testing.T) {
	for _, h := range []HugePages{HugePagesAuto, HugePagesOff, HugePagesRequire} {
		got, err := ParseHugePages(h.String())
		if err != nil || got != h {
			t.Fatalf("%v: %v %v", h, got, err)
		}
	}
	if _, err := ParseHugePages("sometimes"); !errors.Is(err, base.ErrInvalidParams) {
		t.Fatal(err)
	}
	for m, s := range map[Mode]string{ModePlain: "plain", ModeTHP: "thp", ModeHugeTLB: "hugetlb"} {
		if m.String() != s {
			t.Fatalf("%d: %q", m, m.String())
		}
	}
}

// TestArenaPrefault: with Options.Prefault every page of the arena is resident as soon as
// NewArena returns, before anything is allocated or written; without it none is.
func TestArenaPrefault(t *testing.T) { sharings(t, testArenaPrefault) }

func testArenaPrefault(t *testing.T, shared bool) {
	if runtime.GOOS != "linux" {
		t.Skip("residency comes from /proc/self/smaps")
	}
	for _, prefault := range []bool{false, true} {
		a, err := NewArena(Options{Size: 8 << 20, HugePages: HugePagesOff, Shared: shared, Prefault: prefault})
		if err != nil {
			t.Fatal(err)
		}
		r, err := a.Residency()
		if err != nil {
			t.Fatal(err)
		}
		want := int64(0)
		if prefault {
			want = a.Capacity()
		}
		if r.Resident != want {
			t.Errorf("prefault %v: %d bytes resident, want %d", prefault, r.Resident, want)
		}
		if err := a.Close(); err != nil {
			t.Fatal(err)
		}
	}
}
