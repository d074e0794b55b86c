package nvme

import (
	"errors"
	"fmt"
	"slices"
	"sync"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
)

// Reclaiming dead records by punching holes.
//
// A record dies when the index stops pointing at it: a Delete, an overwrite, a GC copy that
// replaced it, a write that failed or whose index commit lost a race, and, found at Open, the
// space between the live records of an extent (torn tails, writes whose commit never
// happened). When the filesystem supports it (Store.punch), dead ranges are queued by addDead
// and punched out by reclaim:
//
//  1. sync the index, so that no index entry a restart could read points into a range
//     about to become a hole, whatever the sync policy;
//  2. under punchMu held exclusively (no reader is between its index lookup and the end of
//     its extent read), fallocate(PUNCH_HOLE) each range and take it off the bytes used.
//
// Freeing space this way needs no free space (nothing is copied), works on the extent being
// written as on sealed ones, and happens within moments of the Delete: the background loop
// runs reclaim whenever a range is queued, and a write that finds the store full runs it
// inline before giving up. GC then only deletes extents with no live record left.

// deadRange is a dead record (or run of them) of extent e: [off, off+n), block-aligned.
type deadRange struct {
	e      *extent
	off, n int64
}

// deadQueue holds the dead ranges not yet punched.
type deadQueue struct {
	mu     sync.Mutex
	ranges []deadRange
}

// addDead queues [off, off+n) of e to be punched out and wakes the background loop. It does
// no I/O and takes no lock but the queue's, so it may be called with any lock held. Without
// hole punching it does nothing (the range stays dead space for GC).
func (s *Store) addDead(e *extent, off, n int64) {
	if !s.punch || n <= 0 {
		return
	}
	s.dead.mu.Lock()
	s.dead.ranges = append(s.dead.ranges, deadRange{e: e, off: off, n: n})
	s.dead.mu.Unlock()
	s.kickBackground()
}

// addDeadGaps queues the space of e not covered by the live records in spans (offset,
// length), after the header block: Open's dead space.
func (s *Store) addDeadGaps(e *extent, spans [][2]int64) {
	slices.SortFunc(spans, func(a, b [2]int64) int { return int(a[0] - b[0]) })
	pos := int64(blockSize)
	for _, sp := range spans {
		if sp[0] > pos {
			s.addDead(e, pos, sp[0]-pos)
		}
		pos = max(pos, sp[0]+sp[1])
	}
	if end := e.size.Load(); end > pos {
		s.addDead(e, pos, end-pos)
	}
}

// kickBackground wakes the background loop (reclaim, then GC) without blocking.
func (s *Store) kickBackground() {
	select {
	case s.gcKick <- struct{}{}:
	default:
	}
}

// reclaim punches out the queued dead ranges (the steps are listed above) and returns the
// bytes freed. Calls are serialized: a caller that waited for another's reclaim finds the
// queue empty and returns at once, after the space was freed.
func (s *Store) reclaim() (int64, error) {
	s.reclaimMu.Lock()
	defer s.reclaimMu.Unlock()
	s.dead.mu.Lock()
	rs := s.dead.ranges
	s.dead.ranges = nil
	s.dead.mu.Unlock()
	if len(rs) == 0 {
		return 0, nil
	}
	// 1. The index changes that killed these records become durable first.
	if err := s.db.LogData(nil, pebble.Sync); err != nil {
		s.dead.mu.Lock()
		s.dead.ranges = append(rs, s.dead.ranges...)
		s.dead.mu.Unlock()
		return 0, fmt.Errorf("nvme: reclaim: sync index: %w", err)
	}
	slices.SortFunc(rs, func(a, b deadRange) int {
		if a.e.id != b.e.id {
			if a.e.id < b.e.id {
				return -1
			}
			return 1
		}
		return int(a.off - b.off)
	})
	// 2. Punch, with no reader inside a record.
	s.punchMu.Lock()
	defer s.punchMu.Unlock()
	var freed int64
	var errs []error
	for i := 0; i < len(rs); {
		j := i + 1
		for j < len(rs) && rs[j].e == rs[i].e {
			j++
		}
		n, err := s.punchExtent(rs[i].e, rs[i:j])
		freed += n
		if err != nil {
			// The ranges stay dead space; the extent goes once nothing in it is live.
			errs = append(errs, err)
			s.log.Error("nvme: cannot punch dead records out of an extent", "extent", rs[i].e.id, "err", err)
		}
		i = j
	}
	s.m.punched.Add(freed)
	return freed, errors.Join(errs...)
}

// punchExtent punches rs (all of e, sorted by offset) and returns the bytes freed.
// REQUIRES: s.punchMu held exclusively (GC's deletion of extents holds it too, so e is not
// deleted meanwhile and its bytes are taken off once).
func (s *Store) punchExtent(e *extent, rs []deadRange) (int64, error) {
	s.mu.Lock()
	removed := e.removed
	s.mu.Unlock()
	if removed {
		return 0, nil // GC deleted the file; its bytes went with it
	}
	f, err := s.fs.OpenReadWrite(e.path, vfs.WriteCategoryUnspecified)
	if err != nil {
		return 0, ioErr(fmt.Sprintf("open extent %d to punch", e.id), err)
	}
	defer f.Close()
	var freed int64
	for k := 0; k < len(rs); {
		off, end := rs[k].off, rs[k].off+rs[k].n
		for k++; k < len(rs) && rs[k].off <= end; k++ {
			end = max(end, rs[k].off+rs[k].n) // adjacent records: one call
		}
		if err := punchHole(f, off, end-off); err != nil {
			err = ioErr(fmt.Sprintf("punch extent %d at %d+%d", e.id, off, end-off), err)
			e.punched.Add(freed)
			s.m.extentBytes.Add(-freed)
			return freed, err
		}
		freed += end - off
	}
	e.punched.Add(freed)
	s.m.extentBytes.Add(-freed)
	return freed, nil
}

// probePunch decides hole punching: unless Options.DisableHolePunch, a probe file in the
// extent directory must accept a punch (an OS file on a filesystem that supports it).
func (s *Store) probePunch() bool {
	if s.opts.DisableHolePunch {
		return false
	}
	path := s.fs.PathJoin(s.extDir, "punch-probe")
	f, err := s.fs.Create(path, vfs.WriteCategoryUnspecified)
	if err != nil {
		s.log.Info("nvme: no hole punching: cannot create the probe", "err", err)
		return false
	}
	defer s.fs.Remove(path)
	defer f.Close()
	b := getBuf(2 * blockSize)
	defer putBuf(b)
	clear(b)
	if _, err := f.WriteAt(b, 0); err != nil {
		s.log.Info("nvme: no hole punching: cannot write the probe", "err", err)
		return false
	}
	if err := punchHole(f, 0, blockSize); err != nil {
		s.log.Info("nvme: no hole punching: the filesystem refuses it; GC copies live records instead", "err", err)
		return false
	}
	return true
}
