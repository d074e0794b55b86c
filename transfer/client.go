package transfer

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mooncake-go/mooncake/internal/base"
	"github.com/mooncake-go/mooncake/transfer/internal/wire"
)

// The Client: the pool of connections per peer and its dialling, calls with their retries,
// and striped transfers. One connection's protocol is in client_conn.go.

// Client calls servers: a pool of ConnsPerPeer connections per peer address (dialled lazily,
// redialled when broken), many requests in flight per connection (pipelined, matched by
// request id), deadlines from context.Context, retries of idempotent calls after a broken
// connection, and striping of large payloads over the peer's connections.
//
// A Client is safe for concurrent use. Close it to release its connections.
type Client struct {
	opts ClientOptions
	tr   Transport
	log  *slog.Logger

	nextID atomic.Uint64

	mu struct {
		sync.Mutex // protects the fields below
		peers      map[string]*peer
		closed     bool
	}
}

// NewClient returns a client. It dials nothing until the first call to a peer.
func NewClient(opts ClientOptions) (*Client, error) {
	var err error
	if opts.ClusterID, err = clusterIDOrDefault(opts.ClusterID); err != nil {
		return nil, err
	}
	if opts.Transport == nil {
		opts.Transport = tcpTransport{}
	}
	opts.Limits.EnsureDefaults()
	if opts.ConnsPerPeer <= 0 {
		opts.ConnsPerPeer = 4
	}
	if opts.StripeThreshold <= 0 {
		opts.StripeThreshold = 4 << 20
	}
	if opts.StripeChunk <= 0 {
		opts.StripeChunk = 4 << 20
	}
	if opts.DialTimeout <= 0 {
		opts.DialTimeout = 5 * time.Second
	}
	if opts.Retries == 0 {
		opts.Retries = 2
	} else if opts.Retries < 0 {
		opts.Retries = 0
	}
	if opts.IdleTimeout == 0 {
		opts.IdleTimeout = DefaultClientIdleTimeout
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	c := &Client{opts: opts, tr: opts.Transport, log: opts.Logger}
	c.mu.peers = make(map[string]*peer)
	return c, nil
}

// Close closes every connection; calls in flight fail with an error wrapping base.ErrClosed.
func (c *Client) Close() error {
	c.mu.Lock()
	if c.mu.closed {
		c.mu.Unlock()
		return nil
	}
	c.mu.closed = true
	peers := c.mu.peers
	c.mu.peers = nil
	c.mu.Unlock()
	for _, p := range peers {
		p.close()
	}
	return nil
}

// ClosePeer closes the connections to addr (e.g. a peer known to be gone); the next call
// dials again.
func (c *Client) ClosePeer(addr string) {
	c.mu.Lock()
	p := c.mu.peers[addr]
	delete(c.mu.peers, addr)
	c.mu.Unlock()
	if p != nil {
		p.close()
	}
}

func (c *Client) peer(addr string) (*peer, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.mu.closed {
		return nil, fmt.Errorf("transfer: client: %w", base.ErrClosed)
	}
	p := c.mu.peers[addr]
	if p == nil {
		p = &peer{c: c, addr: addr, slots: make([]connSlot, c.opts.ConnsPerPeer)}
		c.mu.peers[addr] = p
	}
	return p, nil
}

// Call sends req to addr and decodes the response into resp (a pointer to the call's response
// type; nil when the response is Empty or not wanted). Errors the server returned are
// *base.CodeError (or *NotLeaderError for NOT_LEADER); a deadline that passes gives an error
// matching both base.ErrTimeout and context.DeadlineExceeded. Idempotent calls (Lookup,
// Exists, List, Status, ...) are retried on a fresh connection when one breaks.
//
// Use Write and Read for the calls that carry payloads.
func (c *Client) Call(ctx context.Context, addr string, req, resp Message) error {
	op := req.Op()
	if op == wire.OpWrite || op == wire.OpRead || op == wire.OpReadRange {
		return fmt.Errorf("%w: transfer: use Client.Write/Read for %s", base.ErrInvalidParams, op)
	}
	return c.do(ctx, addr, &call{op: op, req: req, resp: resp})
}

// Write sends src as the object described by req to the worker at addr and commits it there.
// req.TotalSize and req.Offset are set from src. Objects up to StripeThreshold go in one
// Write frame with Commit set; larger ones are cut into StripeChunk chunks written in parallel
// over the peer's connections, then a Commit call makes them visible. src is only read, and
// not retained after Write returns.
//
// Writes are not retried unless ctx is marked WithIdempotent. On an error some chunks may
// have reached the worker, but nothing was committed there; the caller revokes the put
// (PutRevoke), or the worker drops the pending object after its timeout.
func (c *Client) Write(ctx context.Context, addr string, req WriteRequest, src []byte) error {
	req.TotalSize = int64(len(src))
	req.Offset = 0
	if int64(len(src)) <= c.opts.StripeThreshold {
		req.Commit = true
		return c.do(ctx, addr, &call{op: wire.OpWrite, req: &req, payload: src})
	}
	req.Commit = false
	err := c.stripe(ctx, addr, int64(len(src)), func(ctx context.Context, off, n int64) error {
		chunk := req
		chunk.Offset = off
		return c.do(ctx, addr, &call{op: wire.OpWrite, req: &chunk, payload: src[off : off+n]})
	})
	if err != nil {
		return err
	}
	return c.do(ctx, addr, &call{op: wire.OpCommit, req: &CommitRequest{Key: req.Key, Version: req.Version, Checksum: req.Checksum}})
}

// Read reads from the worker at addr into dst and returns the object's description and the
// number of bytes read. With req.Offset and req.Length zero it reads the whole object, which
// must fit in dst (len(dst) is the caller's expected size, e.g. from Lookup); when len(dst) is
// over StripeThreshold the read is striped into ReadRange chunks in parallel, each landing at
// its offset of dst, and the object must be exactly len(dst) bytes. With a range it reads
// that range (Length 0: to the end) into dst.
//
// dst is written only until Read returns (also on error or deadline).
func (c *Client) Read(ctx context.Context, addr string, req ReadRequest, dst []byte) (ReadResponse, int, error) {
	rr, n, _, err := c.read(ctx, addr, req, dst, false)
	return rr, n, err
}

// ReadSum is Read that also returns base.Checksum of the n bytes read, for callers that
// verify what they read. An unstriped read is hashed by the connection's reader goroutine
// piece by piece as the payload lands in dst, while each piece is still in the CPU cache,
// instead of in a second pass over the whole buffer after the read. A striped read (its
// chunks arrive in parallel) is hashed in order while its chunks land (stripeSum): the
// reader of the chunk at the hash's position hashes its pieces as they arrive, and the
// chunks that landed ahead of it right after.
func (c *Client) ReadSum(ctx context.Context, addr string, req ReadRequest, dst []byte) (ReadResponse, int, uint64, error) {
	return c.read(ctx, addr, req, dst, true)
}

func (c *Client) read(ctx context.Context, addr string, req ReadRequest, dst []byte, sum bool) (ReadResponse, int, uint64, error) {
	if req.Offset != 0 || req.Length != 0 || int64(len(dst)) <= c.opts.StripeThreshold {
		cl := &call{op: req.Op(), req: &req, dst: dst, sum: sum}
		var rr ReadResponse
		cl.resp = &rr
		err := c.do(ctx, addr, cl)
		rr.SetOp(cl.op)
		if sum && err == nil && cl.n == 0 {
			cl.digest = base.Checksum(nil)
		}
		return rr, int(cl.n), cl.digest, err
	}
	size := int64(len(dst))
	var (
		mu    sync.Mutex
		first ReadResponse
		seen  bool
		ss    *stripeSum
	)
	if sum {
		ss = newStripeSum(dst, c.stripeChunk(size))
	}
	err := c.stripe(ctx, addr, size, func(ctx context.Context, off, n int64) error {
		chunk := ReadRequest{Key: req.Key, Version: req.Version, Offset: off, Length: n, Verifies: req.Verifies, Cached: req.Cached}
		var rr ReadResponse
		cl := &call{op: wire.OpReadRange, req: &chunk, resp: &rr, dst: dst[off : off+n]}
		if ss != nil {
			i := int(off / ss.chunk)
			cl.landed = func(end int64) { ss.landed(i, end) }
		}
		err := c.do(ctx, addr, cl)
		if err != nil && cl.reported && c.opts.Retries > 0 && ctx.Err() == nil && isConnError(err) && isIdempotent(ctx, cl.op) {
			// The connection broke after part of the chunk landed and was reported: read the
			// chunk again (as do retries any idempotent call) once nothing hashes dst, and
			// hash the object in one pass at the end.
			ss.restart()
			cl.landed = nil
			err = c.do(ctx, addr, cl)
		}
		if err != nil {
			return err
		}
		if cl.n != n {
			return fmt.Errorf("%w: ReadRange of %q at %d: got %d bytes, want %d", base.ErrInvalidParams, req.Key, off, cl.n, n)
		}
		mu.Lock()
		defer mu.Unlock()
		if !seen {
			first, seen = rr, true
		} else if rr.Version != first.Version {
			return fmt.Errorf("%w: %q changed version during a striped read (%d then %d)", base.ErrInvalidVersion, req.Key, first.Version, rr.Version)
		}
		return nil
	})
	if err != nil {
		return ReadResponse{}, 0, 0, err
	}
	if first.Size != size {
		return first, 0, 0, fmt.Errorf("%w: %q is %d bytes, the buffer %d", base.ErrInvalidParams, req.Key, first.Size, size)
	}
	first.SetOp(wire.OpRead)
	var digest uint64
	if sum {
		// Every chunk call has returned, so no reader reports or hashes any more.
		digest = ss.sum()
	}
	return first, int(size), digest, nil
}

// maxChunksPerConn bounds the chunks of one striped transfer to maxChunksPerConn*ConnsPerPeer:
// larger objects get larger chunks, so the per-transfer work (calls, frames, allocations) is
// bounded by a constant, not proportional to the object size, while two chunks per connection
// still even out a slower connection.
const maxChunksPerConn = 2

// stripe runs fn on chunks of [0, size) with up to ConnsPerPeer chunks in flight; the first
// error cancels the rest. Chunks are StripeChunk bytes, or more for objects over
// StripeChunk*ConnsPerPeer*maxChunksPerConn.
func (c *Client) stripe(ctx context.Context, addr string, size int64, fn func(ctx context.Context, off, n int64) error) error {
	chunk := c.stripeChunk(size)
	nchunks := (size + chunk - 1) / chunk
	width := min(int64(c.opts.ConnsPerPeer), nchunks)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		next    atomic.Int64
		wg      sync.WaitGroup
		errOnce sync.Once
		first   error
	)
	for range width {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := next.Add(1) - 1
				if i >= nchunks || ctx.Err() != nil {
					return
				}
				off := i * chunk
				if err := fn(ctx, off, min(chunk, size-off)); err != nil {
					errOnce.Do(func() { first = err; cancel() })
					return
				}
			}
		}()
	}
	wg.Wait()
	if first == nil && ctx.Err() != nil {
		first = ctxError(ctx.Err(), "striped transfer")
	}
	return first
}

// stripeChunk is the chunk size of a striped transfer of size bytes: StripeChunk, or more for
// objects over StripeChunk*ConnsPerPeer*maxChunksPerConn.
func (c *Client) stripeChunk(size int64) int64 {
	chunk := c.opts.StripeChunk
	if most := int64(c.opts.ConnsPerPeer * maxChunksPerConn); (size+chunk-1)/chunk > most {
		chunk = (size + most - 1) / most
		chunk = (chunk + 4095) &^ 4095 // page multiples keep destinations aligned
	}
	return chunk
}

// call is one request and, once done, its outcome.
type call struct {
	op      wire.Op
	req     Message
	resp    Message // decoded into; nil: discard the body
	payload []byte  // request payload (Write)
	dst     []byte  // response payload destination (Read)
	sum     bool    // hash the payload into digest as it arrives (ReadSum)
	// landed, when set, is called by the reader after each piece of the response payload
	// lands in dst, with the end of what has landed (relative to dst). A call that reported
	// a piece is not retried by do: its caller decides (the bytes will be written again).
	landed func(end int64)
	// solo is set by roundTrip: no other call was pending on its connection, and none had
	// been for idleResendMin, when it was sent (the server may have been closing it as idle).
	solo bool

	// Set by the reader before done is closed.
	n        int64  // response payload bytes read into dst
	digest   uint64 // base.Checksum of dst[:n] when sum (and n > 0)
	reported bool   // landed was called
	err      error
	done     chan struct{}
}

// do runs cl against addr. It sends it again on a fresh connection after a connection error,
// up to Retries times, when the call is idempotent (isIdempotent) and no part of its answer
// has landed in dst (cl.reported); and, once, whatever the call, when the server closed an
// idle connection under it (see cl.solo).
func (c *Client) do(ctx context.Context, addr string, cl *call) error {
	retryable := isIdempotent(ctx, cl.op)
	var err error
	staleRetried := false
	for attempt := 0; ; attempt++ {
		err = c.attempt(ctx, addr, cl)
		if err == nil || ctx.Err() != nil {
			return err
		}
		if cl.solo && !staleRetried && isPeerClosed(err) {
			// The server closed the connection before any byte of an answer, and our call
			// went alone into a connection idle for a while: the server closed it as idle
			// as the call arrived, without handling it. Any call may go again, once, on a
			// new connection. (A server that crashed while handling exactly such a call
			// gets it again if it is back at once; a call on a busy or fresh connection is
			// never resent unless idempotent.)
			staleRetried = true
			attempt--
			c.log.Debug("transfer: resending a call the server closed its connection under", "op", cl.op, "addr", addr, "err", err)
			continue
		}
		if !retryable || attempt >= c.opts.Retries || !isConnError(err) || cl.reported {
			return err
		}
		c.log.Debug("transfer: retrying after a broken connection", "op", cl.op, "addr", addr, "attempt", attempt+1, "err", err)
	}
}

// connError marks an error of the connection (dial, handshake I/O, broken stream): the
// request may not have been handled, so idempotent calls may be retried. peerClosed says the
// peer closed the connection before sending any byte of a response (EOF or a reset at a
// frame boundary).
type connError struct {
	err        error
	peerClosed bool
}

// isPeerClosed reports a connError with peerClosed.
func isPeerClosed(err error) bool {
	var ce *connError
	return errors.As(err, &ce) && ce.peerClosed
}

func (e *connError) Error() string { return e.err.Error() }
func (e *connError) Unwrap() error { return e.err }

// Is makes every connection error match base.ErrUnavailable (code UNAVAILABLE): the peer may
// be restarting; a retry later, or another replica, may succeed.
func (e *connError) Is(target error) bool { return target == base.ErrUnavailable }

func isConnError(err error) bool {
	var ce *connError
	return errors.As(err, &ce)
}

// attempt sends cl once, on the next connection of addr's pool (dialled if need be).
func (c *Client) attempt(ctx context.Context, addr string, cl *call) error {
	p, err := c.peer(addr)
	if err != nil {
		return err
	}
	cc, err := p.conn(ctx)
	if err != nil {
		return err
	}
	return cc.roundTrip(ctx, cl)
}

// peer is the pool of connections to one address.
type peer struct {
	c     *Client
	addr  string
	rr    atomic.Uint32
	slots []connSlot
}

type connSlot struct {
	mu sync.Mutex // protects cc; held while dialling this slot
	cc *clientConn
}

// conn returns a working connection, round-robin over the slots, dialling when a slot is
// empty or its connection broke.
func (p *peer) conn(ctx context.Context) (*clientConn, error) {
	i := int(p.rr.Add(1)) % len(p.slots)
	s := &p.slots[i]
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cc != nil && s.cc.alive() && !s.cc.idleLongerThan(p.c.opts.IdleTimeout) {
		return s.cc, nil
	}
	if s.cc != nil {
		s.cc.close(nil)
		s.cc = nil
	}
	cc, err := p.dial(ctx)
	if err != nil {
		return nil, err
	}
	s.cc = cc
	return cc, nil
}

func (p *peer) close() {
	for i := range p.slots {
		s := &p.slots[i]
		s.mu.Lock()
		if s.cc != nil {
			s.cc.close(fmt.Errorf("transfer: client: %w", base.ErrClosed))
			s.cc = nil
		}
		s.mu.Unlock()
	}
}

// dial connects to the peer and shakes hands (protocol version, cluster id) within
// DialTimeout, then starts the connection's reader. Errors a retry may cure are connErrors.
func (p *peer) dial(ctx context.Context) (*clientConn, error) {
	c := p.c
	dctx, cancel := context.WithTimeout(ctx, c.opts.DialTimeout)
	defer cancel()
	nc, err := c.tr.Dial(dctx, p.addr)
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctxError(ctx.Err(), "dial "+p.addr)
		}
		return nil, &connError{err: fmt.Errorf("transfer: dial %s: %w: %w", p.addr, base.ErrUnavailable, err)}
	}
	tuneConn(nc, c.opts.SocketBuffer)
	if dl, ok := dctx.Deadline(); ok {
		_ = nc.SetDeadline(dl)
	}
	br := bufio.NewReaderSize(nc, readBufSize)
	hello := wire.AppendClientHello(make([]byte, 0, 64), wire.ProtocolVersion, c.opts.ClusterID)
	if _, err := nc.Write(hello); err != nil {
		nc.Close()
		return nil, &connError{err: fmt.Errorf("transfer: handshake with %s: %w: %w", p.addr, base.ErrUnavailable, err)}
	}
	sh, err := wire.ReadServerHello(br)
	if err != nil {
		nc.Close()
		if ctx.Err() != nil {
			return nil, ctxError(ctx.Err(), "handshake with "+p.addr)
		}
		return nil, &connError{err: fmt.Errorf("transfer: handshake with %s: %w: %w", p.addr, base.ErrUnavailable, err)}
	}
	if sh.Status != base.CodeOK {
		nc.Close()
		return nil, fmt.Errorf("transfer: %s refused the connection: %w", p.addr, base.NewCodeError(sh.Status, sh.Msg))
	}
	if sh.Version != wire.ProtocolVersion {
		nc.Close()
		return nil, fmt.Errorf("transfer: %s: %w: server speaks protocol version %d, this client %d",
			p.addr, base.ErrProtocolVersion, sh.Version, wire.ProtocolVersion)
	}
	_ = nc.SetDeadline(time.Time{})
	cc := &clientConn{c: c, nc: nc, br: br, addr: p.addr, w: newFrameWriter(nc, 0), done: make(chan struct{})}
	cc.mu.pending = make(map[uint64]*call)
	cc.mu.lastUsed = time.Now()
	go cc.readLoop()
	return cc, nil
}

// ctxError converts a context error: a deadline matches both base.ErrTimeout and
// context.DeadlineExceeded; a cancellation wraps context.Canceled.
func ctxError(err error, what string) error {
	if errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("transfer: %s: %w (%w)", what, base.ErrTimeout, err)
	}
	return fmt.Errorf("transfer: %s: %w", what, err)
}
