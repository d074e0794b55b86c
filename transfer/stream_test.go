package transfer

import (
	"bytes"
	"context"
	"errors"
	"net"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/mooncake-go/mooncake/internal/base"
)

// fileHandler serves reads from a file (as a worker serves an NVMe extent), with the length
// it claims possibly larger than the file (to test a short source).
type fileHandler struct {
	UnimplementedHandler
	path     string
	claim    int64 // bytes promised per read
	released atomic.Int32
}

func (h *fileHandler) HandleRead(_ context.Context, req *ReadRequest) (ReadSource, error) {
	f, err := os.Open(h.path)
	if err != nil {
		return ReadSource{}, err
	}
	if _, err := f.Seek(req.Offset, 0); err != nil {
		f.Close()
		return ReadSource{}, err
	}
	return ReadSource{
		Resp:    ReadResponse{Version: 1, Size: h.claim},
		Reader:  f,
		Length:  h.claim - req.Offset,
		Release: func() { h.released.Add(1); f.Close() },
	}, nil
}

// TestReadFromFile: a ReadSource with a Reader (an *os.File: sendfile) streams the bytes; a
// source shorter than it promised breaks the connection with a clean error; Release runs.
func TestReadFromFile(t *testing.T) {
	data := pattern(3<<20+5, 8)
	path := filepath.Join(t.TempDir(), "extent")
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	h := &fileHandler{path: path, claim: int64(len(data))}
	s := startServer(t, h, ServerOptions{})
	c := newClient(t, ClientOptions{Retries: -1})
	ctx := context.Background()
	dst := make([]byte, len(data))
	if _, n, err := c.Read(ctx, s.Addr().String(), ReadRequest{Key: "k"}, dst); err != nil || n != len(data) || !bytes.Equal(dst, data) {
		t.Fatalf("read from file: %d %v", n, err)
	}
	part := make([]byte, len(data)-100)
	if _, n, err := c.Read(ctx, s.Addr().String(), ReadRequest{Key: "k", Offset: 100}, part); err != nil || n != len(part) || !bytes.Equal(part, data[100:]) {
		t.Fatalf("range from file: %d %v", n, err)
	}
	h.claim = int64(len(data)) + 10 // the file is shorter than promised
	big := make([]byte, h.claim)
	if _, _, err := c.Read(ctx, s.Addr().String(), ReadRequest{Key: "k"}, big); !errors.Is(err, base.ErrUnavailable) {
		t.Fatalf("short source: %v", err)
	}
	if _, _, _, err := c.ReadSum(ctx, s.Addr().String(), ReadRequest{Key: "k"}, big); !errors.Is(err, base.ErrUnavailable) {
		t.Fatalf("short source, hashed read: %v", err)
	}
	s.Close()
	if h.released.Load() != 4 {
		t.Fatalf("%d releases, want 4", h.released.Load())
	}
}

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
