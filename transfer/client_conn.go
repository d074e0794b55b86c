package transfer

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"syscall"
	"time"

	"github.com/mooncake-go/mooncake/internal/base"
	"github.com/mooncake-go/mooncake/transfer/internal/wire"
)

// One connection of a peer's pool (clientConn): calls pipelined on it, matched to their
// responses by request id, one reader goroutine that completes them, and what a deadline, a
// cancellation or a broken stream does to the calls in flight.

// clientConn is one connection of a peer's pool: one reader goroutine (readLoop) and any
// number of callers writing frames through w.
type clientConn struct {
	c    *Client
	nc   net.Conn
	br   *bufio.Reader // only readLoop uses it (after the handshake)
	addr string

	w *frameWriter // serializes and coalesces frame writes

	mu struct {
		sync.Mutex // protects the fields below
		// pending holds the calls sent and not yet claimed by readLoop. A call leaves it
		// either when readLoop claims its response (and then readLoop alone writes its
		// fields and dst until it closes call.done) or when its caller gives up.
		pending map[uint64]*call
		err     error // non-nil once the connection is broken
		// lastUsed is when the last call was sent or completed.
		lastUsed time.Time
	}
	done chan struct{} // closed when readLoop returns
}

// alive reports whether the connection is not broken.
func (cc *clientConn) alive() bool {
	cc.mu.Lock()
	defer cc.mu.Unlock()
	return cc.mu.err == nil
}

// idleLongerThan reports whether the connection has had no call for longer than d (never,
// for d <= 0): the pool then replaces it rather than send into a connection the server may
// be closing as idle (ClientOptions.IdleTimeout).
func (cc *clientConn) idleLongerThan(d time.Duration) bool {
	if d <= 0 {
		return false
	}
	cc.mu.Lock()
	defer cc.mu.Unlock()
	return len(cc.mu.pending) == 0 && time.Since(cc.mu.lastUsed) > d
}

// close breaks the connection: pending calls fail with err (nil: a generic error), and
// waits for readLoop to exit.
func (cc *clientConn) close(err error) {
	cc.fail(err)
	<-cc.done
}

// fail marks the connection broken and closes the socket (readLoop then fails the pending
// calls and exits). It does not wait.
func (cc *clientConn) fail(err error) {
	if err == nil {
		err = fmt.Errorf("transfer: connection to %s closed: %w", cc.addr, base.ErrUnavailable)
	}
	cc.mu.Lock()
	if cc.mu.err == nil {
		cc.mu.err = err
	}
	cc.mu.Unlock()
	cc.nc.Close()
}

// roundTrip sends cl on cc and waits for its response, the end of ctx or the connection's
// failure. cl goes into pending before its frame is written, so readLoop can match however
// fast the answer comes. When ctx ends first, a call readLoop has not claimed is withdrawn;
// one it is reading breaks the connection unless it completes at once, because cl.dst must
// not be written after roundTrip returns.
func (cc *clientConn) roundTrip(ctx context.Context, cl *call) error {
	id := cc.c.nextID.Add(1)
	cl.done = make(chan struct{})
	cl.err, cl.n, cl.digest, cl.reported = nil, 0, 0, false

	h := wire.Header{Op: cl.op, RequestID: id, PayloadLen: uint64(len(cl.payload))}
	if cc.c.opts.Checksums {
		switch {
		case len(cl.payload) > 0:
			h.Flags |= wire.FlagChecksum
			h.PayloadChecksum = base.Checksum(cl.payload)
		case cl.op.ResponsePayload():
			h.Flags |= wire.FlagChecksum // ask the server to checksum its payload
		}
	}
	out := encodeFrame(&h, cl.req)
	defer putBuf(out)
	if h.BodyLen > cc.c.opts.Limits.MaxBodyLen {
		return fmt.Errorf("%w: transfer: %s request body of %d bytes is over the limit %d",
			base.ErrTooLarge, cl.op, h.BodyLen, cc.c.opts.Limits.MaxBodyLen)
	}
	if h.PayloadLen > cc.c.opts.Limits.MaxPayloadLen {
		return fmt.Errorf("%w: transfer: %s payload of %d bytes is over the limit %d",
			base.ErrTooLarge, cl.op, h.PayloadLen, cc.c.opts.Limits.MaxPayloadLen)
	}

	cc.mu.Lock()
	if err := cc.mu.err; err != nil {
		cc.mu.Unlock()
		return &connError{err: err}
	}
	cl.solo = len(cc.mu.pending) == 0 && time.Since(cc.mu.lastUsed) >= idleResendMin
	cc.mu.pending[id] = cl
	cc.mu.lastUsed = time.Now()
	cc.mu.Unlock()

	if written, err := cc.send(ctx, *out, cl.payload); err != nil {
		if !written {
			cc.mu.Lock()
			_, mine := cc.mu.pending[id]
			delete(cc.mu.pending, id)
			cc.mu.Unlock()
			if mine {
				return ctxError(err, cl.op.String()+" to "+cc.addr)
			}
			// readLoop failed the connection meanwhile and completes the call.
			<-cl.done
			return cl.err
		}
		cc.fail(&connError{err: err, peerClosed: errors.Is(err, syscall.EPIPE) || errors.Is(err, syscall.ECONNRESET)})
		// readLoop fails every pending call, ours included, and closes done.
		<-cl.done
		if ctx.Err() != nil {
			return ctxError(ctx.Err(), cl.op.String()+" to "+cc.addr)
		}
		return cl.err
	}

	select {
	case <-cl.done:
		return cl.err
	case <-ctx.Done():
	}
	cc.mu.Lock()
	if _, ok := cc.mu.pending[id]; ok {
		// Not claimed: its response, if it ever comes, will be discarded by readLoop.
		delete(cc.mu.pending, id)
		cc.mu.Unlock()
		return ctxError(ctx.Err(), cl.op.String()+" to "+cc.addr)
	}
	cc.mu.Unlock()
	// readLoop is reading our response right now. It may be a payload into the caller's
	// dst (which must not be written after we return) or a body from a peer that stalls:
	// unless it completes at once, break the connection so readLoop stops, then wait.
	select {
	case <-cl.done:
	default:
		cc.fail(nil)
		<-cl.done
	}
	if cl.err == nil {
		return nil // it completed after all
	}
	return ctxError(ctx.Err(), cl.op.String()+" to "+cc.addr)
}

// send writes one frame (header+body, then payload) under the write lock, honouring ctx. It
// reports whether any byte may have been written: if not, the connection is still in sync.
func (cc *clientConn) send(ctx context.Context, hdrBody, payload []byte) (written bool, err error) {
	cc.w.lock()
	if err := ctx.Err(); err != nil {
		// Nothing of ours was written; flush the burst if we were its last writer.
		if ferr := cc.w.unlock(); ferr != nil {
			return true, fmt.Errorf("transfer: write to %s: %w: %w", cc.addr, base.ErrUnavailable, ferr)
		}
		return false, err
	}
	// A deadline or a cancellation interrupts a blocked write (ours, or the flush of the
	// burst) by moving the write deadline; the stream then holds a partial frame and the
	// caller breaks the connection.
	dl, hasDeadline := ctx.Deadline()
	if hasDeadline {
		_ = cc.nc.SetWriteDeadline(dl)
	}
	var fired chan struct{}
	var stop func() bool
	if ctx.Done() != nil {
		fired = make(chan struct{})
		stop = context.AfterFunc(ctx, func() {
			_ = cc.nc.SetWriteDeadline(aLongTimeAgo)
			close(fired)
		})
	}
	err = cc.w.writeLocked(hdrBody, payload)
	// unlock flushes the burst if we are its last writer, still under our deadline.
	if ferr := cc.w.unlockFunc(func() {
		if stop != nil && !stop() {
			<-fired // it moved the deadline; wait so the reset below comes after it
		}
		if hasDeadline || fired != nil {
			_ = cc.nc.SetWriteDeadline(time.Time{})
		}
	}); err == nil {
		err = ferr
	}
	if err != nil {
		return true, fmt.Errorf("transfer: write to %s: %w: %w", cc.addr, base.ErrUnavailable, err)
	}
	return true, nil
}

// readLoop reads responses and completes their calls until the connection breaks.
func (cc *clientConn) readLoop() {
	err := cc.readResponses()
	cc.mu.Lock()
	if cc.mu.err == nil {
		cc.mu.err = &connError{err: fmt.Errorf("transfer: connection to %s: %w: %w", cc.addr, base.ErrUnavailable, err),
			peerClosed: errors.Is(err, errClosedAtBoundary)}
	}
	err = cc.mu.err
	if !isConnError(err) {
		err = &connError{err: err}
	}
	pending := cc.mu.pending
	cc.mu.pending = map[uint64]*call{}
	cc.mu.Unlock()
	cc.nc.Close()
	for _, cl := range pending {
		cl.err = err
		close(cl.done)
	}
	close(cc.done)
}

// readResponses reads response frames, each completing the call pending under its request
// id (one whose caller gave up is read and dropped), until the stream breaks; it returns why.
func (cc *clientConn) readResponses() error {
	lim := cc.c.opts.Limits
	var hbuf [wire.HeaderLen]byte
	for {
		if n, err := io.ReadFull(cc.br, hbuf[:]); err != nil {
			if n == 0 && (err == io.EOF || errors.Is(err, syscall.ECONNRESET)) {
				return fmt.Errorf("%w: %w", errClosedAtBoundary, err)
			}
			return err
		}
		var h wire.Header
		if err := wire.DecodeHeader(hbuf[:], lim, &h); err != nil {
			return err
		}
		if h.Flags&wire.FlagResponse == 0 {
			return fmt.Errorf("%w: server sent a request frame", base.ErrInvalidParams)
		}
		cc.mu.Lock()
		cl := cc.mu.pending[h.RequestID]
		delete(cc.mu.pending, h.RequestID)
		cc.mu.lastUsed = time.Now()
		cc.mu.Unlock()

		body, pb, err := readBody(cc.br, h.BodyLen)
		if err != nil {
			if cl != nil {
				cl.err = &connError{err: err}
				close(cl.done)
			}
			return err
		}
		if cl == nil {
			// The caller gave up (deadline): drop the response.
			if pb != nil {
				putBuf(pb)
			}
			if err := discard(cc.br, int64(h.PayloadLen)); err != nil {
				return err
			}
			continue
		}
		if cl.op != h.Op {
			return fmt.Errorf("%w: response to request %d has op %s, the request was %s", base.ErrInvalidParams, h.RequestID, h.Op, cl.op)
		}
		err = cc.complete(cl, &h, body)
		if pb != nil {
			putBuf(pb)
		}
		// NB: once done is closed, cl belongs to its caller again, which may resend it
		// (a retry resets cl.err): only the local err may be read after the close.
		cl.err = err
		close(cl.done)
		if err != nil && isConnError(err) {
			return err
		}
	}
}

// complete decodes a response into cl and reads its payload into cl.dst. A *connError
// return means the stream broke.
func (cc *clientConn) complete(cl *call, h *wire.Header, body []byte) error {
	if h.Flags&wire.FlagError != 0 {
		var eb wire.ErrorBody
		d := wire.NewDecoder(body)
		eb.Decode(d)
		if err := d.Finish(); err != nil {
			return &connError{err: err}
		}
		if h.Status == base.CodeNotLeader {
			return &NotLeaderError{LeaderID: eb.LeaderID, LeaderAddr: eb.LeaderAddr, Msg: eb.Msg}
		}
		return base.NewCodeError(h.Status, eb.Msg)
	}
	var derr error
	if cl.resp != nil {
		_, derr = wire.DecodeResponse(h.Op, body, cl.resp)
	}
	n := int64(h.PayloadLen)
	if n == 0 {
		return derr
	}
	if n > int64(len(cl.dst)) {
		if err := discard(cc.br, n); err != nil {
			return &connError{err: err}
		}
		return fmt.Errorf("%w: %s response carries %d bytes, the destination holds %d", base.ErrTooLarge, h.Op, n, len(cl.dst))
	}
	dst := cl.dst[:n]
	if cl.sum {
		// Hash each piece right after the socket read that wrote it (still in cache).
		d := base.NewChecksum()
		for off := 0; off < len(dst); {
			m, err := cc.br.Read(dst[off:])
			if m > 0 {
				d.Write(dst[off : off+m])
				off += m
			}
			if err != nil && off < len(dst) {
				if err == io.EOF {
					err = io.ErrUnexpectedEOF
				}
				return &connError{err: err}
			}
		}
		cl.digest = d.Sum64()
	} else if cl.landed != nil {
		for off := 0; off < len(dst); {
			m, err := cc.br.Read(dst[off:])
			if m > 0 {
				off += m
				cl.reported = true
				cl.landed(int64(off))
			}
			if err != nil && off < len(dst) {
				if err == io.EOF {
					err = io.ErrUnexpectedEOF
				}
				return &connError{err: err}
			}
		}
	} else if _, err := io.ReadFull(cc.br, dst); err != nil {
		return &connError{err: err}
	}
	cl.n = n
	if h.Flags&wire.FlagChecksum != 0 {
		if got := base.Checksum(dst); got != h.PayloadChecksum {
			return fmt.Errorf("%w: %s payload checksum %#x, frame says %#x", base.ErrCorruption, h.Op, got, h.PayloadChecksum)
		}
	}
	return derr
}

// idleResendMin is how long a connection must have been idle for a call sent alone into it to
// be resent after the server closed the connection without answering (Client.do). Servers
// close idle connections after at least 7/8 of their IdleTimeout, which must be over it.
const idleResendMin = 50 * time.Millisecond

// errClosedAtBoundary: the server closed the connection between frames (EOF or a reset
// before the first byte of a response header).
var errClosedAtBoundary = errors.New("transfer: the server closed the connection")
