package transfer

import (
	"github.com/mooncake-go/mooncake/transfer/internal/wire"
)

// maxInlineSend bounds the payload a read loop sends itself (readNow): a larger one goes out
// from a goroutine, so the loop goes on reading the connection's next requests meanwhile. At
// loopback speed 256 KiB take some tens of microseconds to send.
const maxInlineSend = 256 << 10

// readNow serves a Read or ReadRange request on the read loop when the Handler can serve it
// without blocking (ReadNowHandler): it decodes the request, asks HandleReadNow, and sends
// an error or a payload of up to maxInlineSend from here; a larger payload is sent from a
// goroutine. It reports false, having done nothing, for any other request or Handler, and
// when HandleReadNow says the read may block: the caller then handles the request on a
// goroutine as usual. On true it has taken over body/pb and the request's sem slot,
// handlers count and body bytes (as handle does).
func (sc *serverConn) readNow(h *wire.Header, body []byte, pb *[]byte) bool {
	rn, ok := sc.s.h.(ReadNowHandler)
	if !ok || (h.Op != wire.OpRead && h.Op != wire.OpReadRange) {
		return false
	}
	req, err := wire.DecodeRequest(h.Op, body)
	if err != nil {
		return false // handle answers the decoding error
	}
	rr, ok := req.(*ReadRequest)
	if !ok {
		return false
	}
	src, now, err := rn.HandleReadNow(sc.ctx, rr)
	if !now {
		return false // handle decodes again: a small body, only for reads that may block
	}
	if pb != nil {
		putBuf(pb)
	}
	finish := func() {
		sc.bodies.release(int64(h.BodyLen))
		<-sc.sem
		sc.handlers.Done()
	}
	if err == nil && len(src.Data) > maxInlineSend {
		hh := *h
		go func() {
			defer finish()
			sc.sendRead(&hh, rr.Verifies, src, nil)
		}()
		return true
	}
	sc.sendRead(h, rr.Verifies, src, err)
	finish()
	return true
}
