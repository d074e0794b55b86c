package transfer

import (
	"context"
	"errors"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mooncake-go/mooncake/internal/base"
	"github.com/mooncake-go/mooncake/internal/testutil"
	"github.com/mooncake-go/mooncake/transfer/internal/wire"
)

// awaitClosed reads from c until the server closes it (EOF or a reset), failing the test if
// that does not happen within limit. It returns how long it took.
func awaitClosed(t *testing.T, c net.Conn, limit time.Duration) time.Duration {
	t.Helper()
	start := time.Now()
	_ = c.SetReadDeadline(start.Add(limit))
	var b [64]byte
	for {
		_, err := c.Read(b[:])
		if err == nil {
			continue
		}
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() {
			t.Fatalf("the server did not close the connection within %v", limit)
		}
		return time.Since(start)
	}
}

// awaitStat waits until the server's stats satisfy cond, reading them again after each
// connection close the server counts (s comes from newServer); it fails after 10 s.
func awaitStat(t *testing.T, s *Server, what string, cond func(ServerStats) bool) ServerStats {
	t.Helper()
	v, ok := connCloses.Load(s)
	if !ok {
		t.Fatal("awaitStat: a server not made by newServer")
	}
	closes := v.(chan struct{})
	limit := time.After(10 * time.Second)
	for {
		st := s.Stats()
		if cond(st) {
			return st
		}
		select {
		case <-closes:
		case <-limit:
			t.Fatalf("%s: stats %+v", what, st)
		}
	}
}

// TestIdleConnectionClosed: a connection that completes its hello and then sends nothing is
// closed after IdleTimeout (not much before it) and counted as idle.
func TestIdleConnectionClosed(t *testing.T) {
	const idle = 300 * time.Millisecond
	s := startServer(t, newMemHandler(), ServerOptions{IdleTimeout: idle, FrameTimeout: time.Hour})
	c := rawConn(t, s.Addr().String(), base.DefaultClusterID)
	took := awaitClosed(t, c, 20*idle)
	if took < idle/2 { // the server's clock started a little before ours (at its hello)
		t.Fatalf("closed after %v, well before the idle timeout %v", took, idle)
	}
	st := awaitStat(t, s, "idle close counted", func(st ServerStats) bool { return st.Closed["idle"] == 1 && st.Open == 0 })
	t.Logf("idle connection closed after %v (timeout %v); stats %+v", took, idle, st)
}

// TestTrickledFrameClosed: a frame trickled one byte at a time (a header, or the payload of a
// Write) is closed after FrameTimeout, counted as frame_timeout, and a Write's destination is
// aborted; the idle timeout (long here) plays no part.
func TestTrickledFrameClosed(t *testing.T) {
	const frameTimeout = 400 * time.Millisecond
	h := newMemHandler()
	aborted := make(chan error, 1)
	h.onAbort = func(err error) { aborted <- err }
	s := startServer(t, h, ServerOptions{IdleTimeout: time.Hour, FrameTimeout: frameTimeout})
	trickle := func(c net.Conn, b []byte) { testutil.Trickle(c, b, frameTimeout/8) }
	// A header, one byte per frameTimeout/8: 40 bytes need 5 timeouts.
	c := rawConn(t, s.Addr().String(), base.DefaultClusterID)
	go trickle(c, frame(1, &LookupRequest{Key: "k"}, nil))
	took := awaitClosed(t, c, 20*frameTimeout)
	t.Logf("trickled header: closed after %v (frame timeout %v)", took, frameTimeout)

	// A whole header and body, then the payload byte by byte.
	c = rawConn(t, s.Addr().String(), base.DefaultClusterID)
	payload := pattern(1<<20, 3)
	f := frame(2, &WriteRequest{Key: "w", Version: 1, TotalSize: int64(len(payload)), Commit: true}, payload)
	head := len(f) - len(payload)
	if _, err := c.Write(f[:head]); err != nil {
		t.Fatal(err)
	}
	go trickle(c, payload)
	took = awaitClosed(t, c, 20*frameTimeout)
	t.Logf("trickled payload: closed after %v", took)
	select {
	case err := <-aborted:
		if !errors.Is(err, base.ErrUnavailable) {
			t.Fatalf("the Write was aborted with %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the trickled Write's destination was never aborted")
	}
	st := awaitStat(t, s, "frame timeouts counted", func(st ServerStats) bool { return st.Closed["frame_timeout"] == 2 && st.Open == 0 })
	if st.Closed["idle"] != 0 {
		t.Fatalf("stats %+v", st)
	}
}

// TestBusyConnectionNotIdle: a connection whose only request is being handled for longer
// than the idle timeout is not idle: the call completes.
func TestBusyConnectionNotIdle(t *testing.T) {
	const idle = 200 * time.Millisecond
	h := newMemHandler()
	h.onCall = func(ctx context.Context, req Message) (Message, error) {
		if _, ok := req.(*LookupRequest); ok {
			select {
			case <-time.After(4 * idle):
			case <-ctx.Done():
				return nil, ctx.Err()
			}
			return &LookupResponse{ObjectMeta: base.ObjectMeta{Size: 7}}, nil
		}
		return nil, errFallThrough
	}
	s := startServer(t, h, ServerOptions{IdleTimeout: idle})
	c := newClient(t, ClientOptions{ConnsPerPeer: 1, Retries: -1})
	var lr LookupResponse
	if err := c.Call(context.Background(), s.Addr().String(), &LookupRequest{Key: "k"}, &lr); err != nil || lr.Size != 7 {
		t.Fatalf("a call handled for 4 idle timeouts: %v", err)
	}
	if st := s.Stats(); st.Closed["idle"] != 0 {
		t.Fatalf("closed as idle while busy: %+v", st)
	}
}

// testProxy accepts connections on 127.0.0.1 and, for each, dials target and runs forward
// (client to server: c to up; server to client is copied unchanged). n counts connections.
type testProxy struct {
	l  net.Listener
	wg sync.WaitGroup
}

func (p *testProxy) addr() string { return p.l.Addr().String() }

func startProxy(t *testing.T, target string, forward func(n int, c, up net.Conn)) *testProxy {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &testProxy{l: l}
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		for n := 0; ; n++ {
			c, err := l.Accept()
			if err != nil {
				return
			}
			p.wg.Add(1)
			go func() {
				defer p.wg.Done()
				defer c.Close()
				up, err := net.Dial("tcp", target)
				if err != nil {
					return
				}
				defer up.Close()
				go func() {
					_, _ = io.Copy(c, up)
					c.Close()
				}()
				forward(n, c, up)
			}()
		}
	}()
	t.Cleanup(func() {
		l.Close()
		p.wg.Wait()
	})
	return p
}

// paceTo returns when n bytes are due at rate bytes per second since start: the pace of a
// slow link, which is the stimulus of a timeout test (the server measures it on its real
// clock, over real TCP, so no synctest bubble can stand in for it); nothing waits on it.
func paceTo(start time.Time, n, rate int64) {
	if d := time.Until(start.Add(time.Duration(n * int64(time.Second) / rate))); d > 0 {
		t := time.NewTimer(d)
		<-t.C
	}
}

// pacedForward copies c to up at most rate bytes per second (in 16 KiB steps): a slow link.
func pacedForward(rate int64) func(int, net.Conn, net.Conn) {
	return func(_ int, c, up net.Conn) {
		buf := make([]byte, 16<<10)
		start := time.Now()
		var sent int64
		for {
			n, err := c.Read(buf)
			if n > 0 {
				if _, werr := up.Write(buf[:n]); werr != nil {
					return
				}
				sent += int64(n)
				paceTo(start, sent, rate)
			}
			if err != nil {
				return
			}
		}
	}
}

// TestSlowTransferCompletes: a 64 MiB Write in one frame over a link paced at 16 MiB/s
// lasts about 4 s, ten times the frame timeout, and completes: the timeout bounds progress,
// not the frame.
func TestSlowTransferCompletes(t *testing.T) {
	const frameTimeout = 400 * time.Millisecond
	h := newMemHandler()
	s := startServer(t, h, ServerOptions{IdleTimeout: time.Second, FrameTimeout: frameTimeout})
	p := startProxy(t, s.Addr().String(), pacedForward(16<<20))
	c := newClient(t, ClientOptions{StripeThreshold: 1 << 30}) // one frame, no striping
	data := pattern(64<<20, 9)
	start := time.Now()
	err := c.Write(context.Background(), p.addr(), WriteRequest{Key: "big", Version: 1, Checksum: base.Checksum(data)}, data)
	if err != nil {
		t.Fatalf("64 MiB over a slow link: %v (stats %+v)", err, s.Stats())
	}
	took := time.Since(start)
	o := h.object("big")
	if o == nil || base.Checksum(o.data) != base.Checksum(data) {
		t.Fatal("the object did not arrive whole")
	}
	st := s.Stats()
	t.Logf("64 MiB in one frame over a 16 MiB/s link: %v (frame timeout %v); stats %+v", took, frameTimeout, st)
	if st.Closed["frame_timeout"] != 0 || took < 2*frameTimeout {
		t.Fatalf("the transfer was cut or not slow: %v, %+v", took, st)
	}
}

// TestMaxConnsPerPeer: connections past MaxConnsPerPeer from one address are closed at
// accept and counted; once one closes, a new one is accepted.
func TestMaxConnsPerPeer(t *testing.T) {
	s := startServer(t, newMemHandler(), ServerOptions{MaxConnsPerPeer: 2})
	addr := s.Addr().String()
	a := rawConn(t, addr, base.DefaultClusterID)
	_ = rawConn(t, addr, base.DefaultClusterID)
	third, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer third.Close()
	awaitClosed(t, third, 10*time.Second)
	awaitStat(t, s, "peer limit counted", func(st ServerStats) bool { return st.Closed["peer_limit"] == 1 })
	a.Close()
	awaitStat(t, s, "a connection closed", func(st ServerStats) bool { return st.Open == 1 })
	_ = rawConn(t, addr, base.DefaultClusterID) // fits again
	c := newClient(t, ClientOptions{ConnsPerPeer: 1})
	if err := c.Ping(context.Background(), addr); err == nil {
		t.Fatal("a client past the limit got an answer")
	}
}

// TestClientRedialsAfterIdleClose: a client whose pooled connection the server closed as
// idle makes its next (non-idempotent) call on a new connection, whether it noticed the
// close before the call or the server closed the connection as the call arrived.
func TestClientRedialsAfterIdleClose(t *testing.T) {
	const idle = 200 * time.Millisecond
	h := newMemHandler()
	var writes atomic.Int32
	h.onWrite = func(*WriteRequest) { writes.Add(1) }
	s := startServer(t, h, ServerOptions{IdleTimeout: idle})
	c := newClient(t, ClientOptions{ConnsPerPeer: 1, Retries: -1})
	ctx := context.Background()
	for i := range 3 {
		data := pattern(1000, byte(i))
		if err := c.Write(ctx, s.Addr().String(), WriteRequest{Key: "k", Version: base.Version(i + 1)}, data); err != nil {
			t.Fatalf("write %d: %v", i, err)
		}
		awaitStat(t, s, "the idle close", func(st ServerStats) bool { return st.Closed["idle"] == int64(i+1) })
		// NB: the server counts its close before the client's reader meets the EOF; a write
		// in between would go into the dying connection (the race the second half plays on
		// purpose). Here the client must have seen it, so the next write redials.
		testutil.WaitFor(t, "the client sees the idle close", 10*time.Second, func() error {
			if !connsClosed(c, s.Addr().String()) {
				return errors.New("the pooled connection still looks alive")
			}
			return nil
		})
	}
	if n := writes.Load(); n != 3 {
		t.Fatalf("%d writes handled, want 3", n)
	}

	// The race: the server side closes an idle connection exactly when a call arrives. A
	// proxy plays the server closing: on the first bytes after an idle pause, it closes
	// both sides without forwarding them.
	var armed atomic.Bool
	var cut atomic.Int32
	rp := startProxy(t, s.Addr().String(), racyForward(&armed, &cut))
	c2 := newClient(t, ClientOptions{ConnsPerPeer: 1, Retries: -1, IdleTimeout: -1})
	if err := c2.Write(ctx, rp.addr(), WriteRequest{Key: "r", Version: 1}, pattern(10, 1)); err != nil {
		t.Fatal(err)
	}
	// The client resends a call the server closed its connection under only when the call went
	// into a connection idle for idleResendMin (on its own clock), as the server's idle close
	// implies: once it has been, the proxy cuts the next bytes.
	testutil.WaitFor(t, "the client's connection idle", 10*time.Second, func() error {
		if !idleFor(c2, rp.addr(), idleResendMin) {
			return errors.New("in use too recently")
		}
		return nil
	})
	armed.Store(true)
	if err := c2.Write(ctx, rp.addr(), WriteRequest{Key: "r", Version: 2}, pattern(10, 2)); err != nil {
		t.Fatalf("write into a connection closed as it arrived: %v", err)
	}
	if cut.Load() != 1 || writes.Load() != 5 {
		t.Fatalf("proxy cut %d connections, %d writes handled", cut.Load(), writes.Load())
	}
	// A call on a fresh connection is not resent: TestRetryOnlyIdempotent.
}

// connsClosed reports whether every pooled connection of c to addr is gone or has failed.
func connsClosed(c *Client, addr string) bool {
	return everyConn(c, addr, func(cc *clientConn) bool { return !cc.alive() })
}

// idleFor reports whether every pooled connection of c to addr has had no call for longer
// than d.
func idleFor(c *Client, addr string, d time.Duration) bool {
	return everyConn(c, addr, func(cc *clientConn) bool { return cc.idleLongerThan(d) })
}

// everyConn reports whether ok holds for every pooled connection of c to addr (an empty
// slot holds none); false when addr has no pool.
func everyConn(c *Client, addr string, ok func(*clientConn) bool) bool {
	p, err := c.peer(addr)
	if err != nil {
		return false
	}
	for i := range p.slots {
		s := &p.slots[i]
		s.mu.Lock()
		cc := s.cc
		s.mu.Unlock()
		if cc != nil && !ok(cc) {
			return false
		}
	}
	return true
}

// racyForward forwards c to up; on the first connection, the first bytes from the client
// read once armed is set are dropped and both sides closed (counted in cut).
func racyForward(armed *atomic.Bool, cut *atomic.Int32) func(int, net.Conn, net.Conn) {
	return func(n int, c, up net.Conn) {
		buf := make([]byte, 64<<10)
		for {
			k, err := c.Read(buf)
			if k > 0 {
				if n == 0 && cut.Load() == 0 && armed.Load() {
					cut.Add(1)
					return // drop the bytes; the deferred closes cut both sides
				}
				if _, werr := up.Write(buf[:k]); werr != nil {
					return
				}
			}
			if err != nil {
				return
			}
		}
	}
}

// putObject stores data as key in h through a client (a test fixture).
func putObject(t *testing.T, s *Server, key string, data []byte) {
	t.Helper()
	c := newClient(t, ClientOptions{})
	if err := c.Write(context.Background(), s.Addr().String(), WriteRequest{Key: key, Version: 1, Checksum: base.Checksum(data)}, data); err != nil {
		t.Fatal(err)
	}
}

// TestStalledReaderClosed: a peer that asks for 64 MiB and stops reading is closed after the
// frame timeout (counted as frame_timeout), so the response and what it pins are released.
func TestStalledReaderClosed(t *testing.T) {
	const frameTimeout = 400 * time.Millisecond
	s := startServer(t, newMemHandler(), ServerOptions{IdleTimeout: time.Hour, FrameTimeout: frameTimeout})
	putObject(t, s, "big", pattern(64<<20, 5))
	c := rawConn(t, s.Addr().String(), base.DefaultClusterID)
	if _, err := c.Write(frame(1, &ReadRequest{Key: "big"}, nil)); err != nil {
		t.Fatal(err)
	}
	st := awaitStat(t, s, "the stalled reader closed", func(st ServerStats) bool { return st.Closed["frame_timeout"] == 1 })
	t.Logf("stats %+v", st)
}

// TestSlowReaderServed: a peer reading a 64 MiB response at 16 MiB/s (4 s, ten frame
// timeouts) gets all of it.
func TestSlowReaderServed(t *testing.T) {
	const frameTimeout = 400 * time.Millisecond
	s := startServer(t, newMemHandler(), ServerOptions{IdleTimeout: time.Hour, FrameTimeout: frameTimeout})
	data := pattern(64<<20, 6)
	putObject(t, s, "big", data)
	c := rawConn(t, s.Addr().String(), base.DefaultClusterID)
	if _, err := c.Write(frame(1, &ReadRequest{Key: "big"}, nil)); err != nil {
		t.Fatal(err)
	}
	const rate = 16 << 20
	start := time.Now()
	var got int64
	slow := readerFunc(func(p []byte) (int, error) {
		n, err := c.Read(p[:min(len(p), 16<<10)])
		got += int64(n)
		paceTo(start, got, rate)
		return n, err
	})
	h, _, payload := readResponse(t, slow)
	if h.Flags&wire.FlagError != 0 || base.Checksum(payload) != base.Checksum(data) {
		t.Fatalf("response %+v: the payload does not match", h)
	}
	t.Logf("64 MiB read at 16 MiB/s in %v (frame timeout %v)", time.Since(start), frameTimeout)
	if st := s.Stats(); st.Closed["frame_timeout"] != 0 {
		t.Fatalf("stats %+v", st)
	}
}

type readerFunc func([]byte) (int, error)

func (f readerFunc) Read(p []byte) (int, error) { return f(p) }
