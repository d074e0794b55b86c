package transfer

import (
	"bytes"
	"io"
	"sync"

	"github.com/mooncake-go/mooncake/transfer/internal/wire"
)

// smallBuf is the size of pooled frame buffers: a header plus a typical message body. Bodies
// larger than this are read into a buffer that grows with the bytes actually received, so a
// peer that declares a large body and sends nothing costs no memory.
const smallBuf = 16 << 10

// bufPool holds *[]byte of capacity smallBuf, for headers + bodies on both sides.
var bufPool = sync.Pool{New: func() any {
	b := make([]byte, 0, smallBuf)
	return &b
}}

func getBuf() *[]byte { return bufPool.Get().(*[]byte) }

func putBuf(b *[]byte) {
	if cap(*b) != smallBuf {
		return // a grown buffer: let it go, keep the pool's memory bounded
	}
	*b = (*b)[:0]
	bufPool.Put(b)
}

// readBody reads n body bytes from r. It returns the body and the pooled buffer to give back
// with putBuf (nil when the body was too large for the pool).
//
// NB: n has been checked against Limits.MaxBodyLen by wire.DecodeHeader before this is called.
func readBody(r io.Reader, n uint32) ([]byte, *[]byte, error) {
	if n == 0 {
		return nil, nil, nil
	}
	if n <= smallBuf {
		pb := getBuf()
		b := (*pb)[:n]
		if _, err := io.ReadFull(r, b); err != nil {
			putBuf(pb)
			return nil, nil, err
		}
		return b, pb, nil
	}
	// Grow with what arrives (bytes.Buffer doubles), rather than trusting n up front.
	var bb bytes.Buffer
	bb.Grow(smallBuf)
	if _, err := io.CopyN(&bb, r, int64(n)); err != nil {
		if err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		return nil, nil, err
	}
	return bb.Bytes(), nil, nil
}

// discardPool holds scratch buffers for discarding payloads the receiver cannot take.
var discardPool = sync.Pool{New: func() any {
	b := make([]byte, 64<<10)
	return &b
}}

// discard reads and drops n bytes from r, keeping the stream in sync.
func discard(r io.Reader, n int64) error {
	if n == 0 {
		return nil
	}
	pb := discardPool.Get().(*[]byte)
	defer discardPool.Put(pb)
	got, err := io.CopyBuffer(io.Discard, io.LimitReader(r, n), *pb)
	if err == nil && got < n {
		// CopyBuffer returns nil at EOF; the stream ended inside the payload.
		err = io.ErrUnexpectedEOF
	}
	return err
}

// encodeFrame encodes header + body of m into a pooled buffer. The caller fills the header's
// remaining fields through h before the call; BodyLen is set here.
func encodeFrame(h *wire.Header, m Message) *[]byte {
	pb := getBuf()
	e := wire.Encoder{B: (*pb)[:wire.HeaderLen]}
	if m != nil {
		m.Encode(&e)
	}
	h.BodyLen = uint32(len(e.B) - wire.HeaderLen)
	wire.PutHeader(e.B, h)
	*pb = e.B
	return pb
}
