package nvme

import (
	"errors"
	"fmt"
	"hash/maphash"
	"log/slog"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/bloom"
	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/mooncake-go/mooncake/internal/base"
)

// Open opens (or creates) the store in opts.Dir and recovers it:
//
//  1. Open the pebble index (pebble replays its own WAL).
//  2. Open every extent file and check its header; files with a bad header are ignored
//     (logged, left in place for inspection, their ids never reused).
//  3. Walk the index. An entry whose extent is missing, or whose record header does not match
//     it (torn, overwritten, truncated), is dropped with a log line; with VerifyOnOpen the
//     whole record is read and checksummed too. Live bytes per extent are counted.
//  4. Bytes past the last indexed record of an extent (the torn tail of a crash, or records
//     whose index commit never happened) are dead space: never read, reclaimed by GC. New
//     records always go to a new extent, so nothing is appended after a torn tail.
//  5. Extents with no live record are deleted.
//
// Scan then reports exactly the objects whose index entry was committed and whose record
// checks out.
func Open(opts Options) (*Store, error) {
	opts.EnsureDefaults()
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	s := &Store{
		opts:   opts,
		fs:     opts.FS,
		log:    opts.Logger.With("component", "nvme", "dir", opts.Dir),
		extDir: opts.FS.PathJoin(opts.Dir, "extents"),
		seed:   maphash.MakeSeed(),
		gcKick: make(chan struct{}, 1),
		stop:   make(chan struct{}),
	}
	s.mu.extents = make(map[uint64]*extent)
	s.group.dirty = make(map[*extent]struct{})
	s.group.cond.L = &s.group.mu
	start := now()

	indexDir := s.fs.PathJoin(opts.Dir, "index")
	for _, d := range []string{s.extDir, indexDir} {
		if err := s.fs.MkdirAll(d, 0o755); err != nil {
			return nil, ioErr("create "+d, err)
		}
	}
	s.punch = s.probePunch() // before recover, which queues the dead space it finds

	// The disk is measured before pebble opens, to size its memtable (and so its WAL
	// preallocation) to the disk. A filesystem that cannot say (a MemFS) counts as large.
	du, duErr := s.fs.GetDiskUsage(opts.Dir)
	budget := opts.Capacity
	if duErr == nil && (budget == 0 || budget > int64(du.TotalBytes)) {
		budget = int64(du.TotalBytes)
	}
	memTable := memTableSize(budget)
	if err := s.openIndex(indexDir, memTable, duErr == nil); err != nil {
		return nil, err
	}
	if err := s.recover(); err != nil {
		s.closeFiles()
		return nil, err
	}

	s.direct = s.probeDirect()
	used := s.m.extentBytes.Load() + s.m.inlineBytes.Load()
	headroom := indexHeadroom(memTable)
	if err := s.setCapacity(used, headroom, duErr); err != nil {
		s.closeFiles()
		return nil, err
	}
	s.log.Info("nvme: opened",
		"objects", s.m.objects.Load(), "bytes_used", base.Bytes(used), "capacity", base.Bytes(s.capacity),
		"extents", s.m.extents.Load(), "extent_size", base.Bytes(s.opts.ExtentSize), "dropped", s.m.droppedOnOpen.Load(),
		"sync", opts.Sync.String(), "o_direct", s.direct, "hole_punch", s.punch,
		"index_memtable", base.Bytes(memTable), "index_headroom", base.Bytes(headroom), "index_reserve", base.Bytes(s.ballast),
		"took", now().Sub(start))
	// The dead space recovery found (torn tails, records whose index commit never happened,
	// holes already punched) is punched now, so the accounting starts from what the disk
	// really holds.
	if _, err := s.reclaim(); err != nil {
		s.log.Warn("nvme: reclaiming dead space at open failed; retried in the background", "err", err)
	}

	if opts.Sync == SyncGroup {
		s.wg.Add(1)
		go s.syncLoop()
	}
	s.wg.Add(1)
	go s.gcLoop()
	return s, nil
}

// openIndex opens the pebble index in dir with a memtable of memTable bytes (step 1 of Open).
// On a filesystem that can report being full (fullAware: it reported its usage) it first
// lays down the ballast (ballast.go) and has pebble spend it when the disk fills, so the
// index can still write its WAL while new objects are refused.
func (s *Store) openIndex(dir string, memTable int64, fullAware bool) error {
	indexFS := s.fs
	if fullAware {
		s.ballast = ballastSize(memTable)
		_ = s.fs.Remove(s.fs.PathJoin(s.opts.Dir, ballastName)) // an earlier run's; sized again
		if err := s.createBallast(); err != nil {
			s.ballastGone.Store(true)
			s.log.Warn("nvme: no room for the index's reserve: new objects are refused until the disk has room",
				"reserve", base.Bytes(s.ballast), "err", err)
		}
		indexFS = vfs.OnDiskFull(s.fs, s.onIndexDiskFull)
	}
	po := &pebble.Options{
		FS:     indexFS,
		Logger: pebbleLogger{s.log},
		// Inline values are up to 64 KiB: a larger memtable than the 4 MiB default keeps
		// flushes rare under spill bursts of small objects (memTableSize scales it down on
		// small disks).
		MemTableSize: uint64(memTable),
		// The block cache holds the blocks of entries and of inline values alike: at
		// pebble's 8 MiB default a stream of 64 KiB values evicted the blocks that every
		// put, delete and read looks up (indexCacheSize).
		CacheSize: indexCacheSize(memTable),
	}
	// Bloom filters on every level: a spill's put looks up a key no sstable holds yet, and
	// without a filter that lookup reads a data block of every sstable whose key range
	// covers it (L0's flushes cover nearly all keys).
	for i := range po.Levels {
		po.Levels[i].FilterPolicy = bloom.FilterPolicy(10)
	}
	db, err := pebble.Open(dir, po)
	if err != nil {
		return ioErr("open index", err)
	}
	s.db = db
	return nil
}

// setCapacity sets the byte limit once recovery has counted the used bytes: Options.Capacity,
// or by default what is used plus DefaultCapacityFraction of the room left on the disk, less
// the index's headroom; then the extent size, which follows from it unless set. duErr is the
// error of measuring the disk at Open (nil: the filesystem reports its usage); without a
// measure there is no default, and the capacity must be set.
func (s *Store) setCapacity(used, headroom int64, duErr error) error {
	s.capacity = s.opts.Capacity
	var du vfs.DiskUsage
	if duErr == nil {
		du, duErr = s.fs.GetDiskUsage(s.opts.Dir) // again: recovery may have removed extents
	}
	switch {
	case s.capacity == 0 && duErr != nil:
		return ioErr("disk usage (set Options.Capacity)", duErr)
	case s.capacity == 0:
		s.capacity = max(0, used+int64(float64(du.AvailBytes)*DefaultCapacityFraction)-headroom)
	case duErr == nil && s.capacity > used+int64(du.AvailBytes)-headroom:
		s.log.Warn("nvme: the capacity is larger than the room left on the filesystem; writes will fail with no space before it is reached",
			"capacity", base.Bytes(s.capacity), "bytes_used", base.Bytes(used), "disk_free", base.Bytes(du.AvailBytes),
			"index_headroom", base.Bytes(headroom))
	}
	if s.opts.ExtentSize == 0 {
		s.opts.ExtentSize = autoExtentSize(s.capacity)
	}
	return nil
}

// memTableSize is the pebble memtable size for a store whose disk budget is budget bytes
// (0: unknown, taken as large): DefaultMemTableSize, or budget/32 on a small disk, at least
// minMemTableSize, a power of two.
func memTableSize(budget int64) int64 {
	if budget <= 0 || budget/32 >= DefaultMemTableSize {
		return DefaultMemTableSize
	}
	m := int64(minMemTableSize)
	for m*2 <= budget/32 {
		m *= 2
	}
	return m
}

// indexCacheSize is the index's block cache: two memtables (64 MiB on a disk of 1 GiB or
// more, less on a small one, as memTableSize scales). This build is cgo-free, so pebble
// allocates it on the Go heap.
func indexCacheSize(memTable int64) int64 { return 2 * memTable }

// indexHeadroom is the disk room the default capacity leaves to the pebble index beyond the
// inline values it counts: pebble preallocates each WAL to 110% of the memtable size, keeps
// up to two WALs while a memtable flushes (plus one recycled), and writes the flushed
// sstable. Four memtables cover those. Without it the WAL preallocation filled a small disk
// before the capacity was reached, and pebble cannot continue after a failed WAL write.
func indexHeadroom(memTable int64) int64 { return 4 * memTable }

// autoExtentSize is the extent size for a capacity when Options.ExtentSize is not set.
func autoExtentSize(capacity int64) int64 {
	n := capacity / autoExtentDivisor &^ (1<<20 - 1)
	return min(max(n, 1<<20), DefaultExtentSize)
}

// closeFiles releases what Open acquired when it fails half way.
func (s *Store) closeFiles() {
	for _, e := range s.mu.extents {
		e.r.Close()
	}
	s.db.Close()
}

// probeDirect decides O_DIRECT for extent writes: only on the OS filesystem, and only if a
// probe file in the extent directory accepts an aligned O_DIRECT write.
func (s *Store) probeDirect() bool {
	if s.opts.DirectIO == DirectIOOff {
		return false
	}
	if s.fs != vfs.Default {
		s.log.Info("nvme: extents are written buffered: the filesystem is not the OS filesystem")
		return false
	}
	path := s.fs.PathJoin(s.extDir, "direct-probe")
	f, err := s.fs.Create(path, vfs.WriteCategoryUnspecified)
	if err != nil {
		s.log.Info("nvme: extents are written buffered: cannot create the O_DIRECT probe", "err", err)
		return false
	}
	defer s.fs.Remove(path)
	defer f.Close()
	if err := setDirect(f); err != nil {
		s.log.Info("nvme: extents are written buffered: O_DIRECT not supported", "err", err)
		return false
	}
	b := getBuf(blockSize)
	defer putBuf(b)
	if _, err := f.WriteAt(b, 0); err != nil {
		s.log.Info("nvme: extents are written buffered: the filesystem refuses O_DIRECT writes", "err", err)
		return false
	}
	s.log.Info("nvme: extents are written with O_DIRECT")
	return true
}

// recover opens the extents and validates the index against them (steps 2-5 of Open).
//
// NB: Open runs it before s is shared with any goroutine, so it and its steps (openExtents,
// walkIndex, checkRecord, settleExtents) use s.mu's fields without taking s.mu.
func (s *Store) recover() error {
	if err := s.checkFormat(); err != nil {
		return err
	}
	fileSize, err := s.openExtents()
	if err != nil {
		return err
	}
	drop := s.db.NewBatch()
	defer drop.Close()
	dropf := func(k []byte, why string, args ...any) {
		_ = drop.Delete(k, nil)
		s.m.droppedOnOpen.Add(1)
		s.log.Warn("nvme: dropping an index entry: "+why, args...)
	}
	spans, err := s.walkIndex(fileSize, dropf)
	if err != nil {
		return err
	}
	if drop.Count() > 0 {
		if err := drop.Commit(pebble.Sync); err != nil {
			return ioErr("drop index entries", err)
		}
	}
	return s.settleExtents(fileSize, spans)
}

// dropFunc deletes index entry k in recovery's batch, counting it and logging why (with
// the key/value pairs of args).
type dropFunc func(k []byte, why string, args ...any)

// openExtents opens every extent file with a good header (step 2 of Open) into s.mu.extents
// and returns the size of each file. A file with a bad header is logged and left in place for
// inspection; an I/O error fails Open. Either way s.mu.nextID moves past its id, so that no id
// is ever reused.
func (s *Store) openExtents() (fileSize map[uint64]int64, err error) {
	names, err := s.fs.List(s.extDir)
	if err != nil {
		return nil, ioErr("list extents", err)
	}
	fileSize = map[uint64]int64{}
	for _, name := range names {
		id, ok := parseExtentName(name)
		if !ok {
			continue
		}
		if id >= s.mu.nextID {
			s.mu.nextID = id + 1
		}
		path := s.fs.PathJoin(s.extDir, name)
		e, size, err := s.openExtent(id, path)
		if err != nil && !errors.Is(err, base.ErrCorruption) {
			// An I/O error is not evidence against the extent: fail rather than drop entries.
			return nil, ioErr("open extent "+path, err)
		}
		if err != nil {
			s.log.Error("nvme: ignoring an extent file with a bad header", "file", path, "err", err)
			continue
		}
		s.mu.extents[id] = e
		fileSize[id] = size
	}
	return fileSize, nil
}

// walkIndex checks every object entry of the index against the extents opened (step 3 of
// Open): entries that do not check out go to dropf; the others are counted (objects, inline
// bytes, live extent bytes). It returns the live records of each extent (offset, length), for
// the dead space between them.
func (s *Store) walkIndex(fileSize map[uint64]int64, dropf dropFunc) (map[uint64][][2]int64, error) {
	spans := map[uint64][][2]int64{}
	it, err := s.newObjectIter()
	if err != nil {
		return nil, ioErr("scan index", err)
	}
	for ok := it.First(); ok; ok = it.Next() {
		k := append([]byte(nil), it.Key()...)
		key, err := decodeIndexKey(k)
		if err != nil {
			dropf(k, "bad key", "err", err)
			continue
		}
		val, err := it.ValueAndErr()
		if err != nil {
			it.Close()
			return nil, ioErr("scan index", err)
		}
		ent, err := decodeIndexEntry(val)
		if err != nil {
			dropf(k, "bad entry", "key", key, "err", err)
			continue
		}
		if ent.extent >= s.mu.nextID {
			s.mu.nextID = ent.extent + 1
		}
		if ent.isInline() {
			s.m.inlineBytes.Add(inlineCost(key, ent))
		}
		if ent.flags&flagQuarantined != 0 {
			continue
		}
		if !ent.isInline() {
			e, err := s.checkRecord(k, key, ent, fileSize, dropf)
			if err != nil {
				it.Close()
				return nil, err
			}
			if e == nil {
				continue // dropped
			}
			e.live.Add(recordLenOf(key, ent))
			s.m.extentLive.Add(recordLenOf(key, ent))
			spans[ent.extent] = append(spans[ent.extent], [2]int64{ent.offset, recordLenOf(key, ent)})
		}
		s.m.objects.Add(1)
	}
	if err := it.Close(); err != nil {
		return nil, ioErr("scan index", err)
	}
	return spans, nil
}

// checkRecord checks the extent record of key's entry ent (index key k): its extent is open,
// the record lies within the file, its header matches ent and, with VerifyOnOpen, the whole
// record verifies. It returns the record's extent, or nil after passing the entry to dropf.
// An I/O error is returned instead: it is not evidence against the record, so Open fails
// rather than drop the entry.
func (s *Store) checkRecord(k []byte, key string, ent indexEntry, fileSize map[uint64]int64, dropf dropFunc) (*extent, error) {
	e := s.mu.extents[ent.extent]
	if e == nil {
		dropf(k, "its extent is missing", "key", key, "extent", ent.extent)
		return nil, nil
	}
	if end := ent.offset + recordLenOf(key, ent); end > fileSize[ent.extent] {
		dropf(k, "its record is past the end of the extent (torn)", "key", key, "extent", ent.extent, "offset", ent.offset)
		return nil, nil
	}
	if _, err := s.readHeader(e, key, ent); err != nil {
		if !errors.Is(err, base.ErrCorruption) {
			return nil, ioErr("check record of "+key, err)
		}
		dropf(k, "its record header does not check out", "key", key, "err", err)
		return nil, nil
	}
	if s.opts.VerifyOnOpen {
		buf := make([]byte, ent.size)
		if err := s.readRecord(e, key, ent, buf); err != nil {
			if !errors.Is(err, base.ErrCorruption) {
				return nil, ioErr("verify record of "+key, err)
			}
			dropf(k, "its record does not verify", "key", key, "err", err)
			return nil, nil
		}
	}
	return e, nil
}

// settleExtents ends recovery (steps 4-5 of Open): extents with nothing live go; the others
// count whole, and the space between their live records (spans), torn tails included, is
// queued as dead.
func (s *Store) settleExtents(fileSize map[uint64]int64, spans map[uint64][][2]int64) error {
	removed := 0
	for id, e := range s.mu.extents {
		if e.live.Load() == 0 {
			e.r.Close()
			delete(s.mu.extents, id)
			if err := s.fs.Remove(e.path); err != nil {
				s.log.Error("nvme: cannot remove an empty extent", "file", e.path, "err", err)
			}
			removed++
			continue
		}
		e.size.Store(alignUp(fileSize[id]))
		s.m.extentBytes.Add(e.size.Load())
		s.m.extents.Add(1)
		s.addDeadGaps(e, spans[id])
	}
	if removed > 0 {
		if err := s.syncDir(); err != nil {
			return ioErr("sync extent directory", err)
		}
	}
	return nil
}

// openExtent opens a sealed extent for reading and checks its header.
func (s *Store) openExtent(id uint64, path string) (*extent, int64, error) {
	r, err := s.fs.Open(path)
	if err != nil {
		return nil, 0, err
	}
	st, err := r.Stat()
	if err != nil {
		r.Close()
		return nil, 0, err
	}
	var hdr [extentHeaderLen]byte
	if err := readFull(r, hdr[:], 0); err != nil {
		r.Close()
		return nil, 0, err
	}
	got, err := decodeExtentHeader(hdr[:])
	if err == nil && got != id {
		err = corruptf("extent header says id %d, file name says %d", got, id)
	}
	if err != nil {
		r.Close()
		return nil, 0, err
	}
	e := &extent{id: id, path: path, r: r, sealed: true}
	return e, st.Size(), nil
}

// checkFormat stamps a new index with the format version or refuses another version.
func (s *Store) checkFormat() error {
	v, closer, err := s.db.Get(metaFormatKey)
	if errors.Is(err, pebble.ErrNotFound) {
		if err := s.db.Set(metaFormatKey, []byte(indexFormatVersion), pebble.Sync); err != nil {
			return ioErr("stamp index format", err)
		}
		return nil
	}
	if err != nil {
		return ioErr("read index format", err)
	}
	defer closer.Close()
	if string(v) != indexFormatVersion {
		return fmt.Errorf("nvme: index format %q, this build reads %q: %w", v, indexFormatVersion, base.ErrNotSupported)
	}
	return nil
}

// syncLoop is the SyncGroup tick: it syncs the extents written with sync=false, then the
// index WAL, so such writes are durable within about GroupCommitInterval.
func (s *Store) syncLoop() {
	defer s.wg.Done()
	t := time.NewTicker(s.opts.GroupCommitInterval)
	defer t.Stop()
	for {
		select {
		case <-s.stop:
			return
		case <-t.C:
		}
		s.group.mu.Lock()
		dirty := len(s.group.dirty) > 0
		s.group.mu.Unlock()
		if dirty {
			s.syncDirty()
		}
		if !s.indexDirty.Swap(false) && !dirty {
			continue
		}
		if err := s.db.LogData(nil, pebble.Sync); err != nil {
			s.log.Error("nvme: index sync failed", "err", err)
			if s.opts.Events.BackgroundError != nil {
				s.opts.Events.BackgroundError(fmt.Errorf("nvme: index sync: %w", err))
			}
		}
	}
}

// pebbleLogger routes pebble's log lines to slog.
type pebbleLogger struct{ l *slog.Logger }

func (p pebbleLogger) Infof(format string, args ...any) {
	p.l.Debug("pebble: " + fmt.Sprintf(format, args...))
}

func (p pebbleLogger) Errorf(format string, args ...any) {
	p.l.Error("pebble: " + fmt.Sprintf(format, args...))
}

// Fatalf: pebble calls it on states it cannot continue from; it must not return.
func (p pebbleLogger) Fatalf(format string, args ...any) {
	msg := "pebble: " + fmt.Sprintf(format, args...)
	p.l.Error(msg)
	panic(msg)
}
