package hugepage

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// mapPeer opens r's memfd the way a client on the same host does (/proc/<pid>/fd/<FD>,
// read-only) and maps it PROT_READ, MAP_SHARED. The mapping is unmapped at the end of the test.
func mapPeer(t *testing.T, r Region) []byte {
	t.Helper()
	f, err := os.OpenFile(fmt.Sprintf("/proc/self/fd/%d", r.FD), os.O_RDONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	m, err := unix.Mmap(int(f.Fd()), 0, len(r.Mem), unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := unix.Munmap(m); err != nil {
			t.Error(err)
		}
	})
	return m
}

func TestMapShared(t *testing.T) {
	const size = 4 * HugePageSize
	for _, tc := range []struct {
		name string
		mapf func() (Region, error)
	}{
		{"plain", func() (Region, error) { return MapSharedPlain(size) }},
		{"thp-if-allowed", func() (Region, error) { return MapShared(size, false) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, err := tc.mapf()
			if err != nil {
				t.Fatal(err)
			}
			if r.FD < 0 || len(r.Mem) != size {
				t.Fatalf("fd %d len %d", r.FD, len(r.Mem))
			}
			want := KindPlain
			if tc.name != "plain" && ShmemTHPEnabled() {
				want = KindTHP
			}
			if r.Kind != want {
				t.Fatalf("kind %d, want %d (shmem THP enabled: %v)", r.Kind, want, ShmemTHPEnabled())
			}
			if r.Kind == KindTHP && uintptrOf(r.Mem)%HugePageSize != 0 {
				t.Fatalf("THP mapping at %#x is not 2 MiB aligned", uintptrOf(r.Mem))
			}
			peer := mapPeer(t, r)
			for off := 0; off < size; off += int(PageSize()) {
				r.Mem[off] = byte(off>>12) | 1
			}
			if !bytes.Equal(peer, r.Mem) {
				t.Fatal("the peer mapping does not see the bytes written")
			}
			checkSealed(t, r.FD)
			res, err := ResidencyOf(r.Mem)
			if err != nil || res.Resident != size {
				t.Fatalf("residency after touching every page: %+v, %v", res, err)
			}
			t.Logf("kind %d residency %+v", r.Kind, res)
			fd := r.FD
			if err := Unmap(r); err != nil {
				t.Fatal(err)
			}
			if _, err := unix.FcntlInt(uintptr(fd), unix.F_GETFD, 0); !errors.Is(err, unix.EBADF) {
				t.Fatalf("fd %d still open after Unmap: %v", fd, err)
			}
		})
	}
	if _, err := MapShared(HugePageSize+1, false); err == nil {
		t.Fatal("unaligned size accepted")
	}
	if _, err := MapShared(HugePageSize+int64(PageSize()), true); err == nil {
		t.Fatal("hugetlb size that is not a multiple of 2 MiB accepted")
	}
	if err := Unmap(Region{}); err != nil {
		t.Fatalf("Unmap of the zero Region: %v", err)
	}
}

// checkSealed: nobody who opens the memfd through /proc can resize it (which would SIGBUS the
// owner) or, on kernels with F_SEAL_FUTURE_WRITE, write to it.
func checkSealed(t *testing.T, fd int) {
	t.Helper()
	seals, err := unix.FcntlInt(uintptr(fd), unix.F_GET_SEALS, 0)
	if err != nil {
		t.Fatal(err)
	}
	if want := unix.F_SEAL_SHRINK | unix.F_SEAL_GROW | unix.F_SEAL_SEAL; seals&want != want {
		t.Fatalf("seals %#x, want at least %#x", seals, want)
	}
	f, err := os.OpenFile(fmt.Sprintf("/proc/self/fd/%d", fd), os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := f.Truncate(0); !errors.Is(err, unix.EPERM) {
		t.Fatalf("shrinking a sealed memfd: %v", err)
	}
	if seals&unix.F_SEAL_FUTURE_WRITE == 0 {
		t.Logf("kernel without F_SEAL_FUTURE_WRITE: peers could write (seals %#x)", seals)
		return
	}
	if _, err := f.WriteAt([]byte{1}, 0); !errors.Is(err, unix.EPERM) {
		t.Fatalf("write through a second fd: %v", err)
	}
	if m, err := unix.Mmap(int(f.Fd()), 0, int(PageSize()), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED); err == nil {
		_ = unix.Munmap(m)
		t.Fatal("a second writable shared mapping was allowed")
	}
}

// TestMapSharedTHP switches shmem THP to advise (as root; restored afterwards) so the THP
// path of MapShared and ResidencyOf's ShmemPmdMapped accounting run even on machines
// configured [never].
func TestMapSharedTHP(t *testing.T) {
	const path = "/sys/kernel/mm/transparent_hugepage/shmem_enabled"
	old, err := os.ReadFile(path)
	if err != nil {
		t.Skipf("shmem THP path not tested: %v", err)
	}
	if !ShmemTHPEnabled() {
		if os.Geteuid() != 0 {
			t.Skipf("shmem THP path not tested: %s is %q and only root may change it", path, strings.TrimSpace(string(old)))
		}
		cur := string(old[strings.IndexByte(string(old), '[')+1 : strings.IndexByte(string(old), ']')])
		if err := os.WriteFile(path, []byte("advise"), 0); err != nil {
			t.Skipf("shmem THP path not tested: writing %s: %v", path, err)
		}
		t.Cleanup(func() {
			if err := os.WriteFile(path, []byte(cur), 0); err != nil {
				t.Errorf("restoring %s to %s: %v", path, cur, err)
			}
		})
		if !ShmemTHPEnabled() {
			t.Skipf("shmem THP path not tested: still disabled after writing advise (per-size control?)")
		}
	}
	const size = 8 * HugePageSize
	r, err := MapShared(size, false)
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := Unmap(r); err != nil {
			t.Fatal(err)
		}
	}()
	if r.Kind != KindTHP || uintptrOf(r.Mem)%HugePageSize != 0 {
		t.Fatalf("kind %d at %#x, want an aligned THP mapping", r.Kind, uintptrOf(r.Mem))
	}
	for off := 0; off < size; off += int(PageSize()) {
		r.Mem[off] = 1
	}
	res, err := ResidencyOf(r.Mem)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("residency %+v", res)
	// Fault-time huge pages need free 2 MiB blocks; on a fragmented machine the kernel falls
	// back to base pages, so only the accounting's consistency is a hard requirement here.
	if res.Resident != size || res.HugePages > res.Resident || res.HugePages%HugePageSize != 0 {
		t.Fatalf("residency %+v of a fully touched %d-byte THP mapping", res, size)
	}
	if res.HugePages == 0 {
		t.Logf("no huge pages at fault time (memory fragmented?)")
	}
}
