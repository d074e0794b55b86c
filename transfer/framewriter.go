package transfer

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"sync"
	"sync/atomic"
)

// frameWriter serializes whole frames onto a connection for many goroutines, and coalesces
// the small frames of concurrent writers into one syscall: a writer that sees others queued
// behind it leaves its bytes in the buffer, and the last writer of a burst flushes. Payload
// frames go out with one vectored write (header+body, payload) after the buffer is flushed.
//
// Invariant: when mu is free and waiting is 0, the buffer is empty (the last writer flushed),
// so no frame ever sits unsent with nobody to send it.
type frameWriter struct {
	mu      sync.Mutex // held for a whole frame; protects bw
	waiting atomic.Int32
	bw      *bufio.Writer
	c       net.Conn
}

func newFrameWriter(c net.Conn) *frameWriter {
	return &frameWriter{c: c, bw: bufio.NewWriterSize(c, 32<<10)}
}

// lock takes the write lock. The caller must call unlock (or unlockFunc) exactly once.
func (w *frameWriter) lock() {
	w.waiting.Add(1)
	w.mu.Lock()
}

// unlock flushes the buffer if nobody else is queued, then releases the lock.
func (w *frameWriter) unlock() error { return w.unlockFunc(nil) }

// unlockFunc is unlock with a function run after the flush and before the lock is released
// (to reset a write deadline that covered the flush).
func (w *frameWriter) unlockFunc(after func()) error {
	var err error
	if w.waiting.Add(-1) == 0 && w.bw.Buffered() > 0 {
		err = w.bw.Flush()
	}
	if after != nil {
		after()
	}
	w.mu.Unlock()
	return err
}

// writeLocked writes one frame. REQUIRES: w.mu (via lock).
func (w *frameWriter) writeLocked(hdrBody, payload []byte) error {
	if len(payload) == 0 {
		_, err := w.bw.Write(hdrBody)
		return err
	}
	if w.bw.Buffered() > 0 {
		if err := w.bw.Flush(); err != nil {
			return err
		}
	}
	bufs := net.Buffers{hdrBody, payload}
	_, err := bufs.WriteTo(w.c)
	return err
}

// writeStreamLocked writes hdrBody then exactly n bytes from r. io.CopyN hands the connection
// an io.LimitedReader, which *net.TCPConn sends with sendfile when r is an *os.File.
// REQUIRES: w.mu (via lock).
func (w *frameWriter) writeStreamLocked(hdrBody []byte, r io.Reader, n int64) error {
	if _, err := w.bw.Write(hdrBody); err != nil {
		return err
	}
	if err := w.bw.Flush(); err != nil {
		return err
	}
	got, err := io.CopyN(w.c, r, n)
	if err == nil && got != n {
		err = io.ErrUnexpectedEOF
	}
	if err != nil {
		return fmt.Errorf("read source gave %d of %d bytes: %w", got, n, err)
	}
	return nil
}
