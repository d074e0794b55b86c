package transfer

import (
	"context"
	"testing"
	"time"

	"github.com/mooncake-go/mooncake/internal/base"

	"github.com/mooncake-go/mooncake/transfer/internal/wire"
)

// callNowHandler names Ping in CallsNow when now is set. Its Ping says it started and blocks
// until release is closed; every other call is memHandler's.
type callNowHandler struct {
	*memHandler
	now     bool
	started chan struct{}
	release chan struct{}
}

func (h *callNowHandler) CallsNow(op Op) bool { return h.now && op == wire.OpPing }

func (h *callNowHandler) HandleCall(ctx context.Context, req Message) (Message, error) {
	if req.Op() == wire.OpPing {
		h.started <- struct{}{}
		<-h.release
		return nil, nil
	}
	return h.memHandler.HandleCall(ctx, req)
}

// TestCallsNow: a call the handler names in CallsNow is served on the connection's read
// loop, so a request sent behind it on the same connection is read only after its answer went
// out; without CallsNow the same call runs on a goroutine and the request behind it is
// answered while it blocks.
func TestCallsNow(t *testing.T) {
	for _, now := range []bool{false, true} {
		h := &callNowHandler{memHandler: newMemHandler(), now: now, started: make(chan struct{}, 1), release: make(chan struct{})}
		s := startServer(t, h, ServerOptions{})
		c := rawConn(t, s.Addr().String(), base.DefaultClusterID)
		// A safety net, not a timing: a wrong order fails here instead of at the test timeout.
		if err := c.SetReadDeadline(time.Now().Add(time.Minute)); err != nil {
			t.Fatal(err)
		}
		req := append(frame(1, NewEmpty(wire.OpPing), nil), frame(2, &LookupRequest{Key: "missing"}, nil)...)
		if _, err := c.Write(req); err != nil {
			t.Fatal(err)
		}
		<-h.started
		if now {
			close(h.release) // the Lookup is read only once the Ping's answer is written
		}
		var order []uint64
		for range 2 {
			rh, _, _ := readResponse(t, c)
			order = append(order, rh.RequestID)
			if !now && rh.RequestID == 2 {
				close(h.release) // the Lookup was answered while the Ping blocked
			}
		}
		want := []uint64{2, 1}
		if now {
			want = []uint64{1, 2}
		}
		if order[0] != want[0] || order[1] != want[1] {
			t.Errorf("CallsNow %v: responses in order %v, want %v", now, order, want)
		}
	}
}
