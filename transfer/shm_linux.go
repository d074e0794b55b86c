//go:build linux

package transfer

import (
	"bytes"
	"fmt"
	"os"
	"strconv"
	"sync"

	"golang.org/x/sys/unix"

	"github.com/mooncake-go/mooncake/internal/base"
)

// bootID is this kernel's boot id, read once ("" when unreadable: then nothing is shared).
var bootID = sync.OnceValue(func() string {
	b, err := os.ReadFile("/proc/sys/kernel/random/boot_id")
	if err != nil {
		return ""
	}
	return string(bytes.TrimSpace(b))
})

// BootID returns the kernel's boot id (/proc/sys/kernel/random/boot_id), which a worker puts
// in its ShmOpen answer; "" when it cannot be read.
func BootID() string { return bootID() }

// MapSharedArena maps the arena info describes, read-only, when its worker runs on this host:
// same kernel boot id, /proc/<pid>/fd/<fd> opens (the same uid as the worker, or root: the
// kernel's ptrace read check), and the file there is the inode, device and size the worker
// reported (so a reused pid or a worker in another pid namespace is never mistaken for it).
// Any mismatch is an error wrapping base.ErrNotSupported: the caller reads over TCP instead.
func MapSharedArena(info *ShmOpenResponse) (*SharedArena, error) {
	if bid := BootID(); bid == "" || info.BootID != bid {
		return nil, fmt.Errorf("%w: worker runs on another host (boot id %q, ours %q)", base.ErrNotSupported, info.BootID, bid)
	}
	mem, err := mapProcFD(info, "arena")
	if err != nil {
		return nil, err
	}
	a := &SharedArena{info: *info, mem: mem, refs: 1}
	if info.GenSize == ShmGenSlots*8 {
		// Optional: without it every read pins (the caller checks Gen's ok).
		gi := ShmOpenResponse{BootID: info.BootID, PID: info.PID, FD: info.GenFD, Inode: info.GenInode, Dev: info.GenDev, Size: info.GenSize}
		a.gen, _ = mapProcFD(&gi, "copy generations")
	}
	return a, nil
}

// mapProcFD maps the file of another process on this host read-only, checked as
// MapSharedArena checks the arena's.
func mapProcFD(info *ShmOpenResponse, what string) ([]byte, error) {
	if info.Size <= 0 || info.Size > 1<<46 || info.PID <= 0 || info.FD < 0 || info.FD > 1<<31 {
		return nil, fmt.Errorf("%w: worker's %s out of range (pid %d, fd %d, size %d)", base.ErrNotSupported, what, info.PID, info.FD, info.Size)
	}
	path := "/proc/" + strconv.FormatInt(info.PID, 10) + "/fd/" + strconv.FormatInt(info.FD, 10)
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("%w: opening the worker's %s %s: %v", base.ErrNotSupported, what, path, err)
	}
	defer unix.Close(fd) // the mapping keeps the file alive
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return nil, fmt.Errorf("%w: fstat %s: %v", base.ErrNotSupported, path, err)
	}
	if st.Ino != info.Inode || uint64(st.Dev) != info.Dev || st.Size != info.Size {
		return nil, fmt.Errorf("%w: %s is not the worker's %s (inode %d dev %d size %d, want %d %d %d)",
			base.ErrNotSupported, path, what, st.Ino, st.Dev, st.Size, info.Inode, info.Dev, info.Size)
	}
	// No MAP_POPULATE: on a memfd it would allocate every page the worker has not touched
	// yet. The first copy of each range takes minor faults instead.
	mem, err := unix.Mmap(fd, 0, int(info.Size), unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		return nil, fmt.Errorf("%w: mapping the worker's %s (%d bytes): %v", base.ErrNotSupported, what, info.Size, err)
	}
	return mem, nil
}

func (a *SharedArena) unmap() {
	if a.mem != nil {
		_ = unix.Munmap(a.mem)
		a.mem = nil
	}
	if a.gen != nil {
		_ = unix.Munmap(a.gen)
		a.gen = nil
	}
}

// NewShmGenTable creates a worker's copy-generation table in a memfd ("mooncake-shm-gen").
// The caller Closes it after the last Bump (after the tier engine closed).
func NewShmGenTable() (*ShmGenTable, error) {
	fd, err := unix.MemfdCreate("mooncake-shm-gen", unix.MFD_CLOEXEC)
	if err != nil {
		return nil, fmt.Errorf("transfer: memfd for copy generations: %w", err)
	}
	size := ShmGenSlots * 8
	var st unix.Stat_t
	var mem []byte
	if err = unix.Ftruncate(fd, int64(size)); err == nil {
		if err = unix.Fstat(fd, &st); err == nil {
			mem, err = unix.Mmap(fd, 0, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
		}
	}
	if err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("transfer: copy generations table: %w", err)
	}
	return &ShmGenTable{mem: mem, fd: fd, ino: st.Ino, dev: uint64(st.Dev)}, nil
}

// Close unmaps the table and closes its file (clients' mappings keep it alive for them).
func (t *ShmGenTable) Close() error {
	var err error
	t.closeOnce.Do(func() {
		err = unix.Munmap(t.mem)
		t.mem = nil
		if cerr := unix.Close(t.fd); err == nil {
			err = cerr
		}
	})
	return err
}
