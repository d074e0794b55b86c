package nvme

import (
	"errors"
	"fmt"
	"hash"
	"sync"
	"unsafe"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/mooncake-go/mooncake/internal/base"
)

// Writing objects: Put and its variants, the record writes to extent files (straight from the
// caller's memory where O_DIRECT allows), the capacity reservation and the index commit.

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

func (s *Store) lz4Limit(n int) int { return int(float64(n) * (1 - s.opts.LZ4MinSaving)) }

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
