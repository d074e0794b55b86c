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
	mem, err := mapPeerFile(peerFile{what: "arena", bootID: info.BootID, pid: info.PID, fd: info.FD,
		inode: info.Inode, dev: info.Dev, size: info.Size})
	if err != nil {
		return nil, err
	}
	a := &SharedArena{info: *info, mapping: mapping{mem: mem, fd: -1, refs: 1}}
	if info.GenSize == ShmGenSlots*8 {
		// Optional: without it every read pins (the caller checks Gen's ok).
		a.gen, _ = mapPeerFile(peerFile{what: "copy generations", bootID: info.BootID, pid: info.PID, fd: info.GenFD,
			inode: info.GenInode, dev: info.GenDev, size: info.GenSize})
	}
	return a, nil
}

// peerFile names a file another process on this host holds open (a worker's arena or
// staging area) as that process described it.
type peerFile struct {
	what       string // for errors: "arena", "staging area"
	bootID     string
	pid, fd    int64
	inode, dev uint64
	size       int64
	write      bool // map it read-write (a staging area), else read-only
}

// mapPeerFile opens /proc/<pid>/fd/<fd>, checks it is the file f describes and maps it whole.
// Any mismatch is an error wrapping base.ErrNotSupported.
func mapPeerFile(f peerFile) ([]byte, error) {
	if bid := BootID(); bid == "" || f.bootID != bid {
		return nil, fmt.Errorf("%w: worker runs on another host (boot id %q, ours %q)", base.ErrNotSupported, f.bootID, bid)
	}
	if f.size <= 0 || f.size > 1<<46 || f.pid <= 0 || f.fd < 0 || f.fd > 1<<31 {
		return nil, fmt.Errorf("%w: shared %s description out of range (pid %d, fd %d, size %d)", base.ErrNotSupported, f.what, f.pid, f.fd, f.size)
	}
	path := "/proc/" + strconv.FormatInt(f.pid, 10) + "/fd/" + strconv.FormatInt(f.fd, 10)
	flags, prot := unix.O_RDONLY, unix.PROT_READ
	if f.write {
		flags, prot = unix.O_RDWR, unix.PROT_READ|unix.PROT_WRITE
	}
	fd, err := unix.Open(path, flags|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("%w: opening the worker's %s %s: %v", base.ErrNotSupported, f.what, path, err)
	}
	defer unix.Close(fd) // the mapping keeps the file alive
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return nil, fmt.Errorf("%w: fstat %s: %v", base.ErrNotSupported, path, err)
	}
	if st.Ino != f.inode || uint64(st.Dev) != f.dev || st.Size != f.size {
		return nil, fmt.Errorf("%w: %s is not the worker's %s (inode %d dev %d size %d, want %d %d %d)",
			base.ErrNotSupported, path, f.what, st.Ino, st.Dev, st.Size, f.inode, f.dev, f.size)
	}
	// No MAP_POPULATE: on a memfd it would allocate every page the worker has not touched
	// yet. The first copy of each range takes minor faults instead.
	mem, err := unix.Mmap(fd, 0, int(f.size), prot, unix.MAP_SHARED)
	if err != nil {
		return nil, fmt.Errorf("%w: mapping the worker's %s (%d bytes): %v", base.ErrNotSupported, f.what, f.size, err)
	}
	return mem, nil
}

// NewStagingArea creates a staging area of size bytes for one client (a worker's side of
// ShmPutOpen): a memfd mapped read-only here, which the client maps read-write. Pages are
// allocated as the client first writes them. Errors wrap base.ErrNotSupported.
func NewStagingArea(size int64) (*StagingArea, error) {
	bid := BootID()
	if bid == "" {
		return nil, fmt.Errorf("%w: cannot read the kernel boot id", base.ErrNotSupported)
	}
	if size <= 0 || size > 1<<40 {
		return nil, fmt.Errorf("%w: staging area of %d bytes", base.ErrInvalidParams, size)
	}
	fd, err := unix.MemfdCreate("mooncake-staging", unix.MFD_CLOEXEC)
	if err != nil {
		return nil, fmt.Errorf("%w: memfd_create: %v", base.ErrNotSupported, err)
	}
	var st unix.Stat_t
	if err = unix.Ftruncate(fd, size); err == nil {
		err = unix.Fstat(fd, &st)
	}
	var mem []byte
	if err == nil {
		mem, err = unix.Mmap(fd, 0, int(size), unix.PROT_READ, unix.MAP_SHARED)
	}
	if err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("%w: staging area of %d bytes: %v", base.ErrNotSupported, size, err)
	}
	return &StagingArea{
		info:    ShmPutOpenResponse{BootID: bid, PID: int64(os.Getpid()), FD: int64(fd), Inode: st.Ino, Dev: uint64(st.Dev), Size: size},
		mapping: mapping{mem: mem, fd: fd, refs: 1},
	}, nil
}

// MapStagingArea maps, read-write, the staging area a worker on this host described in its
// ShmPutOpen answer, with MapSharedArena's checks. Errors wrap base.ErrNotSupported.
func MapStagingArea(info *ShmPutOpenResponse) (*StagingArea, error) {
	mem, err := mapPeerFile(peerFile{what: "staging area", bootID: info.BootID, pid: info.PID, fd: info.FD,
		inode: info.Inode, dev: info.Dev, size: info.Size, write: true})
	if err != nil {
		return nil, err
	}
	return &StagingArea{info: *info, mapping: mapping{mem: mem, fd: -1, refs: 1}}, nil
}

func (a *mapping) unmap() {
	if a.mem != nil {
		_ = unix.Munmap(a.mem)
		a.mem = nil
	}
	if a.gen != nil {
		_ = unix.Munmap(a.gen)
		a.gen = nil
	}
	if a.fd >= 0 {
		_ = unix.Close(a.fd)
		a.fd = -1
	}
}

// NewShmGenTable creates a worker's copy-generation table in a memfd ("mooncake-shm-gen").
func NewShmGenTable() (*ShmGenTable, error) {
	fd, err := unix.MemfdCreate("mooncake-shm-gen", unix.MFD_CLOEXEC)
	if err != nil {
		return nil, fmt.Errorf("%w: memfd_create: %v", base.ErrNotSupported, err)
	}
	size := ShmGenSlots * 8
	var st unix.Stat_t
	if err = unix.Ftruncate(fd, int64(size)); err == nil {
		err = unix.Fstat(fd, &st)
	}
	var mem []byte
	if err == nil {
		mem, err = unix.Mmap(fd, 0, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	}
	if err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("%w: copy-generation table: %v", base.ErrNotSupported, err)
	}
	return &ShmGenTable{mapping: mapping{mem: mem, fd: fd, refs: 1}, ino: st.Ino, dev: uint64(st.Dev)}, nil
}
