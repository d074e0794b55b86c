package nvme

import (
	"bytes"
	"testing"
)

// The decoders of everything read from disk are fuzzed; the seed corpus in
// testdata/fuzz/<FuzzName>/ runs in the normal suite. A decoded value must re-encode to the
// bytes it came from (the formats have exactly one encoding).

func FuzzRecordHeader(f *testing.F) {
	h := recordHeader{flags: flagLZ4, key: "layer0/kv/42", version: 7, size: 1 << 20, storedLen: 1000, checksum: 0xfeed}
	b := make([]byte, h.headerLen())
	h.encode(b)
	f.Add(b)
	f.Add(b[:recordHeaderLen])
	f.Fuzz(func(t *testing.T, b []byte) {
		h, err := decodeRecordHeader(b)
		if err != nil {
			return
		}
		out := make([]byte, h.headerLen())
		h.encode(out)
		if !bytes.Equal(out, b[:len(out)]) {
			t.Fatalf("re-encoding %x gave %x", b[:len(out)], out)
		}
		if h.recordLen()%blockSize != 0 || h.recordLen() < h.headerLen()+h.storedLen {
			t.Fatalf("recordLen %d for %+v", h.recordLen(), h)
		}
	})
}

func FuzzIndexEntry(f *testing.F) {
	f.Add((&indexEntry{version: 3, size: 10, storedLen: 10, checksum: 1, extent: 2, offset: 8192}).encode())
	f.Add((&indexEntry{flags: flagInline | flagLZ4, version: 3, size: 100, storedLen: 3, inline: []byte{1, 2, 3}}).encode())
	f.Fuzz(func(t *testing.T, b []byte) {
		e, err := decodeIndexEntry(b)
		if err != nil {
			return
		}
		if out := e.encode(); !bytes.Equal(out, b) {
			t.Fatalf("re-encoding %x gave %x", b, out)
		}
	})
}

func FuzzIndexKey(f *testing.F) {
	f.Add(encodeIndexKey("a"))
	f.Add([]byte("mformat"))
	f.Fuzz(func(t *testing.T, b []byte) {
		key, err := decodeIndexKey(b)
		if err != nil {
			return
		}
		if out := encodeIndexKey(key); !bytes.Equal(out, b) {
			t.Fatalf("re-encoding %q gave %q", b, out)
		}
	})
}

func FuzzExtentHeader(f *testing.F) {
	b := make([]byte, blockSize)
	encodeExtentHeader(b, 42)
	f.Add(b[:extentHeaderLen])
	f.Fuzz(func(t *testing.T, b []byte) {
		id, err := decodeExtentHeader(b)
		if err != nil {
			return
		}
		out := make([]byte, blockSize)
		encodeExtentHeader(out, id)
		if !bytes.Equal(out[:extentHeaderLen], b[:extentHeaderLen]) {
			t.Fatalf("re-encoding %x gave %x", b[:extentHeaderLen], out[:extentHeaderLen])
		}
	})
}
