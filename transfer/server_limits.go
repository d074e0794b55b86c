package transfer

import (
	"errors"
	"fmt"
	"net"
	"sync/atomic"
	"time"
)

// Connection limits: what the server does about connections that do nothing.
//
//   - Idle: after its handshake, a connection with no frame arriving and no request being
//     handled for ServerOptions.IdleTimeout (between 7/8 of it and all of it: the deadline
//     is moved lazily) is closed. Clients keep pooled connections
//     open and redial transparently (Client: IdleTimeout, and the retry of a call whose
//     connection the server had closed while idle).
//   - Progress: once the first byte of a frame has arrived, every frameProgressChunk bytes
//     of it (or the rest of the frame) must arrive within ServerOptions.FrameTimeout. A
//     64 MiB Write over a slow link passes (its chunks keep arriving); a frame trickled at
//     one byte per second does not. Responses likewise: a client that stops reading has
//     FrameTimeout to take the next frameProgressChunk bytes (progressWriter), so it cannot
//     hold a response, and the arena range it pins, for ever.
//   - Peers: at most ServerOptions.MaxConnsPerPeer connections per remote IP address; more
//     are closed at accept.
//
// Every closed connection is counted by reason (ServerStats.Closed).

// Defaults of the connection limits (ServerOptions).
const (
	// DefaultIdleTimeout: a pooled connection of a live client carries a call well within
	// five minutes, or the client's own idle timeout (DefaultClientIdleTimeout) closed it.
	DefaultIdleTimeout = 5 * time.Minute
	// DefaultFrameTimeout with frameProgressChunk sets the slowest transfer accepted to
	// 64 KiB per 30 s (about 2 KiB/s), far below any working link, while a peer that
	// stalls mid-frame holds the connection (and the request's destination) for 30 s at most.
	DefaultFrameTimeout = 30 * time.Second
	// DefaultMaxConnsPerPeer bounds the connections of one host: 256 clients with the
	// default ConnsPerPeer of 4.
	DefaultMaxConnsPerPeer = 1024
	// DefaultClientIdleTimeout is the client's: shorter than the server's
	// DefaultIdleTimeout, so a client with default options closes an idle pooled
	// connection before the server does, and never sends a call into one the server is
	// closing.
	DefaultClientIdleTimeout = 2 * time.Minute
)

// minIdleTimeout: clients resend a call that went alone into a connection idle for
// idleResendMin when the server closes it unanswered; a server closes idle connections
// after 7/8 of IdleTimeout at the earliest, which this keeps over idleResendMin.
const minIdleTimeout = 100 * time.Millisecond

// frameProgressChunk is the progress a frame must make within FrameTimeout.
const frameProgressChunk = 64 << 10

// closeReason says why the server closed a connection.
type closeReason int32

const (
	closePeer         closeReason = iota // the peer closed it, or it broke (EOF, reset, a failed write)
	closeIdle                            // IdleTimeout
	closeFrameTimeout                    // FrameTimeout
	closePeerLimit                       // MaxConnsPerPeer
	closeHandshake                       // a failed or refused handshake, or HandshakeTimeout
	closeProtocol                        // a frame the server cannot parse
	closeShutdown                        // Shutdown or Close
	numCloseReasons
)

// CloseReasons are the keys of ServerStats.Closed, in a fixed order (for metrics).
var CloseReasons = [numCloseReasons]string{
	closePeer: "peer", closeIdle: "idle", closeFrameTimeout: "frame_timeout", closePeerLimit: "peer_limit",
	closeHandshake: "handshake", closeProtocol: "protocol_error", closeShutdown: "shutdown",
}

// ServerStats are a server's connection counters.
type ServerStats struct {
	// Open is the number of connections open now.
	Open int64
	// Accepted counts the connections accepted (those closed at once for MaxConnsPerPeer
	// included).
	Accepted int64
	// Closed counts closed connections by reason, one key per CloseReasons entry: peer (the
	// client closed it, or it broke), idle, frame_timeout, peer_limit, handshake,
	// protocol_error, shutdown.
	Closed map[string]int64
	// SendfileSends counts read payloads sent by reference (sendfile from a ReadSource's
	// File); SendfileRefused those where sendfile refused the file and the payload was
	// copied from Data instead (a hugetlb memfd, say).
	SendfileSends, SendfileRefused int64
}

// connCounters are the counters behind ServerStats.
type connCounters struct {
	accepted atomic.Int64
	closed   [numCloseReasons]atomic.Int64
	// sendfileSends and sendfileRefused are ServerStats' counters of the same names.
	sendfileSends, sendfileRefused atomic.Int64
	// lastWarn is the unix nano time of the last warning about a closed connection, so a
	// flood of them logs one line per warnEvery.
	lastWarn atomic.Int64
}

const warnEvery = 10 * time.Second

// Stats returns the server's connection counters.
func (s *Server) Stats() ServerStats {
	s.mu.Lock()
	open := int64(len(s.mu.conns))
	s.mu.Unlock()
	st := ServerStats{Open: open, Accepted: s.counters.accepted.Load(), Closed: make(map[string]int64, numCloseReasons),
		SendfileSends: s.counters.sendfileSends.Load(), SendfileRefused: s.counters.sendfileRefused.Load()}
	for r := range numCloseReasons {
		st.Closed[CloseReasons[r]] = s.counters.closed[r].Load()
	}
	return st
}

// warnf logs a warning about a closed connection, at most once per warnEvery.
func (s *Server) warn(msg string, args ...any) {
	now := time.Now().UnixNano()
	last := s.counters.lastWarn.Load()
	if now-last < int64(warnEvery) || !s.counters.lastWarn.CompareAndSwap(last, now) {
		return
	}
	s.log.Warn(msg, args...)
}

// peerKey is the remote IP address of c (the whole address if it has no port).
func peerKey(c net.Conn) string {
	a := c.RemoteAddr()
	if a == nil {
		return ""
	}
	if host, _, err := net.SplitHostPort(a.String()); err == nil {
		return host
	}
	return a.String()
}

var (
	errIdleTimeout  = errors.New("transfer: connection idle for longer than the idle timeout")
	errFrameTimeout = errors.New("transfer: frame made no progress within the frame timeout")
)

// connReader reads from the connection for its read loop (only the read loop calls it) and
// enforces the idle and progress timeouts with the read deadline, armed lazily: a frame that
// is already buffered costs no deadline change.
//
// It also lets a shutdown end an idle wait but not a frame: beginShutdown moves the deadline
// to the past; an idle wait then returns, a read inside a frame puts its own deadline back and
// goes on, so the frame (and its payload) completes.
type connReader struct {
	sc *serverConn
	// off: the handshake sets its own deadline; the timeouts start after it.
	off bool
	// idleWait: the loop waits for the first byte of a frame with nothing buffered.
	idleWait bool
	// window is the bytes of the frame received since its progress clock last restarted.
	window int64
	// armed: deadline is set for the current wait or window.
	armed    bool
	deadline time.Time // the deadline this reader set (zero: none)
	armedFor time.Duration
}

// startWait is called by the read loop before each frame: idle when nothing is buffered.
func (r *connReader) startWait(idle bool) {
	r.idleWait = idle
	r.window = 0
	r.armed = false
}

// restart restarts the frame's progress clock after the read loop waited for something else
// (room for a body, a request slot, the handler's destination).
func (r *connReader) restart() {
	if !r.idleWait {
		r.window = 0
		r.armed = false
	}
}

func (r *connReader) timeout() time.Duration {
	if r.idleWait {
		return r.sc.s.opts.IdleTimeout
	}
	return r.sc.s.opts.FrameTimeout
}

// arm sets the read deadline for the current wait or progress window. Within one kind of
// wait a deadline still 7/8 of the timeout away is kept, so a fast stream moves the deadline
// a few times per timeout, not once per read.
func (r *connReader) arm() {
	if r.off || r.armed {
		return
	}
	r.armed = true
	t := r.timeout()
	if t <= 0 {
		if !r.deadline.IsZero() {
			r.deadline = time.Time{}
			_ = r.sc.c.SetReadDeadline(time.Time{})
		}
		return
	}
	now := time.Now()
	if !r.deadline.IsZero() && r.armedFor == t && r.deadline.Sub(now) > t-t/8 {
		return
	}
	r.deadline, r.armedFor = now.Add(t), t
	_ = r.sc.c.SetReadDeadline(r.deadline)
}

func (r *connReader) Read(p []byte) (int, error) {
	sc := r.sc
	for {
		r.arm()
		if sc.s.shutting.Load() && sc.idle.Load() {
			// After arm: a shutdown that began before this check is seen here; one that
			// begins after it moves the deadline after ours, and the read below returns.
			return 0, errServerShutdown
		}
		n, err := sc.c.Read(p)
		if n > 0 {
			sc.idle.Store(false)
			if r.idleWait {
				// The first byte of a frame: its progress clock starts.
				r.startWait(false)
			}
			if r.window += int64(n); r.window >= frameProgressChunk {
				r.window, r.armed = 0, false
			}
			return n, err
		}
		if err == nil || !isTimeout(err) {
			return n, err
		}
		now := time.Now()
		switch {
		case r.off:
			return n, err // the handshake's deadline
		case sc.s.shutting.Load() && sc.idle.Load():
			return 0, errServerShutdown
		case r.deadline.IsZero() || now.Before(r.deadline):
			// Not our deadline: a shutdown moved it while inside a frame. Put ours back.
			_ = sc.c.SetReadDeadline(r.deadline)
		case r.idleWait && len(sc.sem) > 0:
			// Nothing arrives, but requests are being handled: not idle.
			r.armed = false
			r.deadline = time.Time{}
		case r.idleWait:
			sc.setReason(closeIdle)
			return 0, errIdleTimeout
		default:
			sc.setReason(closeFrameTimeout)
			sc.s.warn("transfer: closing a connection whose frame stopped making progress (counted in the frame_timeout reason; this line is logged at most every 10s)",
				"remote", sc.c.RemoteAddr(), "frame_timeout", sc.s.opts.FrameTimeout, "progress_bytes", frameProgressChunk)
			return 0, fmt.Errorf("%w (%s for %d bytes)", errFrameTimeout, sc.s.opts.FrameTimeout, frameProgressChunk)
		}
	}
}

var errServerShutdown = fmt.Errorf("transfer: %w", ErrServerClosed)
