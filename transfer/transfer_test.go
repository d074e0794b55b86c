package transfer

import (
	"bytes"
	"context"
	"errors"
	"sync"
	"testing"

	"github.com/mooncake-go/mooncake/internal/base"
)

func TestRoundTrip(t *testing.T) {
	h := newMemHandler()
	s := startServer(t, h, ServerOptions{})
	addr := s.Addr().String()
	ctx := context.Background()
	for _, checksums := range []bool{false, true} {
		c := newClient(t, ClientOptions{Checksums: checksums, StripeThreshold: 1 << 20, StripeChunk: 256 << 10})
		if err := c.Ping(ctx, addr); err != nil {
			t.Fatal(err)
		}
		var lr LookupResponse
		err := c.Call(ctx, addr, &LookupRequest{Key: "nope"}, &lr)
		var ce *base.CodeError
		if !errors.Is(err, base.ErrObjectNotFound) || !errors.As(err, &ce) || ce.Code != base.CodeObjectNotFound {
			t.Fatalf("lookup of a missing key: %v", err)
		}
		for _, size := range []int{0, 1, 100, 1 << 20, 1<<20 + 1, 3<<20 + 12345} {
			key := "k" + string(rune('a'+size%26))
			data := pattern(size, byte(size))
			v := base.Version(size + 1)
			if err := c.Write(ctx, addr, WriteRequest{Key: key, Version: v, Checksum: base.Checksum(data)}, data); err != nil {
				t.Fatalf("write %d: %v", size, err)
			}
			if o := h.object(key); o == nil || !bytes.Equal(o.data, data) || o.version != v {
				t.Fatalf("size %d: server holds a wrong object", size)
			}
			if err := c.Call(ctx, addr, &LookupRequest{Key: key}, &lr); err != nil || lr.Size != int64(size) || lr.Version != v {
				t.Fatalf("lookup: %+v %v", lr, err)
			}
			dst := make([]byte, size)
			rr, n, err := c.Read(ctx, addr, ReadRequest{Key: key, Version: v}, dst)
			if err != nil || n != size || rr.Size != int64(size) || rr.Version != v || !bytes.Equal(dst, data) {
				t.Fatalf("read %d: n=%d %+v %v", size, n, rr, err)
			}
			// ReadSum: the same bytes and their checksum, hashed as they arrive (unstriped)
			// or after the striped chunks landed.
			clear(dst)
			rr, n, sum, err := c.ReadSum(ctx, addr, ReadRequest{Key: key, Version: v}, dst)
			if err != nil || n != size || rr.Size != int64(size) || !bytes.Equal(dst, data) || sum != base.Checksum(data) {
				t.Fatalf("read sum %d: n=%d sum %#x want %#x %v", size, n, sum, base.Checksum(data), err)
			}
			if size > 10 {
				part := make([]byte, 7)
				_, n, sum, err := c.ReadSum(ctx, addr, ReadRequest{Key: key, Offset: 3, Length: 7}, part)
				if err != nil || n != 7 || !bytes.Equal(part, data[3:10]) || sum != base.Checksum(data[3:10]) {
					t.Fatalf("read sum range: %d %v", n, err)
				}
			}
			if size > 10 {
				part := make([]byte, 7)
				_, n, err := c.Read(ctx, addr, ReadRequest{Key: key, Offset: 3, Length: 7}, part)
				if err != nil || n != 7 || !bytes.Equal(part, data[3:10]) {
					t.Fatalf("read range: %d %v", n, err)
				}
			}
		}
	}
}

func TestNotLeaderCarriesLeader(t *testing.T) {
	h := newMemHandler()
	h.onCall = func(context.Context, Message) (Message, error) {
		return nil, &NotLeaderError{LeaderID: "m2", LeaderAddr: "10.0.0.2:50051"}
	}
	s := startServer(t, h, ServerOptions{})
	c := newClient(t, ClientOptions{})
	err := c.Call(context.Background(), s.Addr().String(),
		&PutStartRequest{Object: base.Object{ObjectMeta: base.ObjectMeta{Key: "k", Size: 1}}},
		&PutStartResponse{})
	var nl *NotLeaderError
	if !errors.Is(err, base.ErrNotLeader) || !errors.As(err, &nl) || nl.LeaderID != "m2" || nl.LeaderAddr != "10.0.0.2:50051" {
		t.Fatalf("got %v", err)
	}
	// The leader is named once, not once by the server's text and again by the client's.
	if got, want := err.Error(), "mooncake: not leader (leader m2 at 10.0.0.2:50051)"; got != want {
		t.Fatalf("message %q, want %q", got, want)
	}
	h.onCall = func(context.Context, Message) (Message, error) {
		return nil, &NotLeaderError{Msg: "mooncake: not leader"}
	}
	err = c.Call(context.Background(), s.Addr().String(),
		&PutStartRequest{Object: base.Object{ObjectMeta: base.ObjectMeta{Key: "k", Size: 1}}},
		&PutStartResponse{})
	if got, want := err.Error(), "mooncake: not leader (leader unknown)"; got != want {
		t.Fatalf("message %q, want %q", got, want)
	}
}

func TestHandshakeRefused(t *testing.T) {
	s := startServer(t, newMemHandler(), ServerOptions{ClusterID: "prod"})
	c := newClient(t, ClientOptions{ClusterID: "staging"})
	err := c.Ping(context.Background(), s.Addr().String())
	if !errors.Is(err, base.ErrClusterMismatch) {
		t.Fatalf("wrong cluster: %v", err)
	}
}

func TestNewTransport(t *testing.T) {
	if tr, err := NewTransport("tcp"); err != nil || tr.Name() != "tcp" {
		t.Fatal(tr, err)
	}
	for _, p := range []string{"rdma", "nvmeof", "shm", "carrier-pigeon"} {
		if _, err := NewTransport(p); !errors.Is(err, base.ErrNotSupported) {
			t.Fatalf("%s: %v", p, err)
		}
	}
}

// TestStripeChunkBound: a striped object is cut into at most 2*ConnsPerPeer chunks, however
// small StripeChunk is, and is reassembled in place.
func TestStripeChunkBound(t *testing.T) {
	h := newMemHandler()
	var mu sync.Mutex
	offsets := map[int64]bool{}
	h.onWrite = func(req *WriteRequest) {
		mu.Lock()
		offsets[req.Offset] = true
		mu.Unlock()
	}
	s := startServer(t, h, ServerOptions{})
	c := newClient(t, ClientOptions{ConnsPerPeer: 3, StripeThreshold: 64 << 10, StripeChunk: 64 << 10})
	data := pattern(10<<20+17, 4)
	ctx := context.Background()
	if err := c.Write(ctx, s.Addr().String(), WriteRequest{Key: "big", Version: 2, Checksum: base.Checksum(data)}, data); err != nil {
		t.Fatal(err)
	}
	if len(offsets) != 6 {
		t.Fatalf("%d chunks, want 6", len(offsets))
	}
	dst := make([]byte, len(data))
	if _, n, err := c.Read(ctx, s.Addr().String(), ReadRequest{Key: "big", Version: 2}, dst); err != nil || n != len(data) || !bytes.Equal(dst, data) {
		t.Fatalf("striped read: %d %v", n, err)
	}
}
