package nvme

import (
	"errors"
	"fmt"
	"io"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/mooncake-go/mooncake/internal/base"
)

// Reading objects: Stat, Footprint and ReadInto, the verified reads of extent records behind
// them, and the quarantine of a record that fails its checks.

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
