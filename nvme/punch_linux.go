//go:build linux

package nvme

import (
	"github.com/cockroachdb/pebble/v2/vfs"
	"golang.org/x/sys/unix"
)

// punchHole deallocates [off, off+n) of f, keeping its size: reads of the range return
// zeros and its blocks are free on the filesystem at once (ext4, xfs, btrfs, tmpfs).
func punchHole(f vfs.File, off, n int64) error {
	fd := f.Fd()
	if fd == vfs.InvalidFd {
		return errNoFd
	}
	return unix.Fallocate(int(fd), unix.FALLOC_FL_PUNCH_HOLE|unix.FALLOC_FL_KEEP_SIZE, off, n)
}
