//go:build linux

package nvme

import (
	"github.com/cockroachdb/pebble/v2/vfs"
	"golang.org/x/sys/unix"
)

// setDirect turns on O_DIRECT for an open file (Linux lets fcntl(F_SETFL) change it). Writes
// through the file must then be aligned to blockSize in memory, offset and length.
func setDirect(f vfs.File) error {
	fd := f.Fd()
	if fd == vfs.InvalidFd {
		return errNoFd
	}
	fl, err := unix.FcntlInt(fd, unix.F_GETFL, 0)
	if err != nil {
		return err
	}
	_, err = unix.FcntlInt(fd, unix.F_SETFL, fl|unix.O_DIRECT)
	return err
}
