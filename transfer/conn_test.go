package transfer

import (
	"context"
	"net"
	"runtime"
	"sync"
)

// chopConn reads and writes at most max bytes per call, yielding between writes: every frame
// is split at every byte boundary (max 1) or at small odd ones, in both directions.
type chopConn struct {
	net.Conn
	max int
}

func (c chopConn) Read(p []byte) (int, error) {
	if len(p) > c.max {
		p = p[:c.max]
	}
	return c.Conn.Read(p)
}

func (c chopConn) Write(p []byte) (int, error) {
	n := 0
	for n < len(p) {
		k := min(c.max, len(p)-n)
		m, err := c.Conn.Write(p[n : n+k])
		n += m
		if err != nil {
			return n, err
		}
		runtime.Gosched()
	}
	return n, nil
}

// trackingListener wraps accepted connections (with wrap, when set) and remembers them, so a
// test can count or kill the server side of connections.
type trackingListener struct {
	net.Listener
	wrap  func(net.Conn) net.Conn
	mu    sync.Mutex
	conns []net.Conn
}

func (l *trackingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	l.mu.Lock()
	l.conns = append(l.conns, c)
	l.mu.Unlock()
	if l.wrap != nil {
		return l.wrap(c), nil
	}
	return c, nil
}

func (l *trackingListener) count() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.conns)
}

// killAll closes the server side of every accepted connection.
func (l *trackingListener) killAll() {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, c := range l.conns {
		c.Close()
	}
}

// chopTransport dials TCP connections wrapped in chopConn.
type chopTransport struct{ max int }

func (chopTransport) Name() string                             { return "chop" }
func (chopTransport) Listen(addr string) (net.Listener, error) { return net.Listen("tcp", addr) }
func (t chopTransport) Dial(ctx context.Context, addr string) (net.Conn, error) {
	c, err := tcpTransport{}.Dial(ctx, addr)
	if err != nil {
		return nil, err
	}
	return chopConn{Conn: c, max: t.max}, nil
}
