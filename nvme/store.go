package nvme

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash"
	"hash/maphash"
	"io"
	"log/slog"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/mooncake-go/mooncake/internal/base"
)

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

func (s *Store) lz4Limit(n int) int { return int(float64(n) * (1 - s.opts.LZ4MinSaving)) }

// Put stores data as key's object with version v, replacing any older object of key. With
// sync (or SyncAlways) the object is durable when Put returns. The caller keeps data; Put
// does not retain it, but may write it to disk straight from its memory, so the caller must
// not modify it until Put returns (the checksum would not match what reached the disk).
//
// Errors: base.ErrInvalidKey, base.ErrTooLarge, base.ErrNoSpace (capacity or disk full;
// nothing is changed), base.ErrClosed, or an I/O error.
func (s *Store) Put(key string, v base.Version, data []byte, sync bool) error {
	return s.PutChecked(key, v, data, 0, sync)
}

// PutChecked is Put for a caller that already knows the object's checksum, base.Checksum(data)
// (the tier verified it when the bytes arrived): the store records sum instead of hashing
// data again, which saves a pass over the object on every spill, and keeps the checksum taken
// when the bytes were first written, so a later read also detects any change to data since
// then. A sum of 0 means "unknown": PutChecked then computes it, as Put does. A wrong sum is
// stored as given and every read of the object reports base.ErrCorruption.
func (s *Store) PutChecked(key string, v base.Version, data []byte, sum uint64, sync bool) error {
	// NB: no s.enter here: PutLabeled takes the read lock, and a second RLock while Close
	// waits for the write lock would deadlock (sync.RWMutex does not allow recursive reads).
	return s.PutLabeled(key, v, data, sum, sync, 0)
}

// PutLabeled is PutChecked that also keeps label with the object: an opaque 16-bit value
// (0: none) that Footprint's callers and ScanLabeled read back, kept in the index entry, so a
// restart finds it. The tier engine stores its model tags there (names by SetLabelName).
func (s *Store) PutLabeled(key string, v base.Version, data []byte, sum uint64, sync bool, label uint16) error {
	if err := base.ValidateKey(key); err != nil {
		return fmt.Errorf("nvme: put: %w", err)
	}
	if int64(len(data)) > maxObjectSize {
		return fmt.Errorf("nvme: put %q: %d bytes: %w (limit %d)", key, len(data), base.ErrTooLarge, int64(maxObjectSize))
	}
	if err := s.enter(); err != nil {
		return err
	}
	defer s.exit()
	durable := sync || s.opts.Sync == SyncAlways
	ent := indexEntry{version: v, size: int64(len(data)), storedLen: int64(len(data)), checksum: sum, label: label}
	return s.put(key, ent, data, nil, durable)
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

// put writes one object. Either data (the object's bytes) or stored (already in its stored
// form, with ent.flags and ent.storedLen describing it: GC's rewrites) is given. A non-zero
// ent.checksum is the object's known checksum and is not recomputed. If
// onlyIfAt is non-nil the index is updated only if it still holds *onlyIfAt (GC must not
// resurrect an object deleted or replaced while it copied it).
func (s *Store) put(key string, ent indexEntry, data []byte, onlyIfAt *indexEntry, durable bool) error {
	stored := data
	var cbuf []byte // lz4 output, owned here until putBuf
	defer func() {
		if cbuf != nil {
			putBuf(cbuf)
		}
	}()
	if onlyIfAt == nil && !s.opts.DisableLZ4 && len(data) >= lz4MinLen && lz4Promising(data, s.lz4Limit) {
		cbuf = getBuf(s.lz4Limit(len(data)))
		if n := lz4Compress(data, cbuf); n > 0 {
			stored = cbuf[:n]
			ent.flags |= flagLZ4
			ent.storedLen = int64(n)
		}
	}
	// The checksum: known for GC copies and PutChecked; else computed here for inline and
	// compressed values, and while the record is written (overlapping the disk) for raw
	// extent values.
	known := onlyIfAt != nil || ent.checksum != 0
	streamSum := !known && ent.flags&flagLZ4 == 0 && int64(len(stored)) > s.opts.InlineThreshold
	if !known && !streamSum {
		ent.checksum = base.Checksum(data)
	}
	if int64(len(stored)) <= s.opts.InlineThreshold {
		ent.flags |= flagInline
		ent.inline = stored
		if cbuf != nil {
			ent.inline = append([]byte(nil), stored...) // cbuf goes back to the pool
		}
		n := inlineCost(key, ent)
		if err := s.reserve(n, false); err != nil {
			return fmt.Errorf("nvme: put %q: %w", key, err)
		}
		if err := s.commit(key, ent, nil, onlyIfAt, durable); err != nil {
			s.m.inlineBytes.Add(-n)
			return err
		}
		if onlyIfAt == nil {
			s.m.lz4Saved.Add(ent.size - ent.storedLen)
		}
		return nil
	}

	hdr := &recordHeader{key: key, flags: ent.flags & recordFlagsMask, version: ent.version, size: ent.size,
		storedLen: ent.storedLen, checksum: ent.checksum}
	// GC copies (onlyIfAt != nil) are not refused for capacity: they free more than they use,
	// and a full store is exactly when GC must be able to run.
	e, off, w, err := s.reserveRecord(hdr.recordLen(), onlyIfAt != nil)
	if err != nil {
		return fmt.Errorf("nvme: put %q: %w", key, err)
	}
	defer s.releaseW(e)
	if err := s.writeRecord(w, off, hdr, stored, streamSum); err != nil {
		// The bytes at off are unknown now; no index entry will point at them: dead space.
		// After an I/O error the extent is sealed (the file may be damaged past off); a
		// full disk is no reason to start a new file, which would only fail again.
		err = ioErr(fmt.Sprintf("write extent %d at %d", e.id, off), err)
		if !errors.Is(err, base.ErrNoSpace) {
			s.sealExtent(e)
		}
		s.addDead(e, off, hdr.recordLen())
		return fmt.Errorf("nvme: put %q: %w", key, err)
	}
	ent.checksum = hdr.checksum
	if durable {
		if err := s.syncExtent(e); err != nil {
			s.addDead(e, off, hdr.recordLen())
			return fmt.Errorf("nvme: put %q: sync extent %d: %w", key, e.id, err)
		}
	}
	ent.extent, ent.offset = e.id, off
	if s.testHookBeforeIndexCommit != nil {
		s.testHookBeforeIndexCommit(key)
	}
	if err := s.commit(key, ent, e, onlyIfAt, durable); err != nil {
		s.addDead(e, off, hdr.recordLen()) // never indexed (or GC's copy lost a race)
		return err
	}
	if !durable && s.opts.Sync != SyncNone {
		s.markDirty(e)
	}
	if onlyIfAt == nil {
		s.m.lz4Saved.Add(ent.size - ent.storedLen)
	}
	return nil
}

// recordChunk is the unit of extent writes when the stored bytes must be copied into aligned
// buffers (O_DIRECT and a source that is not block-aligned in memory): copying (and
// checksumming) one chunk overlaps the write of the previous ones, and a writer holds at most
// recordChunksInFlight chunk buffers whatever the object size. Several chunks are written at
// once: one 4 MiB pwrite at a time left the device idle between requests (0.3-0.6 of a single
// 16 MiB pwrite here).
const recordChunk = 4 << 20

// recordChunksInFlight bounds the chunk writes of one record in flight (and its buffers).
const recordChunksInFlight = 4

// isAligned reports whether b starts on a blockSize boundary in memory (O_DIRECT needs it).
func isAligned(b []byte) bool {
	return len(b) == 0 || uintptr(unsafe.Pointer(&b[0]))&(blockSize-1) == 0
}

// writeRecord writes the record of hdr and src at [off, off+hdr.recordLen()): the header
// block(s) at off, src's stored bytes at off+hdr.dataOff(), zero-padded to a block boundary.
// With streamSum, hdr.checksum is computed from src while src is being written; the header is
// written once the checksum is known.
//
// src is written straight from the caller's memory when it can be (buffered writes, or
// O_DIRECT with src block-aligned, as Go's large allocations and dram's arenas are): only its
// last partial block is copied. Otherwise it is copied chunk by chunk (writeCopied).
// Measured (BenchmarkSpillWrite, docs/persistence.md): the copy and the checksum cost as much
// CPU per byte as the disk takes to write it on 2 cores; without the copy, and with the
// checksum computed while the device writes, a Put is one large pwrite plus one 4 KiB one.
func (s *Store) writeRecord(w vfs.File, off int64, hdr *recordHeader, src []byte, streamSum bool) error {
	if s.direct && !isAligned(src) {
		if err := s.writeCopied(w, off+hdr.dataOff(), hdr, src, streamSum); err != nil {
			return err
		}
		return writeHeader(w, off, hdr)
	}
	return s.writeFrom(w, off, hdr, src, streamSum)
}

// writeHeader writes hdr's header block(s) at off.
func writeHeader(w vfs.File, off int64, hdr *recordHeader) error {
	hb := getBuf(int(hdr.dataOff()))
	defer putBuf(hb)
	clear(hb)
	hdr.encode(hb)
	_, err := w.WriteAt(hb, off)
	return err
}

// writeFrom writes the record at off without copying src's whole blocks: one pwrite from
// src's own memory runs on another goroutine while this one checksums src (streamSum), then
// writes the header and the last partial block of src (from a zero-padded aligned buffer)
// while the device is still busy with the first pwrite. Nothing needs an order between these
// writes: the index commit that makes the record visible comes after all of them.
func (s *Store) writeFrom(w vfs.File, off int64, hdr *recordHeader, src []byte, streamSum bool) error {
	dataOff := off + hdr.dataOff()
	body := src[:len(src)&^(blockSize-1)]
	tail := src[len(body):]
	done := make(chan error, 1)
	if len(body) > 0 {
		go func() {
			_, err := w.WriteAt(body, dataOff)
			done <- err
		}()
	} else {
		done <- nil
	}
	if streamSum {
		hdr.checksum = base.Checksum(src) // overlaps the pwrite of body
	}
	err := writeHeader(w, off, hdr)
	if err == nil && len(tail) > 0 {
		tb := getBuf(blockSize)
		copy(tb, tail)
		clear(tb[len(tail):])
		_, err = w.WriteAt(tb, dataOff+int64(len(body)))
		putBuf(tb)
	}
	if berr := <-done; berr != nil { // always wait: body must not be in use when Put returns
		return berr
	}
	return err
}

// writeCopied writes src at off (block-aligned) through aligned chunk buffers: fill a buffer
// (copy, checksum) while up to recordChunksInFlight earlier chunks are being written, by one
// goroutine each, so the device sees a queue.
func (s *Store) writeCopied(w vfs.File, off int64, hdr *recordHeader, src []byte, streamSum bool) error {
	var sum hash.Hash64
	if streamSum {
		sum = base.NewChecksum()
	}
	free := make(chan []byte, recordChunksInFlight)
	for range recordChunksInFlight {
		free <- nil
	}
	var werr error
	var werrMu sync.Mutex
	pos := 0
	woff := off
	for pos < len(src) {
		buf := <-free
		if buf == nil {
			buf = getBuf(recordChunk)
		}
		n := min(len(src)-pos, recordChunk)
		l := int(alignUp(int64(n)))
		buf = buf[:l]
		copy(buf, src[pos:pos+n])
		clear(buf[n:])
		if sum != nil {
			sum.Write(src[pos : pos+n])
		}
		go func(buf []byte, off int64) {
			if _, err := w.WriteAt(buf, off); err != nil {
				werrMu.Lock()
				werr = err
				werrMu.Unlock()
			}
			free <- buf
		}(buf, woff)
		pos += n
		woff += int64(l)
	}
	for range recordChunksInFlight {
		if buf := <-free; buf != nil {
			putBuf(buf[:recordChunk])
		}
	}
	if werr != nil {
		return werr
	}
	if sum != nil {
		hdr.checksum = sum.Sum64()
	}
	return nil
}

// inlineCost is what an inline entry counts against capacity.
func inlineCost(key string, ent indexEntry) int64 {
	return int64(len(key)) + indexFixedLen + ent.storedLen
}

// recordLenOf is the aligned length of key's record described by ent.
func recordLenOf(key string, ent indexEntry) int64 {
	return recordDataOff(key) + alignUp(ent.storedLen)
}

// reserve counts n more bytes against capacity, or fails with ErrNoSpace and kicks GC.
// extentBytes says which counter the bytes go to. When the store is full it first punches
// out the dead records queued (a Delete a moment ago) and tries once more, so the room a
// Delete frees is usable by the next write.
func (s *Store) reserve(n int64, extentBytes bool) error {
	if s.ballastGone.Load() {
		return s.errBallastGone()
	}
	err := s.reserveMaybeForce(n, extentBytes, false)
	if err == nil || !s.punch {
		return err
	}
	if _, rerr := s.reclaim(); rerr != nil {
		s.log.Warn("nvme: reclaiming dead space for a write failed", "err", rerr)
	}
	return s.reserveMaybeForce(n, extentBytes, false)
}

// reserveMaybeForce is reserve; with force the bytes are counted even past capacity.
func (s *Store) reserveMaybeForce(n int64, extentBytes, force bool) error {
	if force {
		if extentBytes {
			s.m.extentBytes.Add(n)
		} else {
			s.m.inlineBytes.Add(n)
		}
		return nil
	}
	for {
		eb, ib := s.m.extentBytes.Load(), s.m.inlineBytes.Load()
		if eb+ib+n > s.capacity {
			select {
			case s.gcKick <- struct{}{}:
			default:
			}
			return fmt.Errorf("%w: the store holds %d of %d bytes (%d live; the rest is reclaimed in the background), %d more needed",
				base.ErrNoSpace, eb+ib, s.capacity, s.m.extentLive.Load()+ib, n)
		}
		if extentBytes {
			if s.m.extentBytes.CompareAndSwap(eb, eb+n) {
				return nil
			}
		} else if s.m.inlineBytes.CompareAndSwap(ib, ib+n) {
			return nil
		}
	}
}

// commit writes key's index entry (under its stripe lock) and moves the accounting from the
// old entry, if any, to the new one. e is the extent of the new record (nil when inline).
func (s *Store) commit(key string, ent indexEntry, e *extent, onlyIfAt *indexEntry, durable bool) error {
	mu := s.stripe(key)
	mu.Lock()
	defer mu.Unlock()
	old, found, err := s.getEntry(key, false)
	if err != nil && !errors.Is(err, base.ErrCorruption) {
		return err
	}
	if onlyIfAt != nil && (!found || !sameRecord(old, *onlyIfAt)) {
		return errMoved
	}
	if err := s.db.Set(encodeIndexKey(key), ent.encode(), writeOpts(durable)); err != nil {
		return fmt.Errorf("nvme: index %q: %w", key, err)
	}
	if !durable {
		s.indexDirty.Store(true) // after the write, so the tick that clears it syncs it
	}
	if found {
		s.forgetLocked(key, old)
		s.addDeadRecord(key, old)
	}
	s.m.objects.Add(1)
	if e != nil {
		e.live.Add(recordLenOf(key, ent))
		s.m.extentLive.Add(recordLenOf(key, ent))
	}
	return nil
}

// errMoved reports that GC's copy lost a race with a Put or Delete of the same key.
var errMoved = errors.New("nvme: object changed while GC copied it")

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

// Stat returns key's metadata. Errors: base.ErrObjectNotFound (also for a quarantined object).
func (s *Store) Stat(key string) (base.ObjectMeta, error) {
	if err := base.ValidateKey(key); err != nil {
		return base.ObjectMeta{}, fmt.Errorf("nvme: stat: %w", err)
	}
	if err := s.enter(); err != nil {
		return base.ObjectMeta{}, err
	}
	defer s.exit()
	ent, found, err := s.getEntry(key, false)
	if err != nil {
		return base.ObjectMeta{}, err
	}
	if !found || ent.flags&flagQuarantined != 0 {
		return base.ObjectMeta{}, fmt.Errorf("nvme: %q: %w", key, base.ErrObjectNotFound)
	}
	return base.ObjectMeta{Key: key, Version: ent.version, Size: ent.size, Checksum: ent.checksum}, nil
}

// Footprint returns the bytes version v of key takes on the tier (v == 0: any version): its
// record with header and block padding, or its inline index entry; what Metrics.LiveBytes
// counts for it. The tier engine tallies it per model (docs/memory.md).
//
// Errors: base.ErrObjectNotFound, base.ErrInvalidVersion (another version is stored).
func (s *Store) Footprint(key string, v base.Version) (int64, error) {
	if err := s.enter(); err != nil {
		return 0, err
	}
	defer s.exit()
	ent, found, err := s.getEntry(key, false)
	if err != nil {
		return 0, err
	}
	if !found || ent.flags&flagQuarantined != 0 {
		return 0, fmt.Errorf("nvme: %q: %w", key, base.ErrObjectNotFound)
	}
	if v != 0 && ent.version != v {
		return 0, fmt.Errorf("nvme: %q is at version %d, not %d: %w", key, ent.version, v, base.ErrInvalidVersion)
	}
	if ent.isInline() {
		return inlineCost(key, ent), nil
	}
	return recordLenOf(key, ent), nil
}

// ReadInto reads key's object into dst, which must be exactly its size, and verifies its
// checksum. v == 0 reads any version. On a checksum (or record header) mismatch the record is
// quarantined: this call returns an error wrapping base.ErrCorruption and later calls
// base.ErrObjectNotFound.
//
// Errors: base.ErrObjectNotFound, base.ErrInvalidVersion, base.ErrInvalidParams (dst of the
// wrong length), base.ErrCorruption, or an I/O error.
func (s *Store) ReadInto(key string, v base.Version, dst []byte) error {
	if err := base.ValidateKey(key); err != nil {
		return fmt.Errorf("nvme: read: %w", err)
	}
	if err := s.enter(); err != nil {
		return err
	}
	defer s.exit()
	// GC may move the record between the index lookup and the extent read; the second lookup
	// then finds the new location. Three tries bound the loop.
	s.punchMu.RLock()
	defer s.punchMu.RUnlock()
	for try := 0; ; try++ {
		ent, found, err := s.getEntry(key, true)
		if err != nil {
			return err
		}
		if !found {
			return fmt.Errorf("nvme: %q: %w", key, base.ErrObjectNotFound)
		}
		if ent.flags&flagQuarantined != 0 {
			return fmt.Errorf("nvme: %q was quarantined after a checksum mismatch: %w", key, base.ErrObjectNotFound)
		}
		if v != 0 && ent.version != v {
			return fmt.Errorf("nvme: %q has version %d, not %d: %w", key, ent.version, v, base.ErrInvalidVersion)
		}
		if int64(len(dst)) != ent.size {
			return fmt.Errorf("nvme: read %q: %w: buffer of %d bytes for an object of %d", key, base.ErrInvalidParams, len(dst), ent.size)
		}
		if ent.isInline() {
			err = s.decodeInto(ent, ent.inline, dst)
		} else {
			e := s.acquireExtent(ent.extent)
			if e == nil {
				if try < 3 {
					continue
				}
				err = corruptf("extent %d of %q is missing", ent.extent, key)
			} else {
				err = s.readRecord(e, key, ent, dst)
				s.releaseExtent(e)
			}
		}
		if errors.Is(err, base.ErrCorruption) {
			s.quarantine(key, ent, err)
			return fmt.Errorf("nvme: read %q: %w", key, err)
		}
		return err
	}
}

// decodeInto turns stored bytes into the object in dst and verifies the checksum.
func (s *Store) decodeInto(ent indexEntry, stored, dst []byte) error {
	if ent.flags&flagLZ4 != 0 {
		if err := lz4Decompress(stored, dst); err != nil {
			return err
		}
	} else {
		copy(dst, stored)
	}
	if got := base.Checksum(dst); got != ent.checksum {
		return corruptf("checksum %#x, want %#x", got, ent.checksum)
	}
	return nil
}

// readRecord reads and verifies key's record from e into dst.
func (s *Store) readRecord(e *extent, key string, ent indexEntry, dst []byte) error {
	dataOff := ent.offset + recordDataOff(key)
	if ent.flags&flagLZ4 == 0 {
		return s.readVerified(e, key, ent, dst, dataOff)
	}
	if _, err := s.readHeader(e, key, ent); err != nil {
		return err
	}
	buf := getBuf(int(ent.storedLen))
	defer putBuf(buf)
	if err := readFull(e.r, buf, dataOff); err != nil {
		return fmt.Errorf("extent %d offset %d: %w", e.id, ent.offset, err)
	}
	if err := s.decodeInto(ent, buf, dst); err != nil {
		return fmt.Errorf("extent %d offset %d: %w", e.id, ent.offset, err)
	}
	return nil
}

// readChunk is the unit in which readVerified reads an uncompressed object, so that the
// checksum of one chunk overlaps the read of the next. Objects of up to 4 chunks are read in
// quarters, so that they overlap too.
const readChunk = 1 << 20

// readVerified reads key's uncompressed object (at dataOff in e) into dst and verifies its
// record header and checksum. Reads run on a second goroutine, chunk after chunk, while this
// one checks the header and checksums the chunks already read: with a single pread followed by
// the checksum, the device idled during the checksum (~20% of a read, docs/persistence.md).
func (s *Store) readVerified(e *extent, key string, ent indexEntry, dst []byte, dataOff int64) error {
	chunk := readChunk
	if len(dst) < 4*readChunk {
		chunk = max(blockSize, int(alignUp(int64(len(dst)/4))))
	}
	n := (len(dst) + chunk - 1) / chunk
	read := make(chan error, n) // one result per chunk, in order; the reader never blocks
	go func() {
		for i := 0; i < n; i++ {
			lo, hi := i*chunk, min(len(dst), (i+1)*chunk)
			err := readFull(e.r, dst[lo:hi], dataOff+int64(lo))
			read <- err
			if err != nil {
				return
			}
		}
	}()
	_, herr := s.readHeader(e, key, ent)
	sum := base.NewChecksum()
	var rerr error
	for i := 0; i < n && rerr == nil; i++ {
		// Every chunk's result is received (or the reader stopped) before returning, so
		// nothing writes into dst after ReadInto returns.
		if rerr = <-read; rerr == nil && herr == nil {
			sum.Write(dst[i*chunk : min(len(dst), (i+1)*chunk)])
		}
	}
	switch {
	case herr != nil:
		return herr
	case rerr != nil:
		return fmt.Errorf("extent %d offset %d: %w", e.id, ent.offset, rerr)
	}
	if got := sum.Sum64(); got != ent.checksum {
		return corruptf("extent %d offset %d: checksum %#x, want %#x", e.id, ent.offset, got, ent.checksum)
	}
	return nil
}

// readHeader reads and checks the record header ent points at against ent.
func (s *Store) readHeader(e *extent, key string, ent indexEntry) (recordHeader, error) {
	var small [recordHeaderLen + 256]byte
	n := recordHeaderLen + len(key)
	var b []byte
	if n <= len(small) {
		b = small[:n] // the common case: no allocation
	} else {
		b = make([]byte, n)
	}
	if err := readFull(e.r, b, ent.offset); err != nil {
		return recordHeader{}, fmt.Errorf("extent %d offset %d: %w", e.id, ent.offset, err)
	}
	h, err := decodeRecordHeader(b)
	if err != nil {
		return h, fmt.Errorf("extent %d offset %d: %w", e.id, ent.offset, err)
	}
	if h.key != key || h.version != ent.version || h.size != ent.size || h.storedLen != ent.storedLen ||
		h.checksum != ent.checksum || h.flags != ent.flags&recordFlagsMask {
		return h, corruptf("extent %d offset %d: record of %q v%d does not match the index entry of %q v%d",
			e.id, ent.offset, h.key, h.version, key, ent.version)
	}
	return h, nil
}

// readFull reads len(b) bytes at off. A short read means the file ends early: a torn or
// truncated record, reported as corruption.
func readFull(f vfs.File, b []byte, off int64) error {
	n, err := f.ReadAt(b, off)
	if n == len(b) {
		return nil
	}
	if err == nil || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return corruptf("short read: %d of %d bytes", n, len(b))
	}
	return err
}

// quarantine marks key's record as never to be served again, if the index still holds ent.
func (s *Store) quarantine(key string, ent indexEntry, cause error) {
	s.m.corruptions.Add(1)
	mu := s.stripe(key)
	mu.Lock()
	defer mu.Unlock()
	cur, found, err := s.getEntry(key, true)
	if err != nil || !found || !sameRecord(cur, ent) {
		return // replaced or deleted meanwhile; nothing to mark
	}
	q := cur
	q.flags |= flagQuarantined
	if err := s.db.Set(encodeIndexKey(key), q.encode(), pebble.NoSync); err != nil {
		s.log.Error("nvme: cannot quarantine a corrupt record", "key", key, "err", err, "cause", cause)
		return
	}
	s.indexDirty.Store(true)
	s.forgetLocked(key, cur)
	if cur.isInline() {
		s.m.inlineBytes.Add(inlineCost(key, q)) // the entry stays in the index
	}
	s.m.quarantined.Add(1)
	s.log.Error("nvme: record quarantined", "key", key, "version", ent.version, "err", cause)
	if s.opts.Events.Corruption != nil {
		s.opts.Events.Corruption(key, cause)
	}
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
