package nvme

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/mooncake-go/mooncake/internal/base"
)

// GCStats describes one GC pass.
type GCStats struct {
	ExtentsRemoved int   // extent files deleted
	RecordsMoved   int   // live records copied to the active extent
	BytesMoved     int64 // their aligned length
	BytesReclaimed int64 // extent bytes deleted minus bytes moved
}

// GC reclaims extents. Every sealed extent with no live record left is deleted. Without hole
// punching (Options.DisableHolePunch, or a filesystem without it), GC also rewrites every
// sealed extent whose live ratio is under Options.GCLiveRatio, emptiest first: it copies the
// live records to the active extent, and deletes the old file. (With hole punching, dead
// records are already free: reclaim.go.) The order makes it crash-safe:
//
//  1. copy each live record (verifying its checksum; a corrupt one is quarantined, not copied),
//  2. sync the new copies,
//  3. point the index at the copies (only where it still points at the old record: a Put or
//     Delete that raced with the copy wins), and sync the index,
//  4. delete the old extent file and sync the directory.
//
// A crash before 4 leaves both copies; the index points at one of them and the other is dead
// space for the next GC. Readers holding the old file finish their read (the file is unlinked,
// its descriptor stays valid). The first copy that fails (a full disk) ends the copying for
// this pass, with one log line: extents already emptied are still deleted, and GC never
// needs free space to delete an extent with nothing live. Without hole punching the active
// extent is sealed when it is mostly dead, so that it can be collected too.
//
// GC also runs in the background every Options.GCInterval, after dead records are queued,
// and when a Put finds the store full.
func (s *Store) GC() (GCStats, error) {
	if err := s.enter(); err != nil {
		return GCStats{}, err
	}
	defer s.exit()
	s.gcMu.Lock()
	defer s.gcMu.Unlock()
	return s.gcLocked()
}

// gcVictims picks the extents to collect, emptiest first; it seals a mostly dead active
// extent when GC copies (no hole punching).
func (s *Store) gcVictims() []*extent {
	var seal *extent
	var victims []*extent
	s.mu.Lock()
	if a := s.mu.active; a != nil && !s.punch {
		size, live := a.size.Load(), a.live.Load()
		if size >= s.opts.ExtentSize/4 && float64(live)/float64(size) < s.opts.GCLiveRatio {
			seal = a
		}
	}
	s.mu.Unlock()
	if seal != nil {
		s.sealExtent(seal) // its write handle closes now unless writes are in flight
	}
	s.mu.Lock()
	for _, e := range s.mu.extents {
		if !e.sealed || e.w != nil || e.removed {
			continue // active, or writes still in flight
		}
		size, live := e.size.Load(), e.live.Load()
		if live == 0 || !s.punch && size > 0 && float64(live)/float64(size) < s.opts.GCLiveRatio {
			victims = append(victims, e)
		}
	}
	s.mu.Unlock()
	slices.SortFunc(victims, func(a, b *extent) int {
		ra := float64(a.live.Load()) / float64(a.size.Load())
		rb := float64(b.live.Load()) / float64(b.size.Load())
		return cmp.Compare(ra, rb)
	})
	return victims
}

// gcLocked is one GC pass (see GC): pick the victims, move their live records out (steps
// 1-3), delete the victims left empty (step 4). REQUIRES: s.gcMu, inside enter/exit.
func (s *Store) gcLocked() (GCStats, error) {
	var st GCStats
	victims := s.gcVictims()
	if len(victims) == 0 {
		return st, nil
	}
	byID := make(map[uint64]*extent, len(victims))
	rank := make(map[uint64]int, len(victims))
	anyLive := false
	for i, e := range victims {
		byID[e.id], rank[e.id] = e, i
		anyLive = anyLive || e.live.Load() > 0
	}
	// One pass over the index (none when every victim is empty).
	var recs []gcRecord
	if anyLive {
		var err error
		if recs, err = s.gcLiveRecords(byID, rank); err != nil {
			return st, err
		}
	}
	s.gcMove(recs, byID, &st)
	removedBytes := s.gcRemoveEmpty(victims, &st)
	if st.ExtentsRemoved > 0 {
		if err := s.syncDir(); err != nil {
			return st, ioErr("gc: sync extent directory", err)
		}
		st.BytesReclaimed = removedBytes - st.BytesMoved
		s.m.gcRuns.Add(1)
		s.m.gcReclaimed.Add(st.BytesReclaimed)
		if s.opts.Events.GCEnd != nil {
			s.opts.Events.GCEnd(st)
		}
		s.log.Info("nvme: gc", "extents_removed", st.ExtentsRemoved, "records_moved", st.RecordsMoved,
			"bytes_moved", base.Bytes(st.BytesMoved), "bytes_reclaimed", base.Bytes(st.BytesReclaimed))
	}
	return st, nil
}

// gcRecord is a live record of a GC victim: its key and index entry as GC found them.
type gcRecord struct {
	key string
	ent indexEntry
}

// gcLiveRecords finds the live records of the victims (byID) in the index, ordered by the
// rank of their extent. REQUIRES: s.gcMu.
func (s *Store) gcLiveRecords(byID map[uint64]*extent, rank map[uint64]int) ([]gcRecord, error) {
	var recs []gcRecord
	it, err := s.newObjectIter()
	if err != nil {
		return nil, fmt.Errorf("nvme: gc: %w", err)
	}
	for ok := it.First(); ok; ok = it.Next() {
		val, err := it.ValueAndErr()
		if err != nil {
			it.Close()
			return nil, fmt.Errorf("nvme: gc: %w", err)
		}
		ent, err := decodeIndexEntry(val)
		if err != nil || ent.isInline() || ent.flags&flagQuarantined != 0 || byID[ent.extent] == nil {
			continue
		}
		key, err := decodeIndexKey(it.Key())
		if err != nil {
			continue
		}
		recs = append(recs, gcRecord{key, ent})
	}
	if err := it.Close(); err != nil {
		return nil, fmt.Errorf("nvme: gc: %w", err)
	}
	// Emptiest extents first: they free the most for the bytes moved.
	slices.SortStableFunc(recs, func(a, b gcRecord) int { return cmp.Compare(rank[a.ent.extent], rank[b.ent.extent]) })
	return recs, nil
}

// gcMove is steps 1-3 of GC: copy, sync and re-point each live record. put with onlyIfAt does
// the three steps per record (durable, so the copy is synced before the index points at it).
// The first record that cannot be moved (a full disk) ends the moves, with one log line: the
// extents already emptied are still deleted. REQUIRES: s.gcMu.
func (s *Store) gcMove(recs []gcRecord, byID map[uint64]*extent, st *GCStats) {
	for i, r := range recs {
		e := byID[r.ent.extent]
		stored := getBuf(int(r.ent.storedLen))
		s.punchMu.RLock()
		err := s.readStored(e, r.key, r.ent, stored)
		s.punchMu.RUnlock()
		if errors.Is(err, base.ErrCorruption) {
			putBuf(stored)
			s.quarantine(r.key, r.ent, err)
			continue
		}
		if err == nil {
			err = s.put(r.key, r.ent, stored, &r.ent, true)
		}
		putBuf(stored)
		if errors.Is(err, errMoved) {
			continue
		}
		if err != nil {
			s.log.Warn("nvme: gc: cannot move live records; the extents holding them stay until there is room",
				"records_left", len(recs)-i, "extent", r.ent.extent, "err", err)
			break
		}
		st.RecordsMoved++
		st.BytesMoved += recordLenOf(r.key, r.ent)
	}
}

// gcRemoveEmpty is step 4 of GC: it deletes the victims with nothing live left, with no
// reader or punch inside them (punchMu held exclusively), and returns the disk bytes they
// used. A reader still holding an extent's file closes it (refs). The caller syncs the
// directory. REQUIRES: s.gcMu.
func (s *Store) gcRemoveEmpty(victims []*extent, st *GCStats) (removedBytes int64) {
	s.punchMu.Lock()
	defer s.punchMu.Unlock()
	for _, e := range victims {
		if e.live.Load() != 0 {
			continue
		}
		s.mu.Lock()
		delete(s.mu.extents, e.id)
		e.removed = true
		closeR := e.refs == 0
		s.mu.Unlock()
		if closeR {
			e.r.Close()
		}
		if err := s.fs.Remove(e.path); err != nil {
			s.log.Error("nvme: gc: cannot remove an extent", "file", e.path, "err", err)
		}
		used := e.size.Load() - e.punched.Load()
		s.m.extentBytes.Add(-used)
		s.m.extents.Add(-1)
		removedBytes += used
		st.ExtentsRemoved++
	}
	return removedBytes
}

// readStored reads the stored bytes of key's record into stored (len == ent.storedLen) and
// verifies them: the header against ent, and the checksum of the decoded object.
func (s *Store) readStored(e *extent, key string, ent indexEntry, stored []byte) error {
	if _, err := s.readHeader(e, key, ent); err != nil {
		return err
	}
	if err := readFull(e.r, stored, ent.offset+recordDataOff(key)); err != nil {
		return err
	}
	if ent.flags&flagLZ4 == 0 {
		if got := base.Checksum(stored); got != ent.checksum {
			return corruptf("extent %d offset %d: checksum %#x, want %#x", e.id, ent.offset, got, ent.checksum)
		}
		return nil
	}
	obj := getBuf(int(ent.size))
	defer putBuf(obj)
	return s.decodeInto(ent, stored, obj)
}

// gcLoop runs reclaim and GC every GCInterval (if positive), when dead records are queued
// and when kicked by a full store.
func (s *Store) gcLoop() {
	defer s.wg.Done()
	var tick <-chan time.Time
	if s.opts.GCInterval > 0 {
		t := time.NewTicker(s.opts.GCInterval)
		defer t.Stop()
		tick = t.C
	}
	for {
		select {
		case <-s.stop:
			return
		case <-tick:
		case <-s.gcKick:
		}
		s.maybeRestoreBallast()
		if err := s.reclaimBackground(); err != nil && !errors.Is(err, base.ErrClosed) {
			s.log.Error("nvme: background reclaim failed", "err", err)
			if s.opts.Events.BackgroundError != nil {
				s.opts.Events.BackgroundError(err)
			}
		}
		if _, err := s.GC(); err != nil && !errors.Is(err, base.ErrClosed) {
			s.log.Error("nvme: background gc failed", "err", err)
			if s.opts.Events.BackgroundError != nil {
				s.opts.Events.BackgroundError(err)
			}
		}
		if s.opts.testHookBackgroundPass != nil {
			s.opts.testHookBackgroundPass()
		}
	}
}

// reclaimBackground is reclaim for the background loop: inside enter/exit, like GC.
func (s *Store) reclaimBackground() error {
	if err := s.enter(); err != nil {
		return err
	}
	defer s.exit()
	_, err := s.reclaim()
	return err
}
