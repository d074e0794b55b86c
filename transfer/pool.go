package transfer

import (
	"bytes"
	"io"
	"sync"

	"github.com/mooncake-go/mooncake/transfer/internal/wire"
)

// Pooled buffers. Frames are encoded into frameBuf-sized buffers (a header and a typical
// control body; they grow for larger bodies and go back to the pool up to maxPooled). Bodies
// are read into pooled buffers of frameBuf or smallBuf bytes; larger bodies are read into a
// buffer that grows with the bytes actually received, so a peer that declares a large body and
// sends nothing costs no memory.
const (
	frameBuf  = 512
	smallBuf  = 16 << 10
	maxPooled = 64 << 10
)

// framePool holds *[]byte of capacity >= frameBuf and <= maxPooled.
var framePool = sync.Pool{New: func() any {
	b := make([]byte, 0, frameBuf)
	return &b
}}

// bodyPool holds *[]byte of capacity smallBuf.
var bodyPool = sync.Pool{New: func() any {
	b := make([]byte, 0, smallBuf)
	return &b
}}

// getBuf returns a frame buffer of length 0.
func getBuf() *[]byte { return framePool.Get().(*[]byte) }

// putBuf returns a buffer from getBuf or readBody to its pool.
func putBuf(b *[]byte) {
	switch c := cap(*b); {
	case c == smallBuf:
		*b = (*b)[:0]
		bodyPool.Put(b)
	case c >= frameBuf && c <= maxPooled:
		*b = (*b)[:0]
		framePool.Put(b)
	}
	// Larger buffers are let go, which keeps the pools' memory bounded.
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
		var pb *[]byte
		if n <= frameBuf {
			pb = getBuf()
		} else {
			pb = bodyPool.Get().(*[]byte)
		}
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

// readBufSize is the size of each connection's read buffer. It batches the reads of small
// pipelined frames; payloads larger than it are read straight into their destination, so it
// also bounds the bytes of a payload that are copied through the buffer (at most one buffer's
// worth, when a header and the start of its payload arrive in one read).
const readBufSize = 16 << 10
