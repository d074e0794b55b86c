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
	if info.Size <= 0 || info.Size > 1<<46 || info.PID <= 0 || info.FD < 0 || info.FD > 1<<31 {
		return nil, fmt.Errorf("%w: shared arena description out of range (pid %d, fd %d, size %d)", base.ErrNotSupported, info.PID, info.FD, info.Size)
	}
	path := "/proc/" + strconv.FormatInt(info.PID, 10) + "/fd/" + strconv.FormatInt(info.FD, 10)
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("%w: opening the worker's arena %s: %v", base.ErrNotSupported, path, err)
	}
	defer unix.Close(fd) // the mapping keeps the file alive
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return nil, fmt.Errorf("%w: fstat %s: %v", base.ErrNotSupported, path, err)
	}
	if st.Ino != info.Inode || uint64(st.Dev) != info.Dev || st.Size != info.Size {
		return nil, fmt.Errorf("%w: %s is not the worker's arena (inode %d dev %d size %d, want %d %d %d)",
			base.ErrNotSupported, path, st.Ino, st.Dev, st.Size, info.Inode, info.Dev, info.Size)
	}
	// No MAP_POPULATE: on a memfd it would allocate every page of the arena the worker has
	// not touched yet. The first copy of each range takes minor faults instead.
	mem, err := unix.Mmap(fd, 0, int(info.Size), unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		return nil, fmt.Errorf("%w: mapping the worker's arena (%d bytes): %v", base.ErrNotSupported, info.Size, err)
	}
	return &SharedArena{info: *info, mem: mem, refs: 1}, nil
}

func (a *SharedArena) unmap() {
	if a.mem != nil {
		_ = unix.Munmap(a.mem)
		a.mem = nil
	}
}
