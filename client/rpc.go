package client

import (
	"context"
	"fmt"

	"github.com/mooncake-go/mooncake/internal/base"
	"github.com/mooncake-go/mooncake/transfer"
)

// transferRPC adapts transfer.Client to rpc.
type transferRPC struct{}

func newTransferRPC(cfg Config) (rpc, error) {
	return nil, fmt.Errorf("%w: the transfer client is not there yet", base.ErrNotSupported)
}

func (transferRPC) Call(ctx context.Context, addr string, req, resp transfer.Message) error {
	return base.ErrNotSupported
}
func (transferRPC) Write(ctx context.Context, addr string, req *transfer.WriteRequest, p []byte) error {
	return base.ErrNotSupported
}
func (transferRPC) Read(ctx context.Context, addr string, req *transfer.ReadRequest, dst []byte) (*transfer.ReadResponse, int, error) {
	return nil, 0, base.ErrNotSupported
}
func (transferRPC) Close() error { return nil }
