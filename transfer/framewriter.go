package transfer

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// frameWriter serializes whole frames onto a connection for many goroutines, and coalesces
// the small frames of concurrent writers into one syscall: a writer that sees others queued
// behind it leaves its bytes in the buffer, and the last writer of a burst flushes. Payload
// frames go out with one vectored write (header+body, payload) after the buffer is flushed.
//
// Invariant: when mu is free and waiting is 0, the buffer is empty (the last writer flushed),
// so no frame ever sits unsent with nobody to send it.
type frameWriter struct {
	mu      sync.Mutex // held for a whole frame; protects bw and pw
	waiting atomic.Int32
	bw      *bufio.Writer
	c       net.Conn
	// pw bounds the progress of writes when non-nil (the server's: a peer that stops
	// reading must not hold a response, and the memory it pins, for ever). bw writes
	// through it.
	pw *progressWriter
}

// newFrameWriter returns a frame writer on c. With a positive stall, every write must see
// the peer take frameProgressChunk bytes (or the rest of the write) within stall, else it
// fails with an error wrapping errWriteStalled.
func newFrameWriter(c net.Conn, stall time.Duration) *frameWriter {
	w := &frameWriter{c: c}
	var dst io.Writer = c
	if stall > 0 {
		w.pw = &progressWriter{c: c, timeout: stall}
		dst = w.pw
	}
	w.bw = bufio.NewWriterSize(dst, 32<<10)
	return w
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
	if w.pw != nil {
		return w.pw.writeBuffers(&bufs)
	}
	_, err := bufs.WriteTo(w.c)
	return err
}

// errWriteStalled: the peer stopped taking the bytes of a frame (ServerOptions.FrameTimeout).
var errWriteStalled = errors.New("transfer: the peer stopped reading: a frame made no progress within the frame timeout")

// progressWriter writes to c with a write deadline that moves as the peer takes bytes: a
// write that times out after frameProgressChunk bytes or more since the deadline was set goes
// on with a new one, so a slow reader is served and a stalled one fails. The deadline is set
// lazily: one still 7/8 of the timeout away is kept. Used under frameWriter.mu only.
type progressWriter struct {
	c        net.Conn
	timeout  time.Duration
	deadline time.Time
	sinceArm int64 // bytes written since deadline was set
}

func (pw *progressWriter) arm() {
	now := time.Now()
	if !pw.deadline.IsZero() && pw.deadline.Sub(now) > pw.timeout-pw.timeout/8 {
		return
	}
	pw.deadline, pw.sinceArm = now.Add(pw.timeout), 0
	_ = pw.c.SetWriteDeadline(pw.deadline)
}

// goOn accounts n bytes written and says whether err (non-nil) is a timeout after enough
// progress, after which the write continues under a new deadline.
func (pw *progressWriter) goOn(n int64, err error) (bool, error) {
	pw.sinceArm += n
	if !isTimeout(err) {
		return false, err
	}
	if pw.sinceArm >= frameProgressChunk {
		pw.deadline = time.Time{} // re-arm
		return true, nil
	}
	return false, fmt.Errorf("%w (%s for %d bytes): %w", errWriteStalled, pw.timeout, frameProgressChunk, err)
}

func (pw *progressWriter) Write(p []byte) (int, error) {
	total := 0
	for {
		pw.arm()
		n, err := pw.c.Write(p[total:])
		total += n
		if err == nil {
			pw.sinceArm += int64(n)
			return total, nil
		}
		again, err := pw.goOn(int64(n), err)
		if !again {
			return total, err
		}
	}
}

// writeBuffers writes bufs (one vectored write when nothing stalls), consuming them.
func (pw *progressWriter) writeBuffers(bufs *net.Buffers) error {
	for {
		pw.arm()
		n, err := bufs.WriteTo(pw.c)
		if err == nil {
			pw.sinceArm += n
			return nil
		}
		if again, err := pw.goOn(n, err); !again {
			return err
		}
	}
}
