package transfer

import (
	"bytes"
	"context"
	"errors"
	"net"
	"sync"
	"testing"

	"github.com/mooncake-go/mooncake/internal/base"
)

// cutConn closes itself after writing limit bytes, once: the first response payload to cross
// the limit is cut in the middle.
type cutConn struct {
	net.Conn
	mu    *sync.Mutex
	left  *int64
	armed *bool
}

func (c cutConn) Write(p []byte) (int, error) {
	c.mu.Lock()
	if *c.armed && int64(len(p)) > *c.left {
		*c.armed = false
		n := *c.left
		c.mu.Unlock()
		m, _ := c.Conn.Write(p[:n])
		c.Conn.Close()
		return m, net.ErrClosed
	}
	if *c.armed {
		*c.left -= int64(len(p))
	}
	c.mu.Unlock()
	return c.Conn.Write(p)
}

// TestServerClosesMidReadPayload: a Read whose response is cut mid-payload fails cleanly
// without retries, and succeeds on a new connection with them (reads are idempotent).
func TestServerClosesMidReadPayload(t *testing.T) {
	for _, retries := range []int{-1, 2} {
		h := newMemHandler()
		var mu sync.Mutex
		left, armed := int64(0), false
		_, tl := startServerOn(t, h, ServerOptions{}, func(c net.Conn) net.Conn {
			return cutConn{Conn: c, mu: &mu, left: &left, armed: &armed}
		})
		addr := tl.Addr().String()
		c := newClient(t, ClientOptions{Retries: retries, ConnsPerPeer: 1})
		ctx := context.Background()
		data := pattern(1<<20, 2)
		if err := c.Write(ctx, addr, WriteRequest{Key: "k", Version: 1}, data); err != nil {
			t.Fatal(err)
		}
		mu.Lock()
		left, armed = 1000, true
		mu.Unlock()
		dst := make([]byte, len(data))
		_, n, err := c.Read(ctx, addr, ReadRequest{Key: "k"}, dst)
		if retries < 0 {
			if !errors.Is(err, base.ErrUnavailable) {
				t.Fatalf("cut read without retries: %v", err)
			}
			continue
		}
		if err != nil || n != len(data) || !bytes.Equal(dst, data) || tl.count() != 2 {
			t.Fatalf("cut read with retries: %d %v (%d connections)", n, err, tl.count())
		}
	}
}
