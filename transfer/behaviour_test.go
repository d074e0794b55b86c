package transfer

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mooncake-go/mooncake/internal/base"
	"github.com/mooncake-go/mooncake/transfer/internal/wire"
)

// TestChoppedStreams runs writes, reads and calls over connections that move at most 1 (then
// 7) bytes per read and per write, in both directions: every frame (handshake, header, body,
// payload) is split at every byte boundary, by a slow reader and a slow writer.
func TestChoppedStreams(t *testing.T) {
	for _, max := range []int{1, 7} {
		t.Run(fmt.Sprint(max), func(t *testing.T) {
			h := newMemHandler()
			_, tl := startServerOn(t, h, ServerOptions{}, func(c net.Conn) net.Conn { return chopConn{Conn: c, max: max} })
			addr := tl.Addr().String()
			c := newClient(t, ClientOptions{Transport: chopTransport{max: max}, Checksums: true,
				StripeThreshold: 2048, StripeChunk: 1000, ConnsPerPeer: 2})
			ctx := context.Background()
			for _, size := range []int{0, 1, 33, 2048, 5000} {
				key := fmt.Sprintf("k%d", size)
				data := pattern(size, 3)
				if err := c.Write(ctx, addr, WriteRequest{Key: key, Version: 1, Checksum: base.Checksum(data)}, data); err != nil {
					t.Fatalf("write %d: %v", size, err)
				}
				dst := make([]byte, size)
				if _, n, err := c.Read(ctx, addr, ReadRequest{Key: key}, dst); err != nil || n != size || !bytes.Equal(dst, data) {
					t.Fatalf("read %d: %d %v", size, n, err)
				}
				var lr LookupResponse
				if err := c.Call(ctx, addr, &LookupRequest{Key: key}, &lr); err != nil || lr.Size != int64(size) {
					t.Fatalf("lookup: %v", err)
				}
			}
		})
	}
}

// TestFrameSplitAtEveryBoundary writes one Write frame (header, body, payload) to the server
// in two writes split at every possible byte, and checks each is served.
func TestFrameSplitAtEveryBoundary(t *testing.T) {
	h := newMemHandler()
	s := startServer(t, h, ServerOptions{})
	c := rawConn(t, s.Addr().String(), base.DefaultClusterID)
	payload := pattern(50, 9)
	for k := 0; ; k++ {
		req := &WriteRequest{Key: fmt.Sprintf("split%d", k), Version: 1, TotalSize: 50, Commit: true}
		f := frame(uint64(k+1), req, payload)
		if k > len(f) {
			break
		}
		if _, err := c.Write(f[:k]); err != nil {
			t.Fatal(err)
		}
		if _, err := c.Write(f[k:]); err != nil {
			t.Fatal(err)
		}
		rh, _, _ := readResponse(t, c)
		if rh.RequestID != uint64(k+1) || rh.Flags&wire.FlagError != 0 {
			t.Fatalf("split at %d: response %+v", k, rh)
		}
		if o := h.object(req.Key); o == nil || !bytes.Equal(o.data, payload) {
			t.Fatalf("split at %d: object not stored", k)
		}
	}
}

// TestPeerClosesMidPayload: a client that dies inside a Write payload leaves nothing visible;
// the handler's sink is told (and aborts); nothing leaks (VerifyNoLeaks).
func TestPeerClosesMidPayload(t *testing.T) {
	h := newMemHandler()
	aborted := make(chan error, 1)
	h.onAbort = func(err error) { aborted <- err }
	s := startServer(t, h, ServerOptions{})
	c := rawConn(t, s.Addr().String(), base.DefaultClusterID)
	f := frame(1, &WriteRequest{Key: "half", Version: 1, TotalSize: 1 << 20, Commit: true}, pattern(1<<20, 1))
	if _, err := c.Write(f[:len(f)/2]); err != nil {
		t.Fatal(err)
	}
	c.Close()
	err := <-aborted
	if !errors.Is(err, base.ErrUnavailable) || !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Fatalf("abort error: %v", err)
	}
	if h.object("half") != nil {
		t.Fatal("a partial write became visible")
	}
}

// TestBoundsRejectedBeforeAllocation: frames declaring bodies or payloads over the limits are
// refused with an error response and the connection is closed; a declared large body that
// never arrives does not make the server allocate it.
func TestBoundsRejectedBeforeAllocation(t *testing.T) {
	h := newMemHandler()
	s := startServer(t, h, ServerOptions{Limits: Limits{MaxBodyLen: 1 << 20, MaxPayloadLen: 1 << 20}})
	addr := s.Addr().String()
	for _, hd := range []wire.Header{
		{Op: wire.OpLookup, RequestID: 7, BodyLen: 1<<20 + 1},
		{Op: wire.OpWrite, RequestID: 7, BodyLen: 10, PayloadLen: 1 << 62},
		{Op: wire.OpLookup, RequestID: 7, PayloadLen: 5},
	} {
		c := rawConn(t, addr, base.DefaultClusterID)
		var b [wire.HeaderLen]byte
		wire.PutHeader(b[:], &hd)
		if _, err := c.Write(b[:]); err != nil {
			t.Fatal(err)
		}
		rh, body, _ := readResponse(t, c)
		if rh.RequestID != 7 || rh.Flags&wire.FlagError == 0 || rh.Status != base.CodeInvalidParams {
			t.Fatalf("%+v: response %+v", hd, rh)
		}
		var eb wire.ErrorBody
		eb.Decode(wire.NewDecoder(body))
		if _, err := c.Read(b[:1]); err != io.EOF {
			t.Fatalf("connection not closed after a bad header: %v (%s)", err, eb.Msg)
		}
	}

	// Declare a body just under the limit, send a few bytes, and go away: the server must not
	// have allocated the declared size.
	big := startServer(t, h, ServerOptions{Limits: Limits{MaxBodyLen: 512 << 20}})
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	for range 4 {
		c := rawConn(t, big.Addr().String(), base.DefaultClusterID)
		var b [wire.HeaderLen]byte
		wire.PutHeader(b[:], &wire.Header{Op: wire.OpBatchLookup, RequestID: 1, BodyLen: 500 << 20})
		c.Write(b[:])
		c.Write(make([]byte, 100))
		c.Close()
	}
	// Closing the listener's connections and waiting for them proves the loops finished.
	if err := big.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	runtime.ReadMemStats(&after)
	if grew := after.TotalAlloc - before.TotalAlloc; grew > 64<<20 {
		t.Fatalf("server allocated %d bytes for bodies declared but never sent", grew)
	}
}

// TestHandshakeMismatch: wrong cluster id and wrong protocol version are refused with their
// codes, both by the server (to a raw client) and as errors of the Client.
func TestHandshakeMismatch(t *testing.T) {
	s := startServer(t, newMemHandler(), ServerOptions{ClusterID: "a"})
	f := func(version uint16, cluster string, want base.Code) {
		t.Helper()
		c, err := net.Dial("tcp", s.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		c.Write(wire.AppendClientHello(nil, version, cluster))
		sh, err := wire.ReadServerHello(c)
		if err != nil || sh.Status != want {
			t.Fatalf("version %d cluster %q: %+v %v", version, cluster, sh, err)
		}
		if want != base.CodeOK {
			if _, err := c.Read(make([]byte, 1)); err != io.EOF {
				t.Fatalf("connection left open after a refused handshake: %v", err)
			}
		}
	}
	f(wire.ProtocolVersion, "a", base.CodeOK)
	f(wire.ProtocolVersion, "b", base.CodeClusterMismatch)
	f(wire.ProtocolVersion+1, "a", base.CodeProtocolVersion)

	// The Client maps a server refusing its version, and a server speaking another version.
	for _, tc := range []struct {
		reply []byte
		want  error
	}{
		{wire.AppendServerHello(nil, 9, base.CodeProtocolVersion, "speak 9"), base.ErrProtocolVersion},
		{wire.AppendServerHello(nil, 9, base.CodeOK, ""), base.ErrProtocolVersion},
		{wire.AppendServerHello(nil, wire.ProtocolVersion, base.CodeClusterMismatch, "other"), base.ErrClusterMismatch},
	} {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		done := make(chan struct{})
		go func() {
			defer close(done)
			c, err := l.Accept()
			if err != nil {
				return
			}
			defer c.Close()
			wire.ReadClientHello(c)
			c.Write(tc.reply)
			io.Copy(io.Discard, c)
		}()
		c := newClient(t, ClientOptions{})
		err = c.Ping(context.Background(), l.Addr().String())
		if !errors.Is(err, tc.want) {
			t.Fatalf("reply %q: %v, want %v", tc.reply, err, tc.want)
		}
		c.Close()
		l.Close()
		<-done
	}
}

// TestPipelining1000: 1,000 requests in flight at once on one connection; the handler holds
// every one until all have arrived, so they are concurrent, not sequential.
func TestPipelining1000(t *testing.T) {
	const n = 1000
	h := newMemHandler()
	var arrived atomic.Int32
	all := make(chan struct{})
	h.onCall = func(ctx context.Context, req Message) (Message, error) {
		lr := req.(*LookupRequest)
		if arrived.Add(1) == n {
			close(all)
		}
		select {
		case <-all:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		return &LookupResponse{ObjectMeta: base.ObjectMeta{Size: int64(len(lr.Key))}}, nil
	}
	_, tl := startServerOn(t, h, ServerOptions{}, nil)
	c := newClient(t, ClientOptions{ConnsPerPeer: 1})
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			key := fmt.Sprintf("key-%d", i)
			var lr LookupResponse
			if err := c.Call(context.Background(), tl.Addr().String(), &LookupRequest{Key: key}, &lr); err != nil {
				errs <- err
				return
			}
			if lr.Size != int64(len(key)) {
				errs <- fmt.Errorf("response for %s has size %d: mismatched", key, lr.Size)
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if tl.count() != 1 {
		t.Fatalf("%d connections, want 1", tl.count())
	}
}

// TestDeadline: a handler that blocks does not hold the caller past its deadline; the error
// matches base.ErrTimeout and context.DeadlineExceeded; the late response is dropped and the
// connection keeps working.
func TestDeadline(t *testing.T) {
	h := newMemHandler()
	release := make(chan struct{})
	entered := make(chan struct{}, 1)
	h.onCall = func(ctx context.Context, req Message) (Message, error) {
		if _, ok := req.(*LookupRequest); ok {
			entered <- struct{}{}
			<-release
			return &LookupResponse{ObjectMeta: base.ObjectMeta{Size: 1}}, nil
		}
		return nil, errFallThrough
	}
	_, tl := startServerOn(t, h, ServerOptions{}, nil)
	c := newClient(t, ClientOptions{ConnsPerPeer: 1})
	addr := tl.Addr().String()
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	err := c.Call(ctx, addr, &LookupRequest{Key: "k"}, &LookupResponse{})
	// The handler is still blocked: the call returned on its own deadline.
	if !errors.Is(err, base.ErrTimeout) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("got %v", err)
	}
	<-entered
	close(release)
	if err := c.Ping(context.Background(), addr); err != nil {
		t.Fatal(err)
	}
	if tl.count() != 1 {
		t.Fatalf("the connection was replaced (%d dials)", tl.count())
	}

	// Cancelling a read while its payload is arriving: Read returns, and does not write dst
	// afterwards (the connection is broken to stop the reader; -race checks dst).
	data := pattern(8<<20, 1)
	if err := c.Write(context.Background(), addr, WriteRequest{Key: "big", Version: 1}, data); err != nil {
		t.Fatal(err)
	}
	for range 5 {
		dst := make([]byte, len(data))
		rctx, rcancel := context.WithCancel(context.Background())
		go rcancel()
		_, _, err := c.Read(rctx, addr, ReadRequest{Key: "big", Offset: 1}, dst)
		if err != nil && !errors.Is(err, context.Canceled) {
			t.Fatalf("cancelled read: %v", err)
		}
		for i := range dst {
			dst[i] = 0 // races with a late writer if Read returned too early
		}
	}
}

// TestShutdownDrains: Shutdown waits for requests in flight (including a Write whose payload
// is still arriving) and their responses reach the client; new connections are refused.
func TestShutdownDrains(t *testing.T) {
	h := newMemHandler()
	release := make(chan struct{})
	entered := make(chan struct{})
	h.onCall = func(ctx context.Context, req Message) (Message, error) {
		if _, ok := req.(*RemoveRequest); ok {
			close(entered)
			<-release
			return nil, nil
		}
		return nil, nil
	}
	s := newServer(t, h, ServerOptions{})
	if err := s.Start(nil, "127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	addr := s.Addr().String()
	c := newClient(t, ClientOptions{ConnsPerPeer: 2, StripeThreshold: 64 << 20})
	if err := c.Ping(context.Background(), addr); err != nil {
		t.Fatal(err)
	}
	callErr := make(chan error, 1)
	go func() { callErr <- c.Call(context.Background(), addr, &RemoveRequest{Key: "x"}, nil) }()
	<-entered

	// A large Write: Shutdown starts while its payload is on the wire.
	writing := make(chan struct{})
	var once sync.Once
	h.onWrite = func(*WriteRequest) { once.Do(func() { close(writing) }) }
	data := pattern(32<<20, 5)
	writeErr := make(chan error, 1)
	go func() { writeErr <- c.Write(context.Background(), addr, WriteRequest{Key: "big", Version: 1}, data) }()
	<-writing

	shut := make(chan error, 1)
	go func() { shut <- s.Shutdown(context.Background()) }()
	if err := <-writeErr; err != nil {
		t.Fatalf("write in flight during shutdown: %v", err)
	}
	if o := h.object("big"); o == nil || !bytes.Equal(o.data, data) {
		t.Fatal("write in flight during shutdown not stored")
	}
	close(release)
	if err := <-callErr; err != nil {
		t.Fatalf("call in flight during shutdown: %v", err)
	}
	if err := <-shut; err != nil {
		t.Fatal(err)
	}
	c2 := newClient(t, ClientOptions{Retries: -1})
	if err := c2.Ping(context.Background(), addr); !errors.Is(err, base.ErrUnavailable) {
		t.Fatalf("ping after shutdown: %v", err)
	}
}

// TestShutdownDeadline: when the drain outlasts ctx, Shutdown closes connections, cancels
// handler contexts and returns ctx's error.
func TestShutdownDeadline(t *testing.T) {
	h := newMemHandler()
	entered := make(chan struct{})
	h.onCall = func(ctx context.Context, req Message) (Message, error) {
		close(entered)
		<-ctx.Done()
		return nil, ctx.Err()
	}
	s := startServer(t, h, ServerOptions{})
	c := newClient(t, ClientOptions{Retries: -1})
	callErr := make(chan error, 1)
	go func() { callErr <- c.Call(context.Background(), s.Addr().String(), &RemoveRequest{Key: "x"}, nil) }()
	<-entered
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := s.Shutdown(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("Shutdown: %v", err)
	}
	if err := <-callErr; !errors.Is(err, base.ErrUnavailable) {
		t.Fatalf("call cut by shutdown: %v", err)
	}
}

// TestRetryOnlyIdempotent: when the connection breaks under a call, Lookup is resent on a new
// connection and succeeds; Remove is not resent and fails with ErrUnavailable.
func TestRetryOnlyIdempotent(t *testing.T) {
	h := newMemHandler()
	var tl *trackingListener
	var lookups, removes atomic.Int32
	h.onCall = func(ctx context.Context, req Message) (Message, error) {
		var n int32
		switch req.(type) {
		case *LookupRequest:
			n = lookups.Add(1)
		case *RemoveRequest:
			n = removes.Add(1)
		default:
			return nil, nil
		}
		if n == 1 {
			tl.killAll() // the first attempt never gets an answer
			<-ctx.Done()
			return nil, ctx.Err()
		}
		return &LookupResponse{ObjectMeta: base.ObjectMeta{Size: 3}}, nil
	}
	_, tl = startServerOn(t, h, ServerOptions{}, nil)
	c := newClient(t, ClientOptions{ConnsPerPeer: 1})
	var lr LookupResponse
	if err := c.Call(context.Background(), tl.Addr().String(), &LookupRequest{Key: "k"}, &lr); err != nil || lr.Size != 3 {
		t.Fatalf("lookup: %v", err)
	}
	if lookups.Load() != 2 {
		t.Fatalf("%d lookups, want 2", lookups.Load())
	}
	err := c.Call(context.Background(), tl.Addr().String(), &RemoveRequest{Key: "k"}, nil)
	if !errors.Is(err, base.ErrUnavailable) || removes.Load() != 1 {
		t.Fatalf("remove: %v after %d attempts", err, removes.Load())
	}
	// WithIdempotent opts a call in.
	removes.Store(0)
	if err := c.Call(WithIdempotent(context.Background()), tl.Addr().String(), &RemoveRequest{Key: "k"}, nil); err != nil || removes.Load() != 2 {
		t.Fatalf("idempotent remove: %v after %d attempts", err, removes.Load())
	}
}

// TestServerErrors: handler errors, oversize reads into small buffers, unsupported calls.
func TestServerErrors(t *testing.T) {
	h := newMemHandler()
	s := startServer(t, h, ServerOptions{})
	addr := s.Addr().String()
	c := newClient(t, ClientOptions{})
	ctx := context.Background()
	if err := c.Write(ctx, addr, WriteRequest{Key: "k", Version: 1}, pattern(100, 1)); err != nil {
		t.Fatal(err)
	}
	// Destination too small: a typed error, and the connection stays usable.
	if _, _, err := c.Read(ctx, addr, ReadRequest{Key: "k"}, make([]byte, 10)); !errors.Is(err, base.ErrTooLarge) {
		t.Fatalf("small dst: %v", err)
	}
	// Wrong checksum at commit.
	err := c.Write(ctx, addr, WriteRequest{Key: "bad", Version: 1, Checksum: 1}, pattern(100, 1))
	if !errors.Is(err, base.ErrCorruption) {
		t.Fatalf("bad checksum: %v", err)
	}
	// A master-only handler does not serve Write.
	m := startServer(t, struct{ UnimplementedHandler }{}, ServerOptions{})
	if err := c.Write(ctx, m.Addr().String(), WriteRequest{Key: "k", Version: 1}, pattern(100, 1)); !errors.Is(err, base.ErrNotSupported) {
		t.Fatalf("unsupported write: %v", err)
	}
	if err := c.Call(ctx, m.Addr().String(), &StatusResponse{}, nil); !errors.Is(err, base.ErrNotSupported) && err == nil {
		t.Fatalf("status: %v", err)
	}
	if err := c.Call(ctx, addr, &ReadRequest{Key: "k"}, nil); !errors.Is(err, base.ErrInvalidParams) {
		t.Fatalf("Call with a read: %v", err)
	}
	// A key over base.MaxKeyLen is refused by the server's decoder as INVALID_KEY.
	var ce *base.CodeError
	err = c.Call(ctx, addr, &LookupRequest{Key: string(make([]byte, base.MaxKeyLen+1))}, &LookupResponse{})
	if !errors.Is(err, base.ErrInvalidKey) || !errors.As(err, &ce) || ce.Code != base.CodeInvalidKey {
		t.Fatalf("long key: %v", err)
	}
	// A panicking handler is an INTERNAL_ERROR, not a crash.
	h.onCall = func(context.Context, Message) (Message, error) { panic("boom") }
	if err := c.Call(ctx, addr, &RemoveRequest{Key: "k"}, nil); !errors.Is(err, base.ErrInternal) {
		t.Fatalf("panic: %v", err)
	}
}

// TestClientCloseInFlight: Close fails the calls in flight (ErrClosed) without waiting for
// their responses, and later calls fail the same way.
func TestClientCloseInFlight(t *testing.T) {
	h := newMemHandler()
	release := make(chan struct{})
	entered := make(chan struct{})
	h.onCall = func(ctx context.Context, req Message) (Message, error) {
		close(entered)
		<-release
		return nil, nil
	}
	s := startServer(t, h, ServerOptions{})
	defer close(release)
	c, err := NewClient(ClientOptions{Logger: quietLogger})
	if err != nil {
		t.Fatal(err)
	}
	callErr := make(chan error, 1)
	go func() { callErr <- c.Call(context.Background(), s.Addr().String(), &RemoveRequest{Key: "k"}, nil) }()
	<-entered
	c.Close()
	if err := <-callErr; !errors.Is(err, base.ErrClosed) {
		t.Fatalf("call in flight at Close: %v", err)
	}
	if err := c.Ping(context.Background(), s.Addr().String()); !errors.Is(err, base.ErrClosed) {
		t.Fatalf("call after Close: %v", err)
	}
}

// TestBodyBytesBound: with MaxBodyBytesPerConn room for one body, a second request with a
// large body is not read while the first is being handled.
func TestBodyBytesBound(t *testing.T) {
	h := newMemHandler()
	entered := make(chan struct{}, 2)
	release := make(chan struct{})
	h.onCall = func(ctx context.Context, req Message) (Message, error) {
		entered <- struct{}{}
		<-release
		return nil, nil
	}
	s := newServer(t, h, ServerOptions{MaxBodyBytesPerConn: 1000})
	waiting := make(chan struct{}, 1)
	s.testHookBodyWait = func() { waiting <- struct{}{} }
	if err := s.Start(nil, "127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	c := newClient(t, ClientOptions{ConnsPerPeer: 1})
	errs := make(chan error, 2)
	for i := range 2 {
		key := fmt.Sprintf("%0600d", i) // a 604-byte body: two do not fit in 1000 bytes
		go func() { errs <- c.Call(context.Background(), s.Addr().String(), &RemoveRequest{Key: key}, nil) }()
	}
	<-entered
	select {
	case <-waiting: // the read loop holds back the second body
	case <-entered:
		close(release)
		t.Fatal("a second large body was admitted while the first request was being handled")
	}
	close(release)
	for range 2 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
}
