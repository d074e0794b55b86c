package dram

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"testing"

	"golang.org/x/sys/unix"
)

// peerMap maps a shared arena the way a client on the same host does (see mapPeer); the
// mapping is unmapped at the end of the test.
func peerMap(t testing.TB, si ShareInfo) []byte {
	t.Helper()
	m, unmap := mapPeer(t, si)
	t.Cleanup(unmap)
	return m
}

// mapPeer opens /proc/<pid>/fd/<FD> read-only, checks st_ino/st_dev/st_size against si and
// mmaps it PROT_READ, MAP_SHARED, as a client does. It returns the mapping and its unmapping.
func mapPeer(t testing.TB, si ShareInfo) ([]byte, func()) {
	t.Helper()
	f, err := os.OpenFile(fmt.Sprintf("/proc/%d/fd/%d", os.Getpid(), si.FD), os.O_RDONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var st unix.Stat_t
	if err := unix.Fstat(int(f.Fd()), &st); err != nil {
		t.Fatal(err)
	}
	if uint64(st.Ino) != si.Inode || uint64(st.Dev) != si.Dev || st.Size != si.Size {
		t.Fatalf("fstat ino %d dev %d size %d, Share says %+v", st.Ino, st.Dev, st.Size, si)
	}
	m, err := unix.Mmap(int(f.Fd()), 0, int(si.Size), unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		t.Fatal(err)
	}
	return m, func() {
		if err := unix.Munmap(m); err != nil {
			t.Error(err)
		}
	}
}

func TestShare(t *testing.T) {
	anon := newTestArena(t, Options{Size: 1 << 20, HugePages: HugePagesOff})
	if si, ok := anon.Share(); ok || si != (ShareInfo{}) {
		t.Fatalf("anonymous arena: Share %+v %v", si, ok)
	}
	for _, hp := range []HugePages{HugePagesOff, HugePagesAuto} {
		t.Run(hp.String(), func(t *testing.T) { testShare(t, hp) })
	}
}

func testShare(t *testing.T, hp HugePages) {
	a, err := NewArena(Options{Size: 3<<20 + 1000, HugePages: hp, Shared: true})
	if err != nil {
		t.Fatal(err)
	}
	si, ok := a.Share()
	if !ok || si.FD < 0 || si.ID == 0 || si.Size < a.Capacity() || si.Size != int64(len(a.region.Mem)) {
		t.Fatalf("Share %+v %v (capacity %d)", si, ok, a.Capacity())
	}
	t.Logf("mode %v share %+v capacity %d", a.Mode(), si, a.Capacity())
	peer := peerMap(t, si)

	// Bytes written through handles are at their Offset in the peer's mapping.
	var hs []*Handle
	for i, n := range []int64{1, 4095, 64 << 10, 1 << 20, 100_000} {
		h, err := a.Alloc(n)
		if err != nil {
			t.Fatal(err)
		}
		b := h.Bytes()
		if &b[0] != &a.mem[h.Offset()] {
			t.Fatalf("Bytes() at %p is not arena.mem[%d] at %p", &b[0], h.Offset(), &a.mem[h.Offset()])
		}
		fill(b, byte(0x10+i))
		hs = append(hs, h)
	}
	for i, h := range hs {
		if err := checkFill(peer[h.Offset():h.Offset()+h.Len()], byte(0x10+i)); err != nil {
			t.Fatalf("peer view of handle %d at offset %d: %v", i, h.Offset(), err)
		}
		// And a later write is seen too (the same pages, not a copy made at mmap).
		h.Bytes()[0] ^= 0xFF
		if peer[h.Offset()] != h.Bytes()[0] {
			t.Fatalf("peer does not see a write at offset %d", h.Offset())
		}
	}
	for _, h := range hs {
		if err := h.Release(); err != nil {
			t.Fatal(err)
		}
	}

	// Another arena has another ID and another file.
	b := newTestArena(t, Options{Size: 1 << 20, HugePages: HugePagesOff, Shared: true})
	sb, _ := b.Share()
	if sb.ID == si.ID || sb.Inode == si.Inode || sb.FD == si.FD {
		t.Fatalf("two arenas share an identity: %+v and %+v", si, sb)
	}

	// The peer's mapping outlives the arena: Close closes the fd and unmaps this process's
	// view, the pages stay until the peer unmaps.
	before := bytes.Clone(peer)
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := unix.FcntlInt(uintptr(si.FD), unix.F_GETFD, 0); !errors.Is(err, unix.EBADF) {
		t.Fatalf("fd %d still open after Close: %v", si.FD, err)
	}
	if si2, ok := a.Share(); ok {
		t.Fatalf("Share after Close: %+v", si2)
	}
	if !bytes.Equal(peer, before) {
		t.Fatal("peer mapping changed after Close")
	}
}

// TestShareReadOnly: a peer that opens the memfd for writing cannot write, map it writable,
// or resize it (a shrink would SIGBUS the worker).
func TestShareReadOnly(t *testing.T) {
	a := newTestArena(t, Options{Size: 1 << 20, HugePages: HugePagesOff, Shared: true})
	si, _ := a.Share()
	f, err := os.OpenFile(fmt.Sprintf("/proc/self/fd/%d", si.FD), os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := f.Truncate(4096); !errors.Is(err, unix.EPERM) {
		t.Fatalf("shrinking the arena's memfd: %v", err)
	}
	if err := f.Truncate(si.Size * 2); !errors.Is(err, unix.EPERM) {
		t.Fatalf("growing the arena's memfd: %v", err)
	}
	seals, err := unix.FcntlInt(uintptr(si.FD), unix.F_GET_SEALS, 0)
	if err != nil {
		t.Fatal(err)
	}
	if seals&unix.F_SEAL_FUTURE_WRITE == 0 {
		t.Skipf("kernel without F_SEAL_FUTURE_WRITE (seals %#x): peers of the same uid could write", seals)
	}
	if _, err := f.WriteAt([]byte("x"), 0); !errors.Is(err, unix.EPERM) {
		t.Fatalf("write through a peer fd: %v", err)
	}
	if m, err := unix.Mmap(int(f.Fd()), 0, 4096, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED); err == nil {
		_ = unix.Munmap(m)
		t.Fatal("a peer got a writable shared mapping")
	}
	// The owner still writes through its own mapping.
	h, err := a.Alloc(10)
	if err != nil {
		t.Fatal(err)
	}
	copy(h.Bytes(), "0123456789")
	if err := h.Release(); err != nil {
		t.Fatal(err)
	}
}
