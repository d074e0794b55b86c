package transfer

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"net"
	"sync"
	"testing"

	"github.com/mooncake-go/mooncake/internal/base"
)

// TestStripeSumAnyOrder: chunks reported piece by piece from one goroutine per chunk, in
// random piece sizes and interleavings, hash to the checksum of the whole buffer; so does a
// sum whose in-order hashing was given up half way (restart) and one reported twice over.
func TestStripeSumAnyOrder(t *testing.T) {
	f := func(size, chunk int64, seed uint64, restartAt int) {
		t.Helper()
		buf := pattern(int(size), byte(seed))
		want := base.Checksum(buf)
		s := newStripeSum(buf, chunk)
		nchunks := int((size + chunk - 1) / chunk)
		var wg sync.WaitGroup
		for i := range nchunks {
			wg.Add(1)
			go func() {
				defer wg.Done()
				rng := rand.New(rand.NewPCG(seed, uint64(i)))
				n := s.chunkLen(i)
				doRestart := i == restartAt
				for end := int64(0); end < n; {
					end = min(n, end+1+rng.Int64N(n/3+1))
					if doRestart && end > n/2 {
						s.restart()
						doRestart = false
					}
					s.landed(i, end)
				}
				s.landed(i, n/2) // a late report of less than landed changes nothing
			}()
		}
		wg.Wait()
		if got := s.sum(); got != want {
			t.Fatalf("size %d chunk %d seed %d restart %d: sum %#x, want %#x", size, chunk, seed, restartAt, got, want)
		}
	}
	for seed := range uint64(20) {
		f(1, 1, seed, -1)
		f(1000, 1000, seed, -1)
		f(10_000, 999, seed, -1)
		f(3<<20+17, 1<<20, seed, -1)
		f(10_000, 999, seed, 3)
		f(3<<20+17, 1<<20, seed, 0)
	}
}

// TestReadSumStriped: striped verified reads over connections that deliver a few bytes per
// read (so every chunk lands in many pieces, interleaved with the others) return the bytes
// and their checksum, for objects of one chunk, whole chunks and a short last chunk.
func TestReadSumStriped(t *testing.T) {
	for _, max := range []int{7, 4096} {
		t.Run(fmt.Sprint(max), func(t *testing.T) {
			h := newMemHandler()
			_, tl := startServerOn(t, h, ServerOptions{}, func(c net.Conn) net.Conn { return chopConn{Conn: c, max: max} })
			addr := tl.Addr().String()
			c := newClient(t, ClientOptions{Transport: chopTransport{max: max}, StripeThreshold: 2048, StripeChunk: 1000, ConnsPerPeer: 3})
			ctx := context.Background()
			for _, size := range []int{2049, 3000, 5999, 100_000} {
				key := fmt.Sprintf("k%d", size)
				data := pattern(size, 5)
				if err := c.Write(ctx, addr, WriteRequest{Key: key, Version: 1}, data); err != nil {
					t.Fatalf("write %d: %v", size, err)
				}
				dst := make([]byte, size)
				_, n, sum, err := c.ReadSum(ctx, addr, ReadRequest{Key: key, Version: 1}, dst)
				if err != nil || n != size || !bytes.Equal(dst, data) || sum != base.Checksum(data) {
					t.Fatalf("striped read sum %d: n=%d sum %#x want %#x %v", size, n, sum, base.Checksum(data), err)
				}
			}
		})
	}
}

// TestReadSumStripedRetried: a striped verified read whose chunk is cut mid-payload (part of
// it landed and was hashed) is read again on a new connection and still returns the right
// checksum; without retries it fails.
func TestReadSumStripedRetried(t *testing.T) {
	for _, retries := range []int{-1, 2} {
		h := newMemHandler()
		var mu sync.Mutex
		left, armed := int64(0), false
		_, tl := startServerOn(t, h, ServerOptions{}, func(c net.Conn) net.Conn {
			return cutConn{Conn: c, mu: &mu, left: &left, armed: &armed}
		})
		addr := tl.Addr().String()
		c := newClient(t, ClientOptions{Retries: retries, ConnsPerPeer: 1, StripeThreshold: 256 << 10, StripeChunk: 256 << 10})
		ctx := context.Background()
		data := pattern(1<<20, 4)
		if err := c.Write(ctx, addr, WriteRequest{Key: "k", Version: 1}, data); err != nil {
			t.Fatal(err)
		}
		mu.Lock()
		left, armed = 300<<10, true // inside the second chunk's payload
		mu.Unlock()
		dst := make([]byte, len(data))
		_, n, sum, err := c.ReadSum(ctx, addr, ReadRequest{Key: "k", Version: 1}, dst)
		if retries < 0 {
			if err == nil {
				t.Fatal("cut striped read without retries succeeded")
			}
			continue
		}
		if err != nil || n != len(data) || !bytes.Equal(dst, data) || sum != base.Checksum(data) || tl.count() != 2 {
			t.Fatalf("cut striped read with retries: %d sum %#x want %#x %v (%d connections)", n, sum, base.Checksum(data), err, tl.count())
		}
	}
}
