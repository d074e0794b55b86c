package transfer

import (
	"context"
	"fmt"
	"net"

	"github.com/mooncake-go/mooncake/internal/base"
)

// Transport makes connections. TCP is the only implementation in this build; same-host shared
// memory, RDMA and NVMe-oF will sit behind this interface once they can be tested on hardware.
type Transport interface {
	// Name is the protocol name ("tcp").
	Name() string
	// Listen returns a listener on addr (host:port; port 0 picks one).
	Listen(addr string) (net.Listener, error)
	// Dial connects to addr, honouring ctx's deadline.
	Dial(ctx context.Context, addr string) (net.Conn, error)
}

// NewTransport returns the transport for protocol (Mooncake's `protocol` config key). Only
// "tcp" exists in this build; "rdma", "nvmeof", "shm" and anything else return an error
// wrapping base.ErrNotSupported.
func NewTransport(protocol string) (Transport, error) {
	switch protocol {
	case "tcp", "":
		return tcpTransport{}, nil
	case "rdma", "nvmeof", "shm":
		return nil, fmt.Errorf("transfer: protocol %q: %w (only \"tcp\" is available)", protocol, base.ErrNotSupported)
	}
	return nil, fmt.Errorf("transfer: unknown protocol %q: %w (only \"tcp\" is available)", protocol, base.ErrNotSupported)
}

type tcpTransport struct{}

func (tcpTransport) Name() string { return "tcp" }

func (tcpTransport) Listen(addr string) (net.Listener, error) {
	return net.Listen("tcp", addr)
}

func (tcpTransport) Dial(ctx context.Context, addr string) (net.Conn, error) {
	var d net.Dialer
	return d.DialContext(ctx, "tcp", addr)
}

// tuneConn sets TCP_NODELAY (small control frames must not wait for Nagle) and, when asked,
// the socket buffer sizes.
func tuneConn(c net.Conn, sockBuf int) {
	tc, ok := c.(*net.TCPConn)
	if !ok {
		return
	}
	_ = tc.SetNoDelay(true)
	if sockBuf > 0 {
		_ = tc.SetReadBuffer(sockBuf)
		_ = tc.SetWriteBuffer(sockBuf)
	}
}
