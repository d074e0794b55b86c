package nvme

import (
	"errors"
	"fmt"
	"os"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/mooncake-go/mooncake/internal/base"
)

// The ballast: room kept on the disk for the pebble index.
//
// Pebble cannot go on after a failed WAL write (it panics), and a flush that cannot write
// its sstable stalls every write after it, so the index must never be the one to find the
// disk full. The capacity leaves it headroom, but the disk can still fill from outside the
// store: another tenant of root_fs_dir's filesystem, or a capacity set larger than the disk.
// So:
//
//  1. Open writes a ballast file, <Dir>/ballast, of ballastSize bytes;
//  2. pebble writes through vfs.OnDiskFull: the first of its writes that finds the disk full
//     deletes the ballast and is retried, which gives the index room to go on;
//  3. from then on the store admits no new record (Put fails with ErrNoSpace, GC copies
//     nothing) while deletes, reads and reclaiming go on;
//  4. the background loop recreates the ballast once the disk has room for it twice (removed
//     objects were punched out, or the other tenant freed space), and writes are admitted
//     again.

const ballastName = "ballast"

// ballastSize is room for a WAL rotation (a WAL is preallocated to 110% of the memtable)
// and the flush that goes with it.
func ballastSize(memTable int64) int64 { return 2 * memTable }

// createBallast allocates the ballast file: fallocate where the filesystem has it (ext4,
// xfs and tmpfs allocate the blocks at once, without writing them), else zeros written.
func (s *Store) createBallast() error {
	path := s.fs.PathJoin(s.opts.Dir, ballastName)
	f, err := s.fs.Create(path, vfs.WriteCategoryUnspecified)
	if err != nil {
		return err
	}
	if f.Fd() == vfs.InvalidFd || f.Preallocate(0, s.ballast) != nil {
		buf := getBuf(1 << 20)
		clear(buf)
		for off := int64(0); off < s.ballast && err == nil; off += int64(len(buf)) {
			_, err = f.WriteAt(buf[:min(int64(len(buf)), s.ballast-off)], off)
		}
		putBuf(buf)
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		_ = s.fs.Remove(path)
	}
	return err
}

// onIndexDiskFull is pebble's disk-full callback (vfs.OnDiskFull): pebble's writes wait
// while it runs, then the one that failed is retried.
func (s *Store) onIndexDiskFull() {
	if s.ballastGone.Swap(true) {
		return // already spent: the retry fails and pebble reports it
	}
	err := s.fs.Remove(s.fs.PathJoin(s.opts.Dir, ballastName))
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		s.log.Error("nvme: the disk is full and the index's ballast cannot be removed", "err", err)
		return
	}
	s.log.Error("nvme: the disk is full: the index used its reserve; new objects are refused until the disk has room again",
		"reserve", base.Bytes(s.ballast))
	s.kickBackground()
}

// maybeRestoreBallast recreates a spent ballast when the disk has room for it twice (the
// background loop).
func (s *Store) maybeRestoreBallast() {
	if !s.ballastGone.Load() {
		return
	}
	du, err := s.fs.GetDiskUsage(s.opts.Dir)
	if err != nil || int64(du.AvailBytes) < 2*s.ballast {
		return
	}
	if err := s.createBallast(); err != nil {
		s.log.Warn("nvme: cannot restore the index's reserve yet", "err", err)
		return
	}
	s.ballastGone.Store(false)
	s.log.Info("nvme: the disk has room again: the index's reserve is restored and new objects are admitted",
		"reserve", base.Bytes(s.ballast))
}

// errBallastGone is the reason a write is refused while the ballast is spent.
func (s *Store) errBallastGone() error {
	s.kickBackground()
	return fmt.Errorf("%w: the disk under %s is full (the index used its reserve); new objects are refused until it has room again",
		base.ErrNoSpace, s.opts.Dir)
}
