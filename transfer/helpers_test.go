package transfer

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"sync"
	"testing"

	"github.com/mooncake-go/mooncake/internal/base"
	"github.com/mooncake-go/mooncake/transfer/internal/wire"
)

// errFallThrough, returned by a memHandler.onCall hook, lets the default handling serve the call.
var errFallThrough = errors.New("fall through")

var quietLogger = slog.New(slog.NewTextHandler(io.Discard, nil))

// memHandler is a worker+master handler over a map, like an arena would be: Write frames land
// in a per-object buffer allocated at the first chunk, Commit/Commit-flag makes it visible.
type memHandler struct {
	UnimplementedHandler
	mu      sync.Mutex
	pending map[string]*pendingObj // key/version -> object being written
	objs    map[string]*memObj
	// hooks for tests; nil in normal use
	onCall  func(ctx context.Context, req Message) (Message, error)
	onWrite func(req *WriteRequest) // called in HandleWrite, before the payload is read
	onAbort func(err error)         // called when a Write's Done reports a failed transfer
	aborts  int
}

type pendingObj struct {
	buf      []byte
	received int64
}

type memObj struct {
	version  base.Version
	data     []byte
	checksum uint64
}

func newMemHandler() *memHandler {
	return &memHandler{pending: map[string]*pendingObj{}, objs: map[string]*memObj{}}
}

func pkey(k string, v base.Version) string { return fmt.Sprintf("%s@%d", k, v) }

func (h *memHandler) HandleCall(ctx context.Context, req Message) (Message, error) {
	if h.onCall != nil {
		resp, err := h.onCall(ctx, req)
		if err != errFallThrough {
			return resp, err
		}
	}
	switch r := req.(type) {
	case *Empty:
		return nil, nil
	case *LookupRequest:
		h.mu.Lock()
		defer h.mu.Unlock()
		o, ok := h.objs[r.Key]
		if !ok {
			return nil, fmt.Errorf("lookup %q: %w", r.Key, base.ErrObjectNotFound)
		}
		return &LookupResponse{ObjectMeta: base.ObjectMeta{Version: o.version, Size: int64(len(o.data)), Checksum: o.checksum},
			Replicas: []base.Placement{{WorkerID: "w1", Address: "127.0.0.1:1"}}}, nil
	case *CommitRequest:
		h.mu.Lock()
		defer h.mu.Unlock()
		return nil, h.commitLocked(r.Key, r.Version, r.Checksum)
	}
	return h.UnimplementedHandler.HandleCall(ctx, req)
}

// REQUIRES: h.mu
func (h *memHandler) commitLocked(key string, v base.Version, sum uint64) error {
	p, ok := h.pending[pkey(key, v)]
	if !ok {
		return fmt.Errorf("commit %q: %w", key, base.ErrObjectNotFound)
	}
	if p.received != int64(len(p.buf)) {
		return fmt.Errorf("commit %q: %w: %d of %d bytes received", key, base.ErrReplicaNotReady, p.received, len(p.buf))
	}
	got := base.Checksum(p.buf)
	if sum != 0 && got != sum {
		return fmt.Errorf("commit %q: %w", key, base.ErrCorruption)
	}
	delete(h.pending, pkey(key, v))
	h.objs[key] = &memObj{version: v, data: p.buf, checksum: got}
	return nil
}

func (h *memHandler) HandleWrite(_ context.Context, req *WriteRequest, n int64) (WriteSink, error) {
	if h.onWrite != nil {
		h.onWrite(req)
	}
	if req.Offset+n > req.TotalSize {
		return WriteSink{}, fmt.Errorf("%w: chunk beyond the object", base.ErrInvalidParams)
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	p, ok := h.pending[pkey(req.Key, req.Version)]
	if !ok {
		p = &pendingObj{buf: make([]byte, req.TotalSize)}
		h.pending[pkey(req.Key, req.Version)] = p
	}
	return WriteSink{
		Dst: p.buf[req.Offset : req.Offset+n],
		Done: func(err error) error {
			h.mu.Lock()
			defer h.mu.Unlock()
			if err != nil {
				h.aborts++
				delete(h.pending, pkey(req.Key, req.Version))
				if h.onAbort != nil {
					h.onAbort(err)
				}
				return err
			}
			p.received += n
			if req.Commit {
				return h.commitLocked(req.Key, req.Version, req.Checksum)
			}
			return nil
		},
	}, nil
}

func (h *memHandler) HandleRead(_ context.Context, req *ReadRequest) (ReadSource, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	o, ok := h.objs[req.Key]
	if !ok || (req.Version != 0 && req.Version != o.version) {
		return ReadSource{}, fmt.Errorf("read %q: %w", req.Key, base.ErrObjectNotFound)
	}
	size := int64(len(o.data))
	end := size
	if req.Length > 0 {
		end = req.Offset + req.Length
	}
	if req.Offset > size || end > size {
		return ReadSource{}, fmt.Errorf("%w: range beyond the object", base.ErrInvalidParams)
	}
	return ReadSource{
		Resp: ReadResponse{Version: o.version, Size: size, Checksum: o.checksum, Tier: base.TierDRAM},
		Data: o.data[req.Offset:end],
	}, nil
}

func (h *memHandler) object(key string) *memObj {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.objs[key]
}

// newServer returns a server of h (logging nowhere unless opts has a Logger), not serving
// yet; the caller starts and closes it.
func newServer(tb testing.TB, h Handler, opts ServerOptions) *Server {
	tb.Helper()
	if opts.Logger == nil {
		opts.Logger = quietLogger
	}
	s, err := NewServer(h, opts)
	if err != nil {
		tb.Fatal(err)
	}
	closes := make(chan struct{}, 1)
	s.testHookConnClosed = func() {
		select {
		case closes <- struct{}{}:
		default: // a close not yet seen is pending: the waiter reads Stats afresh anyway
		}
	}
	connCloses.Store(s, closes)
	tb.Cleanup(func() { connCloses.Delete(s) })
	return s
}

// connCloses maps each test server (newServer) to the channel its testHookConnClosed
// signals, for awaitStat.
var connCloses sync.Map // *Server -> chan struct{}

// startServer serves h on 127.0.0.1:0 and closes it at the end of the test or benchmark.
func startServer(tb testing.TB, h Handler, opts ServerOptions) *Server {
	tb.Helper()
	s := newServer(tb, h, opts)
	if err := s.Start(nil, "127.0.0.1:0"); err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = s.Close() })
	return s
}

// newClient returns a client (logging nowhere unless opts has a Logger), closed at the end
// of the test or benchmark.
func newClient(tb testing.TB, opts ClientOptions) *Client {
	tb.Helper()
	if opts.Logger == nil {
		opts.Logger = quietLogger
	}
	c, err := NewClient(opts)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = c.Close() })
	return c
}

func pattern(n int, seed byte) []byte {
	p := make([]byte, n)
	for i := range p {
		p[i] = byte(i*31) ^ seed
	}
	return p
}

// startServerOn serves h on a tracking listener on 127.0.0.1:0 (accepted connections wrapped
// with wrap when non-nil) and closes it at the end of the test.
func startServerOn(t *testing.T, h Handler, opts ServerOptions, wrap func(net.Conn) net.Conn) (*Server, *trackingListener) {
	t.Helper()
	s := newServer(t, h, opts)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	tl := &trackingListener{Listener: l, wrap: wrap}
	done := make(chan error, 1)
	go func() { done <- s.Serve(tl) }()
	t.Cleanup(func() {
		_ = s.Close()
		if err := <-done; !errors.Is(err, ErrServerClosed) {
			t.Errorf("Serve returned %v", err)
		}
	})
	return s, tl
}

// rawConn dials addr and completes the handshake by hand, for tests that write frames
// byte by byte.
func rawConn(t *testing.T, addr, clusterID string) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	if _, err := c.Write(wire.AppendClientHello(nil, wire.ProtocolVersion, clusterID)); err != nil {
		t.Fatal(err)
	}
	sh, err := wire.ReadServerHello(c)
	if err != nil || sh.Status != base.CodeOK {
		t.Fatalf("handshake: %+v %v", sh, err)
	}
	return c
}

// frame returns the bytes of a request frame.
func frame(id uint64, m Message, payload []byte) []byte {
	h := wire.Header{Op: m.Op(), RequestID: id, PayloadLen: uint64(len(payload))}
	body := Marshal(m)
	h.BodyLen = uint32(len(body))
	b := make([]byte, wire.HeaderLen, wire.HeaderLen+len(body)+len(payload))
	wire.PutHeader(b, &h)
	b = append(b, body...)
	return append(b, payload...)
}

// readResponse reads one response frame (header, body, payload) from r.
func readResponse(t *testing.T, r io.Reader) (wire.Header, []byte, []byte) {
	t.Helper()
	var hb [wire.HeaderLen]byte
	if _, err := io.ReadFull(r, hb[:]); err != nil {
		t.Fatalf("read response header: %v", err)
	}
	var h wire.Header
	if err := wire.DecodeHeader(hb[:], wire.Limits{}, &h); err != nil {
		t.Fatal(err)
	}
	body := make([]byte, h.BodyLen)
	if _, err := io.ReadFull(r, body); err != nil {
		t.Fatal(err)
	}
	payload := make([]byte, h.PayloadLen)
	if _, err := io.ReadFull(r, payload); err != nil {
		t.Fatal(err)
	}
	return h, body, payload
}

// Ping checks that addr answers.
func (c *Client) Ping(ctx context.Context, addr string) error {
	return c.Call(ctx, addr, NewEmpty(wire.OpPing), nil)
}

// WithIdempotent marks ctx so that calls made with it are retried after a broken connection
// even if their op is not idempotent by itself (e.g. a Write the caller knows is safe to
// resend, because the object is not committed until Commit).
func WithIdempotent(ctx context.Context) context.Context {
	return context.WithValue(ctx, idempotentKey{}, true)
}
