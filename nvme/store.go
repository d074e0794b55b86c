package nvme

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/maphash"
	"log/slog"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/mooncake-go/mooncake/internal/base"
)

// The Store: its state, locks and metrics, the index-entry accounting that writes (put.go),
// deletes and quarantines (read.go) share, Delete, Scan, label names and Close.

// Store is the NVMe tier of one worker. It implements tier.Lower. All methods are safe for
// concurrent use.
//
// Lock order: stripes[i] -> mu -> group.mu. group.mu is never held while mu is taken. No lock
// is held across extent file I/O except mu during extent creation (once per ExtentSize); a
// key's stripe lock is held across that key's index write (pebble).
type Store struct {
	opts     Options
	fs       vfs.FS
	log      *slog.Logger
	db       *pebble.DB
	extDir   string
	direct   bool  // extents are written with O_DIRECT
	punch    bool  // dead records are punched out (reclaim.go); set at Open
	ballast  int64 // bytes of the index's ballast file (ballast.go); 0: none
	capacity int64 // bytes; see Options.Capacity

	// ops is held shared by every public operation and exclusively by Close, so Close waits
	// for operations in flight and nothing runs on closed files.
	ops    sync.RWMutex
	closed atomic.Bool

	// stripes serialise the read-modify-write of one key's index entry together with the
	// accounting that goes with it (old record dead, new record live). Picked by hash of key.
	stripes [256]sync.Mutex
	seed    maphash.Seed

	mu struct {
		sync.Mutex
		// extents holds every extent file the index may point at, by id.
		extents map[uint64]*extent
		// active is the extent new records are appended to; nil until the first append and
		// after it is sealed.
		active *extent
		// nextID is the id of the next extent file. Invariant: greater than every id ever
		// seen in the directory or in the index, so ids are never reused.
		nextID uint64
	}

	group syncGroup
	// indexDirty is set by index writes made without a pebble sync; the SyncGroup tick syncs
	// the pebble WAL when it is set.
	indexDirty atomic.Bool

	// ballastGone is set when pebble spent the ballast on a full disk: no new record is
	// admitted until the background loop restores it (ballast.go).
	ballastGone atomic.Bool

	// dead holds the dead ranges waiting for reclaim; reclaimMu serializes reclaims.
	dead      deadQueue
	reclaimMu sync.Mutex
	// punchMu orders hole punching against extent reads: ReadInto and GC's copies hold it
	// shared from their index lookup to the end of their extent read, reclaim (and GC's
	// deletion of extents) exclusively. So no range is punched, nor file deleted, under a
	// reader that found its record live.
	punchMu sync.RWMutex

	gcMu   sync.Mutex // one GC at a time
	gcKick chan struct{}
	stop   chan struct{}
	wg     sync.WaitGroup // background loops

	m counters

	// testHookBeforeIndexCommit, when set, runs after an extent record is written (and synced
	// if durable) and before its index entry is committed. Nil in production.
	testHookBeforeIndexCommit func(key string)
}

// counters are the store's metrics; Metrics copies them out.
type counters struct {
	extentBytes   atomic.Int64 // bytes of extent files (reserved record ends), dead space included
	extentLive    atomic.Int64 // bytes of extent records the index points at
	inlineBytes   atomic.Int64 // bytes of inline index entries (key + entry + value)
	objects       atomic.Int64
	extents       atomic.Int64
	corruptions   atomic.Int64
	quarantined   atomic.Int64
	lz4Saved      atomic.Int64
	gcRuns        atomic.Int64
	gcReclaimed   atomic.Int64
	droppedOnOpen atomic.Int64
	punched       atomic.Int64
}

// extent is one append-only extent file.
type extent struct {
	id   uint64
	path string
	// size is the end of the last reserved record: the file's length once the writes in
	// flight have completed. Only grows.
	size atomic.Int64
	// live is the aligned length of the records the index points at.
	live atomic.Int64
	// punched is the bytes of dead records punched out (reclaim.go). The extent uses
	// size - punched bytes of disk, which is what counters.extentBytes counts.
	punched atomic.Int64

	// Guarded by Store.mu.
	r       vfs.File // buffered read handle; closed once removed and refs == 0
	refs    int      // readers holding r
	removed bool     // deleted by GC; r closes with the last reader
	w       vfs.File // write handle (O_DIRECT when Store.direct); nil once closed
	wRefs   int      // writers, syncers and the active role holding w
	sealed  bool     // no more appends; w closes (after a final sync) when wRefs reaches 0

	// Guarded by Store.group.mu.
	syncErr error // sticky: after a failed fdatasync the file's unsynced writes are lost
}

// Metrics is a snapshot of the store's counters.
type Metrics struct {
	// BytesUsed is what counts against Capacity: extent files (dead space included until GC)
	// plus inline index entries.
	BytesUsed int64
	// Capacity is the byte limit in force.
	Capacity int64
	// LiveBytes is the part of BytesUsed that live objects use (records with their padding).
	LiveBytes int64
	// Objects is the number of objects Scan reports.
	Objects int64
	// Extents is the number of extent files.
	Extents int64
	// LiveRatio is live extent bytes over extent bytes (1 with no extents): what GC looks at.
	LiveRatio float64
	// Corruptions counts checksum or header mismatches found by reads since Open.
	Corruptions int64
	// Quarantined counts records quarantined since Open (each once).
	Quarantined int64
	// DroppedOnOpen counts index entries Open dropped because their record was missing or bad.
	DroppedOnOpen int64
	// LZ4BytesSaved is the bytes lz4 saved over the objects written since Open.
	LZ4BytesSaved int64
	// GCRuns and GCBytesReclaimed count GC passes that removed at least one extent.
	GCRuns, GCBytesReclaimed int64
	// PunchedBytes counts the bytes of dead records punched out since Open.
	PunchedBytes int64
	// HolePunch says whether dead records are punched out (see Options.DisableHolePunch).
	HolePunch bool
	// DiskFull says the disk filled and the index took its reserve (the ballast): new
	// objects are refused until the disk has room again.
	DiskFull bool
	// Sync is the sync policy; DirectIO says whether extents are written with O_DIRECT.
	Sync     SyncPolicy
	DirectIO bool
}

// Metrics returns a snapshot of the counters.
func (s *Store) Metrics() Metrics {
	eb, el := s.m.extentBytes.Load(), s.m.extentLive.Load()
	ib := s.m.inlineBytes.Load()
	ratio := 1.0
	if eb > 0 {
		ratio = float64(el) / float64(eb)
	}
	return Metrics{
		BytesUsed:        eb + ib,
		Capacity:         s.capacity,
		LiveBytes:        el + ib,
		Objects:          s.m.objects.Load(),
		Extents:          s.m.extents.Load(),
		LiveRatio:        ratio,
		Corruptions:      s.m.corruptions.Load(),
		Quarantined:      s.m.quarantined.Load(),
		DroppedOnOpen:    s.m.droppedOnOpen.Load(),
		LZ4BytesSaved:    s.m.lz4Saved.Load(),
		GCRuns:           s.m.gcRuns.Load(),
		GCBytesReclaimed: s.m.gcReclaimed.Load(),
		PunchedBytes:     s.m.punched.Load(),
		HolePunch:        s.punch,
		DiskFull:         s.ballastGone.Load(),
		Sync:             s.opts.Sync,
		DirectIO:         s.direct,
	}
}

// enter starts a public operation; it fails once Close has begun.
func (s *Store) enter() error {
	s.ops.RLock()
	if s.closed.Load() {
		s.ops.RUnlock()
		return fmt.Errorf("nvme: store %s: %w", s.opts.Dir, base.ErrClosed)
	}
	return nil
}

func (s *Store) exit() { s.ops.RUnlock() }

func (s *Store) stripe(key string) *sync.Mutex {
	return &s.stripes[maphash.String(s.seed, key)%uint64(len(s.stripes))]
}

// SetLabelName records (synced) the name of a label, for LabelNames after a restart.
func (s *Store) SetLabelName(label uint16, name string) error {
	if err := s.enter(); err != nil {
		return err
	}
	defer s.exit()
	if err := s.db.Set(labelNameKey(label), []byte(name), pebble.Sync); err != nil {
		return fmt.Errorf("nvme: label %d: %w", label, err)
	}
	return nil
}

// LabelNames returns every name SetLabelName recorded, by label.
func (s *Store) LabelNames() (map[uint16]string, error) {
	if err := s.enter(); err != nil {
		return nil, err
	}
	defer s.exit()
	upper := append(append([]byte(nil), metaLabelPrefix...), 0xff, 0xff, 0xff)
	it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: metaLabelPrefix, UpperBound: upper})
	if err != nil {
		return nil, fmt.Errorf("nvme: label names: %w", err)
	}
	defer it.Close()
	out := map[uint16]string{}
	for ok := it.First(); ok; ok = it.Next() {
		k := it.Key()
		if len(k) != len(metaLabelPrefix)+2 {
			continue
		}
		out[binary.LittleEndian.Uint16(k[len(metaLabelPrefix):])] = string(it.Value())
	}
	return out, it.Error()
}

// inlineCost is what an inline entry counts against capacity.
func inlineCost(key string, ent indexEntry) int64 {
	return int64(len(key)) + indexFixedLen + ent.storedLen
}

// recordLenOf is the aligned length of key's record described by ent.
func recordLenOf(key string, ent indexEntry) int64 {
	return recordDataOff(key) + alignUp(ent.storedLen)
}

// sameRecord reports whether a and b point at the same stored record: what GC's copy and a
// quarantine check, under the key's stripe lock, before they change an entry they read
// without it.
func sameRecord(a, b indexEntry) bool {
	return a.flags == b.flags && a.version == b.version && a.extent == b.extent && a.offset == b.offset &&
		a.storedLen == b.storedLen && a.checksum == b.checksum
}

// forgetLocked removes an entry's accounting after its index entry was replaced or deleted.
// REQUIRES: key's stripe lock.
func (s *Store) forgetLocked(key string, old indexEntry) {
	if old.flags&flagQuarantined == 0 {
		s.m.objects.Add(-1)
		if !old.isInline() {
			s.mu.Lock()
			e := s.mu.extents[old.extent]
			s.mu.Unlock()
			if e != nil {
				e.live.Add(-recordLenOf(key, old))
				s.m.extentLive.Add(-recordLenOf(key, old))
			}
		}
	}
	if old.isInline() {
		s.m.inlineBytes.Add(-inlineCost(key, old))
	}
}

// addDeadRecord queues the extent record of an index entry that was just replaced or
// deleted to be punched out (a quarantined record too: its entry is gone now).
func (s *Store) addDeadRecord(key string, old indexEntry) {
	if old.isInline() || !s.punch {
		return
	}
	s.mu.Lock()
	e := s.mu.extents[old.extent]
	s.mu.Unlock()
	if e != nil {
		s.addDead(e, old.offset, recordLenOf(key, old))
	}
}

// getEntry reads key's index entry. found is false when there is none. withInline copies an
// inline value out of pebble's buffer into ent.inline (for a read or a re-encode); without it
// ent.inline is nil, which saves the callers that need only the metadata a copy of up to
// Options.InlineThreshold bytes.
func (s *Store) getEntry(key string, withInline bool) (ent indexEntry, found bool, err error) {
	v, closer, err := s.db.Get(encodeIndexKey(key))
	if errors.Is(err, pebble.ErrNotFound) {
		return ent, false, nil
	}
	if err != nil {
		return ent, false, fmt.Errorf("nvme: index get %q: %w", key, err)
	}
	ent, err = decodeIndexEntry(v)
	if withInline && err == nil && ent.isInline() {
		ent.inline = append([]byte(nil), ent.inline...) // v is only valid until closer.Close
	} else {
		ent.inline = nil
	}
	closer.Close()
	if err != nil {
		return ent, false, fmt.Errorf("nvme: index entry of %q: %w", key, err)
	}
	return ent, true, nil
}

// Delete removes key's object; v == 0 removes any version. Deleting a quarantined object
// removes its quarantine mark.
//
// Errors: base.ErrObjectNotFound, base.ErrInvalidVersion.
func (s *Store) Delete(key string, v base.Version) error {
	if err := base.ValidateKey(key); err != nil {
		return fmt.Errorf("nvme: delete: %w", err)
	}
	if err := s.enter(); err != nil {
		return err
	}
	defer s.exit()
	mu := s.stripe(key)
	mu.Lock()
	defer mu.Unlock()
	old, found, err := s.getEntry(key, false)
	if err != nil && !errors.Is(err, base.ErrCorruption) {
		return err
	}
	if !found && err == nil {
		return fmt.Errorf("nvme: delete %q: %w", key, base.ErrObjectNotFound)
	}
	if found && v != 0 && old.version != v {
		return fmt.Errorf("nvme: delete %q: version %d stored, not %d: %w", key, old.version, v, base.ErrInvalidVersion)
	}
	durable := s.opts.Sync == SyncAlways
	if err := s.db.Delete(encodeIndexKey(key), writeOpts(durable)); err != nil {
		return fmt.Errorf("nvme: delete %q: %w", key, err)
	}
	if !durable {
		s.indexDirty.Store(true)
	}
	if found {
		s.forgetLocked(key, old)
		s.addDeadRecord(key, old)
	}
	return nil
}

// newObjectIter returns an iterator over the index's object entries ('o' keys: Scan, GC and
// Open's recovery); the caller closes it.
func (s *Store) newObjectIter() (*pebble.Iterator, error) {
	return s.db.NewIter(&pebble.IterOptions{LowerBound: []byte{indexPrefixObject}, UpperBound: []byte{indexPrefixObject + 1}})
}

// Scan calls fn for every object the store holds (quarantined ones excepted), in key order,
// from a consistent snapshot of the index. An error from fn stops the scan and is returned.
func (s *Store) Scan(fn func(base.ObjectMeta) error) error {
	return s.ScanLabeled(func(m base.ObjectMeta, _ uint16) error { return fn(m) })
}

// ScanLabeled is Scan that also gives each object's label (PutLabeled; 0: none).
func (s *Store) ScanLabeled(fn func(base.ObjectMeta, uint16) error) error {
	if err := s.enter(); err != nil {
		return err
	}
	defer s.exit()
	it, err := s.newObjectIter()
	if err != nil {
		return fmt.Errorf("nvme: scan: %w", err)
	}
	defer it.Close()
	for ok := it.First(); ok; ok = it.Next() {
		key, err := decodeIndexKey(it.Key())
		if err != nil {
			s.log.Error("nvme: scan: skipping a bad index key", "err", err)
			continue
		}
		val, err := it.ValueAndErr()
		if err != nil {
			return fmt.Errorf("nvme: scan: %w", err)
		}
		ent, err := decodeIndexEntry(val)
		if err != nil {
			s.log.Error("nvme: scan: skipping a bad index entry", "key", key, "err", err)
			continue
		}
		if ent.flags&flagQuarantined != 0 {
			continue
		}
		if err := fn(base.ObjectMeta{Key: key, Version: ent.version, Size: ent.size, Checksum: ent.checksum}, ent.label); err != nil {
			return err
		}
	}
	if err := it.Error(); err != nil {
		return fmt.Errorf("nvme: scan: %w", err)
	}
	return nil
}

// Close syncs (unless SyncNone), stops the background loops and closes every file. Operations
// in flight finish first; later ones fail with base.ErrClosed.
func (s *Store) Close() error {
	if s.closed.Swap(true) {
		return fmt.Errorf("nvme: close: %w", base.ErrClosed)
	}
	close(s.stop)
	s.wg.Wait()
	s.ops.Lock()
	defer s.ops.Unlock()
	var errs []error
	s.mu.Lock()
	if a := s.mu.active; a != nil {
		s.mu.active = nil
		a.sealed = true
		a.wRefs++ // released below, outside mu
		s.mu.Unlock()
		s.releaseW(a) // drops the active role's ref
		s.releaseW(a) // and ours: the final sync and close
		s.mu.Lock()
	}
	for _, e := range s.mu.extents {
		if e.w != nil {
			errs = append(errs, invariantf("extent %d still has %d writers at Close", e.id, e.wRefs))
		}
		errs = append(errs, e.r.Close())
	}
	s.mu.extents = nil
	s.mu.Unlock()
	s.group.mu.Lock()
	for e := range s.group.dirty {
		if e.syncErr != nil {
			errs = append(errs, e.syncErr)
		}
	}
	s.group.mu.Unlock()
	if s.opts.Sync != SyncNone {
		errs = append(errs, s.db.LogData(nil, pebble.Sync))
	}
	errs = append(errs, s.db.Close())
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("nvme: close: %w", err)
	}
	return nil
}

// ioErr wraps an I/O error, adding base.ErrNoSpace when the disk is full.
func ioErr(what string, err error) error {
	if errors.Is(err, syscall.ENOSPC) {
		return fmt.Errorf("nvme: %s: %w: %w", what, base.ErrNoSpace, err)
	}
	return fmt.Errorf("nvme: %s: %w", what, err)
}

// now is the clock for log lines and durations.
var now = time.Now
