package transfer

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/mooncake-go/mooncake/internal/base"
	"github.com/mooncake-go/mooncake/transfer/internal/wire"
)

// Server serves the transfer protocol on listeners, calling a Handler for every request.
//
// Each accepted connection has one read loop goroutine (handshake, then frame headers, bodies
// and Write payloads, in stream order) and one goroutine per request being handled (bounded
// by MaxInFlightPerConn). Responses are written whole under the connection's frameWriter
// lock: small frames coalesced with their neighbours, a payload from Data with one vectored
// write, a payload from a Reader with io.CopyN (sendfile for an *os.File).
type Server struct {
	h    Handler
	opts ServerOptions
	log  *slog.Logger

	// baseCtx is the parent of every handler's context; cancelled by Close (and by Shutdown
	// when its ctx ends before the drain completes).
	baseCtx context.Context
	cancel  context.CancelFunc

	shutting atomic.Bool // set once by Shutdown/Close; read loops stop at the next frame

	mu struct {
		sync.Mutex // protects the fields below
		listeners  map[net.Listener]struct{}
		conns      map[*serverConn]struct{}
		perPeer    map[string]int // open connections by remote IP (peerKey)
		addr       net.Addr
	}
	counters connCounters
	// connWG counts live connections (their read loop and handlers) and Serve loops.
	connWG sync.WaitGroup

	// testHookBodyWait is called when a read loop waits for body bytes. Nil in production.
	testHookBodyWait func()
	// testHookConnClosed is called after a connection's close is counted in Stats (its
	// reason, and Open without it), so tests wait on the close instead of sleeping. Set before
	// Serve or Start; nil in production.
	testHookConnClosed func()
}

// NewServer returns a server of h. It serves nothing until Serve or Start.
func NewServer(h Handler, opts ServerOptions) (*Server, error) {
	if h == nil {
		return nil, fmt.Errorf("%w: transfer: nil handler", base.ErrInvalidParams)
	}
	var err error
	if opts.ClusterID, err = clusterIDOrDefault(opts.ClusterID); err != nil {
		return nil, err
	}
	opts.Limits.EnsureDefaults()
	if opts.MaxInFlightPerConn <= 0 {
		opts.MaxInFlightPerConn = 4096
	}
	if opts.MaxBodyBytesPerConn <= 0 {
		opts.MaxBodyBytesPerConn = 256 << 20
	}
	if opts.HandshakeTimeout <= 0 {
		opts.HandshakeTimeout = 10 * time.Second
	}
	if opts.IdleTimeout == 0 {
		opts.IdleTimeout = DefaultIdleTimeout
	}
	if opts.IdleTimeout > 0 && opts.IdleTimeout < minIdleTimeout {
		return nil, fmt.Errorf("%w: transfer: IdleTimeout %s is under %s", base.ErrInvalidParams, opts.IdleTimeout, minIdleTimeout)
	}
	if opts.FrameTimeout == 0 {
		opts.FrameTimeout = DefaultFrameTimeout
	}
	if opts.MaxConnsPerPeer == 0 {
		opts.MaxConnsPerPeer = DefaultMaxConnsPerPeer
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	s := &Server{h: h, opts: opts, log: opts.Logger}
	s.baseCtx, s.cancel = context.WithCancel(context.Background())
	s.mu.listeners = make(map[net.Listener]struct{})
	s.mu.conns = make(map[*serverConn]struct{})
	s.mu.perPeer = make(map[string]int)
	return s, nil
}

// Start listens on addr with tr (nil: TCP) and serves in a background goroutine; Addr is
// valid when it returns.
func (s *Server) Start(tr Transport, addr string) error {
	if tr == nil {
		tr = tcpTransport{}
	}
	l, err := tr.Listen(addr)
	if err != nil {
		return fmt.Errorf("transfer: listen %s: %w", addr, err)
	}
	if err := s.track(l); err != nil {
		l.Close()
		return err
	}
	s.connWG.Add(1)
	go func() {
		defer s.connWG.Done()
		_ = s.serve(l)
	}()
	return nil
}

// Serve accepts connections on l until Shutdown or Close, then returns ErrServerClosed. It
// closes l.
func (s *Server) Serve(l net.Listener) error {
	if err := s.track(l); err != nil {
		l.Close()
		return err
	}
	return s.serve(l)
}

func (s *Server) track(l net.Listener) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.shutting.Load() {
		return ErrServerClosed
	}
	s.mu.listeners[l] = struct{}{}
	if s.mu.addr == nil {
		s.mu.addr = l.Addr()
	}
	return nil
}

// Addr returns the address of the first listener (nil before Serve or Start).
func (s *Server) Addr() net.Addr {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.mu.addr
}

func (s *Server) serve(l net.Listener) error {
	defer func() {
		s.mu.Lock()
		delete(s.mu.listeners, l)
		s.mu.Unlock()
		l.Close()
	}()
	var backoff time.Duration
	for {
		c, err := l.Accept()
		if err != nil {
			if s.shutting.Load() {
				return ErrServerClosed
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() || errors.Is(err, syscallEMFILE) {
				// Out of file descriptors or a transient failure: back off, as net/http does.
				backoff = min(max(2*backoff, 5*time.Millisecond), time.Second)
				s.log.Warn("transfer: accept failed; retrying", "err", err, "backoff", backoff)
				time.Sleep(backoff)
				continue
			}
			return fmt.Errorf("transfer: accept: %w", err)
		}
		backoff = 0
		sc := s.newConn(c)
		if sc == nil {
			if s.testHookConnClosed != nil {
				s.testHookConnClosed()
			}
			continue
		}
		go sc.serve()
	}
}

func (s *Server) newConn(c net.Conn) *serverConn {
	s.counters.accepted.Add(1)
	peer := peerKey(c)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.shutting.Load() {
		c.Close()
		s.counters.closed[closeShutdown].Add(1)
		return nil
	}
	if max := s.opts.MaxConnsPerPeer; max > 0 && s.mu.perPeer[peer] >= max {
		c.Close()
		s.counters.closed[closePeerLimit].Add(1)
		s.warn("transfer: refusing a connection: too many from its host (counted in the peer_limit reason; this line is logged at most every 10s)",
			"remote", c.RemoteAddr(), "max_conns_per_peer", max)
		return nil
	}
	s.mu.perPeer[peer]++
	sc := &serverConn{s: s, c: c, peer: peer, sem: make(chan struct{}, s.opts.MaxInFlightPerConn)}
	sc.bodies.init(s.opts.MaxBodyBytesPerConn)
	sc.bodies.onWait = s.testHookBodyWait
	sc.ctx, sc.cancel = context.WithCancel(s.baseCtx)
	sc.w = newFrameWriter(c, s.opts.FrameTimeout)
	sc.sendfile = sendfileConn(c)
	sc.rd = &connReader{sc: sc, off: true}
	sc.idle.Store(true) // a shutdown during the handshake ends it
	sc.br = bufio.NewReaderSize(sc.rd, readBufSize)
	s.mu.conns[sc] = struct{}{}
	s.connWG.Add(1)
	return sc
}

// Shutdown stops the server gracefully:
//  1. close the listeners (no new connections);
//  2. stop reading new frames on every connection (a frame already started, including its
//     payload, is read to its end);
//  3. wait for the requests in flight to be handled and their responses written;
//  4. close the connections.
//
// If ctx ends first, the remaining connections are closed, handler contexts are cancelled,
// and Shutdown returns ctx.Err() after the handlers returned.
func (s *Server) Shutdown(ctx context.Context) error {
	s.beginShutdown()
	done := make(chan struct{})
	go func() {
		s.connWG.Wait()
		close(done)
	}()
	select {
	case <-done:
		s.cancel()
		return nil
	case <-ctx.Done():
		s.closeConns()
		<-done
		return ctx.Err()
	}
}

// Close closes the listeners and every connection at once, cancels handler contexts and
// waits for the handlers to return. Writes in flight are aborted (their sinks get an error).
func (s *Server) Close() error {
	s.beginShutdown()
	s.closeConns()
	s.connWG.Wait()
	return nil
}

func (s *Server) beginShutdown() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.shutting.Store(true)
	for l := range s.mu.listeners {
		l.Close()
	}
	// Wake read loops blocked waiting for a header; connReader tells an idle wait (stop)
	// from a read inside a frame (put its own deadline back and finish the frame).
	for sc := range s.mu.conns {
		_ = sc.c.SetReadDeadline(aLongTimeAgo)
	}
}

func (s *Server) closeConns() {
	s.cancel()
	s.mu.Lock()
	defer s.mu.Unlock()
	for sc := range s.mu.conns {
		sc.c.Close()
	}
}

var aLongTimeAgo = time.Unix(1, 0)

// serverConn is one accepted connection.
type serverConn struct {
	s    *Server
	c    net.Conn
	peer string      // peerKey(c)
	rd   *connReader // only the read loop uses it
	// sendfile is c's raw connection when payloads can go by reference (a TCP socket on
	// Linux), else nil. Used under w's lock only.
	sendfile syscall.RawConn
	br       *bufio.Reader // only the read loop uses it
	ctx      context.Context
	// cancel ends ctx: when the connection breaks (nobody will read the responses) or the
	// server closes.
	cancel context.CancelFunc

	// idle is true while the read loop waits for the first byte of a frame with nothing
	// buffered; only then may a shutdown deadline end the loop.
	idle atomic.Bool

	sem      chan struct{}  // one slot per request being handled
	bodies   byteSem        // body bytes held by the requests being handled
	handlers sync.WaitGroup // requests being handled

	w *frameWriter // serializes and coalesces frame writes
	// broken is set after a failed write: the stream may hold a partial frame.
	broken atomic.Bool
	// reason is why the server closes the connection, plus one (0: not decided; the peer
	// closed it or it broke, unless the server is shutting down). The first one set wins.
	reason atomic.Int32
}

// setReason records why the connection is being closed, unless a reason is already set.
func (sc *serverConn) setReason(r closeReason) { sc.reason.CompareAndSwap(0, int32(r)+1) }

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout() || errors.Is(err, os.ErrDeadlineExceeded)
}

func (sc *serverConn) serve() {
	s := sc.s
	defer func() {
		sc.handlers.Wait()
		sc.cancel()
		sc.c.Close()
		if s.shutting.Load() {
			sc.setReason(closeShutdown)
		}
		sc.setReason(closePeer)
		s.counters.closed[sc.reason.Load()-1].Add(1)
		s.mu.Lock()
		delete(s.mu.conns, sc)
		if s.mu.perPeer[sc.peer]--; s.mu.perPeer[sc.peer] <= 0 {
			delete(s.mu.perPeer, sc.peer)
		}
		s.mu.Unlock()
		if s.testHookConnClosed != nil {
			s.testHookConnClosed()
		}
		s.connWG.Done()
	}()
	tuneConn(sc.c, s.opts.SocketBuffer)
	if err := sc.handshake(); err != nil {
		sc.setReason(closeHandshake)
		s.log.Debug("transfer: handshake failed", "remote", sc.c.RemoteAddr(), "err", err)
		return
	}
	sc.rd.off = false
	var hbuf [wire.HeaderLen]byte
	for {
		sc.idle.Store(sc.br.Buffered() == 0)
		sc.rd.startWait(sc.idle.Load())
		if s.shutting.Load() && sc.idle.Load() {
			return
		}
		if _, err := io.ReadFull(sc.br, hbuf[:]); err != nil {
			switch {
			case errors.Is(err, errIdleTimeout):
				s.log.Debug("transfer: closing an idle connection", "remote", sc.c.RemoteAddr(), "idle_timeout", s.opts.IdleTimeout)
			case errors.Is(err, ErrServerClosed), s.shutting.Load() && isTimeout(err), err == io.EOF:
			default:
				s.log.Debug("transfer: connection read failed", "remote", sc.c.RemoteAddr(), "err", err)
			}
			sc.cancel()
			return
		}
		sc.idle.Store(false)
		var h wire.Header
		if err := wire.DecodeHeader(hbuf[:], s.opts.Limits, &h); err != nil {
			sc.protocolError(&h, err)
			return
		}
		if h.Flags&wire.FlagResponse != 0 {
			sc.protocolError(&h, fmt.Errorf("%w: a response frame sent to a server", base.ErrInvalidParams))
			return
		}
		// Bound the bodies held by this connection's requests before reading one more
		// (back-pressure through TCP): bodies are read and decoded whole.
		sc.bodies.acquire(int64(h.BodyLen))
		sc.rd.restart() // the wait for room is not the peer's delay
		body, pb, err := readBody(sc.br, h.BodyLen)
		if err != nil {
			sc.bodies.release(int64(h.BodyLen))
			sc.cancel()
			return
		}
		sc.sem <- struct{}{}
		sc.rd.restart()
		sc.handlers.Add(1)
		if h.Op == wire.OpWrite {
			// The payload follows on the stream: read it here, in order.
			ok := sc.readWrite(&h, body)
			if pb != nil {
				putBuf(pb)
			}
			sc.bodies.release(int64(h.BodyLen))
			if !ok {
				sc.cancel()
				return
			}
			continue
		}
		if sc.readNow(&h, body, pb) {
			continue
		}
		if sc.callsNow(h.Op) {
			sc.handle(h, body, pb)
			continue
		}
		go sc.handle(h, body, pb)
	}
}

// handshake reads the client's hello and answers it; a wrong magic, version or cluster id is
// answered with the error code and the connection is closed.
func (sc *serverConn) handshake() error {
	s := sc.s
	_ = sc.c.SetDeadline(time.Now().Add(s.opts.HandshakeTimeout))
	hello, err := wire.ReadClientHello(sc.br)
	status, msg := base.CodeOK, ""
	switch {
	case err != nil && errors.Is(err, base.ErrInvalidParams):
		status, msg = base.CodeOf(err), err.Error()
	case err != nil:
		return err
	case hello.Version != wire.ProtocolVersion:
		status = base.CodeProtocolVersion
		msg = fmt.Sprintf("%v: client speaks protocol version %d, this server speaks %d", base.ErrProtocolVersion, hello.Version, wire.ProtocolVersion)
	case hello.ClusterID != s.opts.ClusterID:
		status = base.CodeClusterMismatch
		msg = fmt.Sprintf("%v: client is in cluster %q, this server is in cluster %q", base.ErrClusterMismatch, hello.ClusterID, s.opts.ClusterID)
	}
	reply := wire.AppendServerHello(make([]byte, 0, 64), wire.ProtocolVersion, status, msg)
	if _, werr := sc.c.Write(reply); werr != nil {
		return werr
	}
	if status != base.CodeOK {
		return base.NewCodeError(status, msg)
	}
	if s.shutting.Load() {
		return ErrServerClosed
	}
	return sc.c.SetDeadline(time.Time{})
}

// protocolError answers a frame the server cannot parse with an error (when the request id
// is known) and closes the connection: after a bad header the stream cannot be trusted.
func (sc *serverConn) protocolError(h *wire.Header, err error) {
	sc.setReason(closeProtocol)
	sc.s.log.Warn("transfer: protocol error; closing connection", "remote", sc.c.RemoteAddr(), "err", err)
	op := h.Op
	if !op.Known() {
		op = wire.OpPing
	}
	sc.writeError(h.RequestID, op, err)
	sc.cancel()
}

// callsNow reports whether the request with op is served on the read loop (CallNowHandler).
func (sc *serverConn) callsNow(op Op) bool {
	if op == wire.OpRead || op == wire.OpReadRange {
		return false
	}
	cn, ok := sc.s.h.(CallNowHandler)
	return ok && cn.CallsNow(op)
}

// handle serves one control or read request. It owns body/pb.
func (sc *serverConn) handle(h wire.Header, body []byte, pb *[]byte) {
	defer func() {
		sc.bodies.release(int64(h.BodyLen))
		<-sc.sem
		sc.handlers.Done()
	}()
	req, err := wire.DecodeRequest(h.Op, body)
	if pb != nil {
		putBuf(pb)
	}
	if err != nil {
		sc.writeError(h.RequestID, h.Op, err)
		return
	}
	if rr, ok := req.(*ReadRequest); ok {
		src, err := sc.s.h.HandleRead(sc.ctx, rr)
		sc.sendRead(&h, rr.Verifies, src, err)
		return
	}
	resp, err := sc.callHandler(req)
	if err != nil {
		sc.writeError(h.RequestID, h.Op, err)
		return
	}
	rh := wire.Header{Op: h.Op, Flags: wire.FlagResponse, RequestID: h.RequestID}
	out := encodeFrame(&rh, resp)
	if rh.BodyLen > sc.s.opts.Limits.MaxBodyLen {
		putBuf(out)
		sc.writeError(h.RequestID, h.Op, fmt.Errorf("%w: %s response of %d bytes is over the body limit %d",
			base.ErrTooLarge, h.Op, rh.BodyLen, sc.s.opts.Limits.MaxBodyLen))
		return
	}
	sc.writeFrame(*out, nil)
	putBuf(out)
}

func (sc *serverConn) callHandler(req Message) (resp Message, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("%w: handler panicked serving %s: %v", base.ErrInternal, req.Op(), r)
			sc.s.log.Error("transfer: handler panic", "op", req.Op(), "panic", r)
		}
	}()
	return sc.s.h.HandleCall(sc.ctx, req)
}

// sendRead answers a read with src (err nil) or err, and releases src. verifies is the
// request's ReadRequest.Verifies: only then may the payload go by reference (sendfile from
// src.File), since only a verifying client notices bytes rewritten in the file after the
// send (ReadSource).
func (sc *serverConn) sendRead(h *wire.Header, verifies bool, src ReadSource, err error) {
	if err != nil {
		sc.writeError(h.RequestID, h.Op, err)
		return
	}
	defer func() {
		if src.Release != nil {
			src.Release()
		}
	}()
	n := int64(len(src.Data))
	if uint64(n) > sc.s.opts.Limits.MaxPayloadLen {
		sc.writeError(h.RequestID, h.Op, fmt.Errorf("%w: %d bytes to send, the payload limit is %d",
			base.ErrTooLarge, n, sc.s.opts.Limits.MaxPayloadLen))
		return
	}
	rh := wire.Header{Op: h.Op, Flags: wire.FlagResponse, RequestID: h.RequestID, PayloadLen: uint64(n)}
	if h.Flags&wire.FlagChecksum != 0 && n > 0 {
		// The frame checksum is taken here, from Data: a by-reference send could deliver
		// bytes rewritten after it, so a frame-checksummed payload is always copied.
		rh.Flags |= wire.FlagChecksum
		rh.PayloadChecksum = base.Checksum(src.Data)
		verifies = false
	}
	src.Resp.SetOp(h.Op)
	out := encodeFrame(&rh, &src.Resp)
	// NB: n > 0 also when a test lowers sendfileMin: the header goes out with MSG_MORE and
	// only the payload's last byte pushes it.
	if verifies && src.File.Valid && n > 0 && n >= sendfileMin && sc.sendfile != nil && sc.s.opts.SendfileReads {
		sc.writeByRef(*out, src.Data, src.File)
	} else {
		sc.writeFrame(*out, src.Data)
	}
	putBuf(out)
}

// sendfileMin is the smallest payload sent by reference: below it the splice machinery
// costs more than the copy it saves (docs/benchmarks.md, "Gets with sendfile"). A variable
// so that tests can send small payloads by reference.
var sendfileMin int64 = 64 << 10

// writeByRef writes hdrBody, then the payload from f by reference (sendfile), falling back
// to a copy from data where sendfile refuses the file.
func (sc *serverConn) writeByRef(hdrBody, data []byte, f FileRange) {
	sc.w.lock()
	var err error
	if !sc.broken.Load() {
		var refused bool
		refused, err = sc.w.writeFileLocked(sc.sendfile, hdrBody, data, f)
		if refused {
			sc.s.counters.sendfileRefused.Add(1)
		} else if err == nil {
			sc.s.counters.sendfileSends.Add(1)
		}
	}
	if ferr := sc.w.unlock(); err == nil {
		err = ferr
	}
	if err != nil {
		sc.s.log.Debug("transfer: sending a read payload by reference failed; closing connection", "remote", sc.c.RemoteAddr(), "err", err)
		sc.writeFailed(err)
	}
}

// readWrite reads the payload of a Write frame into the handler's destination, on the read
// loop. It reports false when the connection must be closed (the stream broke mid-payload).
// It owns the request's sem slot and handlers count.
func (sc *serverConn) readWrite(h *wire.Header, body []byte) bool {
	finish := func() {
		<-sc.sem
		sc.handlers.Done()
	}
	n := int64(h.PayloadLen)
	// reject answers err after discarding the payload, keeping the stream in sync.
	reject := func(err error) bool {
		finish()
		if derr := discard(sc.br, n); derr != nil {
			return false
		}
		sc.writeError(h.RequestID, h.Op, err)
		return true
	}
	m, err := wire.DecodeRequest(h.Op, body)
	if err != nil {
		return reject(err)
	}
	req := m.(*WriteRequest)
	sink, err := sc.callWrite(req, n)
	sc.rd.restart() // the handler's wait for a destination is not the peer's delay
	if err != nil {
		return reject(err)
	}
	if int64(len(sink.Dst)) != n {
		err = fmt.Errorf("%w: Write handler gave a destination of %d bytes for a payload of %d", base.ErrInternal, len(sink.Dst), n)
		_ = sink.Done(err)
		return reject(err)
	}
	if _, err := io.ReadFull(sc.br, sink.Dst); err != nil {
		// The peer went away mid-payload: the destination holds partial bytes; the handler
		// aborts it. Nobody is left to answer.
		if err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		_ = sink.Done(fmt.Errorf("%w: connection broke after part of %d payload bytes: %w",
			base.ErrUnavailable, n, err))
		finish()
		return false
	}
	var cerr error
	if h.Flags&wire.FlagChecksum != 0 {
		if got := base.Checksum(sink.Dst); got != h.PayloadChecksum {
			cerr = fmt.Errorf("%w: Write payload of %s at offset %d: checksum %#x, frame says %#x",
				base.ErrCorruption, req.Key, req.Offset, got, h.PayloadChecksum)
		}
	}
	// Done may block (a durable commit): run it off the read loop.
	go func() {
		defer finish()
		err := sink.Done(cerr)
		if cerr != nil && err == nil {
			err = cerr
		}
		if err != nil {
			sc.writeError(h.RequestID, h.Op, err)
			return
		}
		rh := wire.Header{Op: h.Op, Flags: wire.FlagResponse, RequestID: h.RequestID}
		var hb [wire.HeaderLen]byte
		wire.PutHeader(hb[:], &rh)
		sc.writeFrame(hb[:], nil)
	}()
	return true
}

func (sc *serverConn) callWrite(req *WriteRequest, n int64) (sink WriteSink, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("%w: handler panicked serving Write: %v", base.ErrInternal, r)
			sc.s.log.Error("transfer: handler panic", "op", "Write", "panic", r)
		}
	}()
	sink, err = sc.s.h.HandleWrite(sc.ctx, req, n)
	if err == nil && sink.Done == nil {
		sink.Done = func(err error) error { return err }
	}
	return sink, err
}

// writeError sends an error response for request id.
func (sc *serverConn) writeError(id uint64, op wire.Op, err error) {
	code := base.CodeOf(err)
	if code == base.CodeOK {
		code = base.CodeInternal
	}
	eb := wire.ErrorBody{Msg: clip(err.Error(), wire.MaxErrorMsgLen)}
	var nl *NotLeaderError
	if errors.As(err, &nl) {
		code = base.CodeNotLeader
		eb.LeaderID, eb.LeaderAddr = clip(nl.LeaderID, wire.MaxAddrLen), clip(nl.LeaderAddr, wire.MaxAddrLen)
		// The leader travels in its own fields and the receiver's NotLeaderError.Error adds
		// "(leader X at Y)" again: send the bare message, or it would say it twice.
		if err == error(nl) {
			eb.Msg = clip(nl.message(), wire.MaxErrorMsgLen)
		}
	}
	rh := wire.Header{Op: op, Flags: wire.FlagResponse | wire.FlagError, Status: code, RequestID: id}
	out := encodeFrame(&rh, errorBodyMsg{&eb})
	sc.writeFrame(*out, nil)
	putBuf(out)
}

func clip(s string, n int) string {
	if len(s) > n {
		return s[:n]
	}
	return s
}

// errorBodyMsg adapts wire.ErrorBody to Message for encodeFrame.
type errorBodyMsg struct{ *wire.ErrorBody }

func (errorBodyMsg) Op() wire.Op { return 0 }

// writeFrame writes hdrBody (header and body) and payload as one frame (coalesced with
// concurrent small frames; a payload goes out with a vectored write). A failed write closes
// the connection: the peer may have seen part of a frame.
func (sc *serverConn) writeFrame(hdrBody, payload []byte) {
	sc.w.lock()
	var err error
	if !sc.broken.Load() {
		err = sc.w.writeLocked(hdrBody, payload)
	}
	if ferr := sc.w.unlock(); err == nil {
		err = ferr
	}
	if err != nil {
		sc.writeFailed(err)
	}
}

// writeFailed breaks the connection after a failed write (the peer may have seen part of a
// frame).
func (sc *serverConn) writeFailed(err error) {
	if errors.Is(err, errWriteStalled) {
		sc.setReason(closeFrameTimeout)
		sc.s.warn("transfer: closing a connection whose peer stopped reading a response (counted in the frame_timeout reason; this line is logged at most every 10s)",
			"remote", sc.c.RemoteAddr(), "frame_timeout", sc.s.opts.FrameTimeout)
	}
	sc.broken.Store(true)
	sc.cancel()
	sc.c.Close()
}

// byteSem bounds a number of bytes in use. A request larger than the bound is admitted alone
// (when nothing else is in use), so any body within Limits.MaxBodyLen makes progress.
type byteSem struct {
	mu   sync.Mutex // protects used
	cond sync.Cond
	used int64
	max  int64
	// onWait is called (without mu) before acquire waits; a test hook, nil in production.
	onWait func()
}

func (b *byteSem) init(max int64) {
	b.max = max
	b.cond.L = &b.mu
}

func (b *byteSem) acquire(n int64) {
	if n == 0 {
		return
	}
	b.mu.Lock()
	if b.onWait != nil && b.used > 0 && b.used+n > b.max {
		b.mu.Unlock()
		b.onWait()
		b.mu.Lock()
	}
	for b.used > 0 && b.used+n > b.max {
		b.cond.Wait()
	}
	b.used += n
	b.mu.Unlock()
}

func (b *byteSem) release(n int64) {
	if n == 0 {
		return
	}
	b.mu.Lock()
	b.used -= n
	b.mu.Unlock()
	b.cond.Broadcast()
}
