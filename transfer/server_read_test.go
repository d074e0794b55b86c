package transfer

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/mooncake-go/mooncake/internal/base"
)

// nowHandler serves reads of keys starting with "now" through HandleReadNow (on the read
// loop) and declines the others, which go to HandleRead. It counts both and the releases.
type nowHandler struct {
	*memHandler
	now, later, released atomic.Int64
}

func (h *nowHandler) HandleRead(ctx context.Context, req *ReadRequest) (ReadSource, error) {
	h.later.Add(1)
	return h.counted(h.memHandler.HandleRead(ctx, req))
}

func (h *nowHandler) HandleReadNow(ctx context.Context, req *ReadRequest) (ReadSource, bool, error) {
	if !strings.HasPrefix(req.Key, "now") {
		return ReadSource{}, false, nil
	}
	h.now.Add(1)
	src, err := h.counted(h.memHandler.HandleRead(ctx, req))
	return src, true, err
}

func (h *nowHandler) counted(src ReadSource, err error) (ReadSource, error) {
	if err == nil {
		release := src.Release
		src.Release = func() {
			if release != nil {
				release()
			}
			h.released.Add(1)
		}
	}
	return src, err
}

// TestReadNow: reads a ReadNowHandler serves at once (small, above maxInlineSend, ranges,
// errors) and reads it declines are answered correctly, pipelined on shared connections,
// each through the path the handler chose, and every payload sent is released.
func TestReadNow(t *testing.T) {
	h := &nowHandler{memHandler: newMemHandler()}
	s := startServer(t, h, ServerOptions{})
	addr := s.Addr().String()
	c := newClient(t, ClientOptions{ConnsPerPeer: 2, StripeThreshold: 64 << 20})
	ctx := context.Background()
	sizes := []int{1, 4096, maxInlineSend, maxInlineSend + 1, 3 << 20}
	for _, prefix := range []string{"now", "later"} {
		for _, size := range sizes {
			key := fmt.Sprintf("%s%d", prefix, size)
			if err := c.Write(ctx, addr, WriteRequest{Key: key, Version: 1}, pattern(size, byte(size))); err != nil {
				t.Fatal(err)
			}
		}
	}
	var wg sync.WaitGroup
	errs := make(chan error, 100)
	for range 4 {
		for _, prefix := range []string{"now", "later"} {
			for _, size := range sizes {
				wg.Add(1)
				go func() {
					defer wg.Done()
					key := fmt.Sprintf("%s%d", prefix, size)
					dst := make([]byte, size)
					_, n, sum, err := c.ReadSum(ctx, addr, ReadRequest{Key: key, Version: 1}, dst)
					if err != nil || n != size || !bytes.Equal(dst, pattern(size, byte(size))) || sum != base.Checksum(dst) {
						errs <- fmt.Errorf("read %s: n=%d %v", key, n, err)
					}
					part := make([]byte, 1)
					if _, n, err := c.Read(ctx, addr, ReadRequest{Key: key, Version: 1, Offset: int64(size - 1), Length: 1}, part); err != nil || n != 1 || part[0] != pattern(size, byte(size))[size-1] {
						errs <- fmt.Errorf("read range of %s: n=%d %v", key, n, err)
					}
				}()
			}
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if _, _, err := c.Read(ctx, addr, ReadRequest{Key: "nowhere", Version: 1}, make([]byte, 1)); !errors.Is(err, base.ErrObjectNotFound) {
		t.Fatalf("a read HandleReadNow fails: %v", err)
	}
	reads := int64(4 * len(sizes) * 2)
	if now, later := h.now.Load(), h.later.Load(); now != reads+1 || later != reads {
		t.Fatalf("%d reads served now and %d later, want %d and %d", now, later, reads+1, reads)
	}
	s.Close()
	if r := h.released.Load(); r != 2*reads {
		t.Fatalf("%d releases for %d reads sent", r, 2*reads)
	}
}
