package nvme

import (
	"errors"
	"math/bits"
	"sync"
	"unsafe"

	"github.com/pierrec/lz4/v4"
)

var errNoFd = errors.New("nvme: file has no OS descriptor")

// Aligned buffers. O_DIRECT needs the memory, the offset and the length of every write aligned
// to blockSize. A record's stored bytes are written straight from the caller's memory when it
// is aligned; what is written from these buffers is the rest: the header block(s), the
// zero-padded last partial block of the data, and the chunks of a source that is not aligned
// (writeCopied). Reads of lz4 records and GC copies use them too. Buffers come from pools by
// power-of-two size class (64 KiB .. 64 MiB); larger ones are allocated per use.
const (
	minBufClassShift = 16
	maxBufClassShift = 26
)

var bufPools [maxBufClassShift - minBufClassShift + 1]sync.Pool

// alignedAlloc returns n bytes whose first byte is blockSize-aligned.
func alignedAlloc(n int) []byte {
	b := make([]byte, n+blockSize)
	off := int(-uintptr(unsafe.Pointer(&b[0])) & (blockSize - 1))
	return b[off : off+n : off+n]
}

// getBuf returns an aligned buffer of length n. The caller owns it until putBuf.
func getBuf(n int) []byte {
	shift := bits.Len(uint(n - 1))
	if shift < minBufClassShift {
		shift = minBufClassShift
	}
	if shift > maxBufClassShift {
		return alignedAlloc(n)
	}
	if p, ok := bufPools[shift-minBufClassShift].Get().(*[]byte); ok {
		return (*p)[:n]
	}
	return alignedAlloc(1 << shift)[:n]
}

// putBuf returns a buffer from getBuf to its pool. The caller must not use it afterwards.
func putBuf(b []byte) {
	c := cap(b)
	shift := bits.Len(uint(c - 1))
	if c != 1<<shift || shift < minBufClassShift || shift > maxBufClassShift {
		return
	}
	b = b[:c]
	bufPools[shift-minBufClassShift].Put(&b)
}

// lz4 helpers. A compressor holds a hash table, so they are pooled. CompressorCCompat (the
// reference LZ4_compress_fast algorithm) is used rather than lz4.Compressor: on zero-heavy fp16
// data, the only data we compress in full (see lz4Promising), it measured 3x faster here
// (4 MiB with 60% zeros: 26 ms vs 83 ms) for the same ratio within 4%.
var compressorPool = sync.Pool{New: func() any { return new(lz4.CompressorCCompat) }}

// lz4Compress compresses src into dst and returns the compressed length, or 0 when the result
// does not fit in dst. Callers size dst to the largest length they would keep, so "does not
// fit" means "does not save enough".
func lz4Compress(src, dst []byte) int {
	c := compressorPool.Get().(*lz4.CompressorCCompat)
	n, err := c.CompressBlock(src, dst)
	compressorPool.Put(c)
	if err != nil {
		return 0
	}
	return n
}

const (
	// lz4MinLen: values shorter than this are never compressed (the block overhead eats the gain).
	lz4MinLen = 256
	// lz4SampleLen: values longer than 4 samples are first tried on one sample from their
	// middle; if that does not save enough the whole value is stored raw. fp16 K/V activations
	// are close to incompressible, and compressing 16 KiB costs far less than a whole 16 MiB.
	lz4SampleLen = 16 << 10
)

var samplePool = sync.Pool{New: func() any { b := make([]byte, lz4SampleLen); return &b }}

// lz4Promising reports whether compressing data is worth trying, judged from one sample.
func lz4Promising(data []byte, limit func(int) int) bool {
	if len(data) < 4*lz4SampleLen {
		return true
	}
	mid := len(data) / 2
	sample := data[mid-lz4SampleLen/2 : mid+lz4SampleLen/2]
	p := samplePool.Get().(*[]byte)
	n := lz4Compress(sample, (*p)[:limit(len(sample))])
	samplePool.Put(p)
	return n > 0
}

// lz4Decompress decompresses src into dst, which must be exactly the object's size.
func lz4Decompress(src, dst []byte) error {
	n, err := lz4.UncompressBlock(src, dst)
	if err != nil {
		return corruptf("lz4: %v", err)
	}
	if n != len(dst) {
		return corruptf("lz4: %d bytes decompressed, want %d", n, len(dst))
	}
	return nil
}
