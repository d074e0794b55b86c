package nvme

import (
	"encoding/binary"
	"fmt"

	"github.com/mooncake-go/mooncake/internal/base"
)

// The on-disk formats (drawn in doc.go). All integers are little-endian.

// blockSize is the alignment of extent records and of O_DIRECT writes. 4 KiB is the logical
// block size of every NVMe namespace we target and the page size of the kernel.
const blockSize = 4096

// alignUp rounds n up to a multiple of blockSize.
func alignUp(n int64) int64 { return (n + blockSize - 1) &^ (blockSize - 1) }

// Extent file header: the first block of every extent file.
const (
	extentMagic         = "MCNVMEXT"
	extentFormatVersion = 1
	extentHeaderLen     = 28 // bytes used of the first block
)

func encodeExtentHeader(b []byte, id uint64) {
	clear(b[:blockSize])
	copy(b[0:8], extentMagic)
	binary.LittleEndian.PutUint16(b[8:10], extentFormatVersion)
	binary.LittleEndian.PutUint32(b[12:16], blockSize)
	binary.LittleEndian.PutUint64(b[16:24], id)
	binary.LittleEndian.PutUint32(b[24:28], uint32(base.Checksum(b[0:24])))
}

// decodeExtentHeader checks an extent file's first bytes and returns its id.
func decodeExtentHeader(b []byte) (uint64, error) {
	if len(b) < extentHeaderLen {
		return 0, corruptf("extent header: %d bytes, want %d", len(b), extentHeaderLen)
	}
	if string(b[0:8]) != extentMagic {
		return 0, corruptf("extent header: bad magic %q", b[0:8])
	}
	if got, want := binary.LittleEndian.Uint32(b[24:28]), uint32(base.Checksum(b[0:24])); got != want {
		return 0, corruptf("extent header: checksum %#x, want %#x", got, want)
	}
	if v := binary.LittleEndian.Uint16(b[8:10]); v != extentFormatVersion {
		return 0, corruptf("extent header: format version %d, this build reads %d", v, extentFormatVersion)
	}
	if bs := binary.LittleEndian.Uint32(b[12:16]); bs != blockSize {
		return 0, corruptf("extent header: block size %d, this build writes %d", bs, blockSize)
	}
	return binary.LittleEndian.Uint64(b[16:24]), nil
}

// Extent record header.
const (
	recordMagic = 0x3152434d // "MCR1" read little-endian
	// recordFormatVersion 2 starts the stored bytes on a block boundary (format 1 had them
	// right after the key), so a Put can write the caller's bytes with O_DIRECT without
	// copying them into an aligned buffer first.
	recordFormatVersion = 2
	recordHeaderLen     = 48 // fixed part; the key follows, then zero padding to a block boundary, then the stored bytes
)

// Record and index flags.
const (
	flagLZ4         = 1 << 0 // stored bytes are one lz4 block of the object's bytes
	flagInline      = 1 << 1 // index only: the stored bytes follow the index entry
	flagQuarantined = 1 << 2 // index only: a read found a checksum mismatch; never served
	recordFlagsMask = flagLZ4
	indexFlagsMask  = flagLZ4 | flagInline | flagQuarantined
)

// recordHeader is the decoded fixed part of an extent record plus its key.
type recordHeader struct {
	flags     uint8
	key       string
	version   base.Version
	size      int64  // bytes of the object (uncompressed)
	storedLen int64  // bytes that follow the key
	checksum  uint64 // base.Checksum of the object's uncompressed bytes
}

// headerLen is the bytes of the header with its key.
func (h *recordHeader) headerLen() int64 { return recordHeaderLen + int64(len(h.key)) }

// dataOff is the offset of the stored bytes from the start of the record: the header and key
// padded to a block boundary.
func (h *recordHeader) dataOff() int64 { return recordDataOff(h.key) }

// recordLen is the aligned length the record takes in its extent.
func (h *recordHeader) recordLen() int64 { return h.dataOff() + alignUp(h.storedLen) }

// recordDataOff is the offset of the stored bytes in key's record.
func recordDataOff(key string) int64 { return alignUp(recordHeaderLen + int64(len(key))) }

// encode writes the header and key into b[:h.headerLen()]. The header checksum covers the
// bytes from offset 8 to the end of the key.
func (h *recordHeader) encode(b []byte) {
	n := h.headerLen()
	binary.LittleEndian.PutUint32(b[0:4], recordMagic)
	b[8] = recordFormatVersion
	b[9] = h.flags
	binary.LittleEndian.PutUint16(b[10:12], uint16(len(h.key)))
	binary.LittleEndian.PutUint32(b[12:16], 0)
	binary.LittleEndian.PutUint64(b[16:24], uint64(h.version))
	binary.LittleEndian.PutUint64(b[24:32], uint64(h.size))
	binary.LittleEndian.PutUint64(b[32:40], uint64(h.storedLen))
	binary.LittleEndian.PutUint64(b[40:48], h.checksum)
	copy(b[recordHeaderLen:n], h.key)
	binary.LittleEndian.PutUint32(b[4:8], uint32(base.Checksum(b[8:n])))
}

// maxObjectSize bounds sizes read from disk before anything is allocated from them.
const maxObjectSize = 1 << 40

// decodeRecordHeader decodes the record header at the start of b. b must hold at least
// recordHeaderLen bytes; if it holds fewer than the header plus its key, the error says how
// many are needed (ErrCorruption-wrapped, as a torn record is indistinguishable from one).
func decodeRecordHeader(b []byte) (recordHeader, error) {
	var h recordHeader
	if len(b) < recordHeaderLen {
		return h, corruptf("record header: %d bytes, want %d", len(b), recordHeaderLen)
	}
	if m := binary.LittleEndian.Uint32(b[0:4]); m != recordMagic {
		return h, corruptf("record header: bad magic %#x", m)
	}
	klen := int(binary.LittleEndian.Uint16(b[10:12]))
	if klen == 0 || klen > base.MaxKeyLen {
		return h, corruptf("record header: key length %d", klen)
	}
	n := recordHeaderLen + klen
	if len(b) < n {
		return h, corruptf("record header: %d bytes, the key needs %d", len(b), n)
	}
	if got, want := binary.LittleEndian.Uint32(b[4:8]), uint32(base.Checksum(b[8:n])); got != want {
		return h, corruptf("record header: checksum %#x, want %#x", got, want)
	}
	if b[8] != recordFormatVersion {
		return h, corruptf("record header: format version %d, this build reads %d", b[8], recordFormatVersion)
	}
	h.flags = b[9]
	if h.flags&^recordFlagsMask != 0 {
		return h, corruptf("record header: unknown flags %#x", h.flags)
	}
	h.version = base.Version(binary.LittleEndian.Uint64(b[16:24]))
	var err error
	if h.size, h.storedLen, err = decodeSizes(b[24:40], h.flags, "record header", "record"); err != nil {
		return h, err
	}
	h.checksum = binary.LittleEndian.Uint64(b[40:48])
	h.key = string(b[recordHeaderLen:n])
	return h, nil
}

// decodeSizes decodes the object size and the stored size at b[0:16], the same fields of
// record headers and index entries: both at most maxObjectSize (so nothing is allocated from
// a corrupt length), and equal unless the stored bytes are lz4. what ("record header", "index
// entry") and value ("record", "value") name the structure in errors.
func decodeSizes(b []byte, flags uint8, what, value string) (size, stored int64, err error) {
	sz := binary.LittleEndian.Uint64(b[0:8])
	st := binary.LittleEndian.Uint64(b[8:16])
	if sz > maxObjectSize || st > maxObjectSize {
		return 0, 0, corruptf("%s: size %d / stored %d over %d", what, sz, st, uint64(maxObjectSize))
	}
	if flags&flagLZ4 == 0 && sz != st {
		return 0, 0, corruptf("%s: uncompressed %s with size %d != stored %d", what, value, sz, st)
	}
	return int64(sz), int64(st), nil
}

// Index keys: pebble keys are a one-byte namespace then the rest.
const (
	indexPrefixObject = 'o' // 'o' + object key -> indexEntry
	indexPrefixMeta   = 'm' // 'm' + name -> store metadata
)

var metaFormatKey = []byte("mformat")

// metaLabelPrefix + u16 label (little-endian) -> the label's name (SetLabelName).
var metaLabelPrefix = []byte("mlabel")

func labelNameKey(label uint16) []byte {
	return binary.LittleEndian.AppendUint16(append([]byte(nil), metaLabelPrefix...), label)
}

// indexFormatVersion is stored under metaFormatKey; Open refuses a store of another version.
// "2": extent records of format 2 (stored bytes block-aligned). A store of format "1" is
// refused (base.ErrNotSupported) rather than read with the wrong data offsets.
const indexFormatVersion = "2"

func encodeIndexKey(key string) []byte {
	b := make([]byte, 1+len(key))
	b[0] = indexPrefixObject
	copy(b[1:], key)
	return b
}

// decodeIndexKey returns the object key of an index key.
func decodeIndexKey(k []byte) (string, error) {
	if len(k) == 0 || k[0] != indexPrefixObject {
		return "", corruptf("index key %q: not an object key", k)
	}
	key := string(k[1:])
	if err := base.ValidateKey(key); err != nil {
		return "", corruptf("index key: %v", err)
	}
	return key, nil
}

// indexEntry is the value of an object's index key.
type indexEntry struct {
	flags     uint8
	version   base.Version
	size      int64
	storedLen int64
	checksum  uint64
	extent    uint64 // extent id (not inline)
	offset    int64  // record offset in the extent (not inline)
	inline    []byte // stored bytes (inline only); aliases the decoded buffer
	// label is the caller's 16-bit label of the object (PutLabeled; 0: none), kept in the
	// first two of the entry's formerly reserved bytes. The store does not interpret it.
	label uint16
}

const (
	indexFormatByte  = 1
	indexFixedLen    = 40
	indexExtentLen   = indexFixedLen + 16
	indexEntryMaxLen = indexFixedLen + 1<<20 // inline values are at most 1 MiB (Validate)
)

func (e *indexEntry) isInline() bool { return e.flags&flagInline != 0 }

func (e *indexEntry) encode() []byte {
	n := indexExtentLen
	if e.isInline() {
		n = indexFixedLen + len(e.inline)
	}
	b := make([]byte, n)
	b[0] = indexFormatByte
	b[1] = e.flags
	binary.LittleEndian.PutUint16(b[2:4], e.label)
	binary.LittleEndian.PutUint64(b[8:16], uint64(e.version))
	binary.LittleEndian.PutUint64(b[16:24], uint64(e.size))
	binary.LittleEndian.PutUint64(b[24:32], uint64(e.storedLen))
	binary.LittleEndian.PutUint64(b[32:40], e.checksum)
	if e.isInline() {
		copy(b[indexFixedLen:], e.inline)
	} else {
		binary.LittleEndian.PutUint64(b[40:48], e.extent)
		binary.LittleEndian.PutUint64(b[48:56], uint64(e.offset))
	}
	return b
}

// decodeIndexEntry decodes an index value. The returned entry's inline slice aliases b.
func decodeIndexEntry(b []byte) (indexEntry, error) {
	var e indexEntry
	if len(b) < indexFixedLen {
		return e, corruptf("index entry: %d bytes, want at least %d", len(b), indexFixedLen)
	}
	if b[0] != indexFormatByte {
		return e, corruptf("index entry: format %d, this build reads %d", b[0], indexFormatByte)
	}
	e.flags = b[1]
	if e.flags&^indexFlagsMask != 0 {
		return e, corruptf("index entry: unknown flags %#x", e.flags)
	}
	e.label = binary.LittleEndian.Uint16(b[2:4])
	for _, c := range b[4:8] {
		if c != 0 {
			return e, corruptf("index entry: reserved bytes are not zero")
		}
	}
	e.version = base.Version(binary.LittleEndian.Uint64(b[8:16]))
	var err error
	if e.size, e.storedLen, err = decodeSizes(b[16:32], e.flags, "index entry", "value"); err != nil {
		return e, err
	}
	e.checksum = binary.LittleEndian.Uint64(b[32:40])
	if e.isInline() {
		if int64(len(b)-indexFixedLen) != e.storedLen {
			return e, corruptf("index entry: inline value of %d bytes, header says %d", len(b)-indexFixedLen, e.storedLen)
		}
		e.inline = b[indexFixedLen:]
		return e, nil
	}
	if len(b) != indexExtentLen {
		return e, corruptf("index entry: %d bytes, want %d", len(b), indexExtentLen)
	}
	e.extent = binary.LittleEndian.Uint64(b[40:48])
	off := binary.LittleEndian.Uint64(b[48:56])
	if off < blockSize || off%blockSize != 0 || off > maxObjectSize*1024 {
		return e, corruptf("index entry: bad record offset %d", off)
	}
	e.offset = int64(off)
	return e, nil
}

// corruptionError marks an error as ErrCorruption (errors.Is(err, base.ErrCorruption)).
type corruptionError struct{ msg string }

func (e *corruptionError) Error() string        { return "nvme: " + e.msg + ": " + base.ErrCorruption.Error() }
func (e *corruptionError) Is(target error) bool { return target == base.ErrCorruption }

func corruptf(format string, args ...any) error {
	return &corruptionError{msg: fmt.Sprintf(format, args...)}
}
