package client

import (
	"context"

	"github.com/mooncake-go/mooncake/transfer"
)

// transferRPC adapts *transfer.Client to rpc.
type transferRPC struct{ c *transfer.Client }

func newTransferRPC(cfg Config) (rpc, error) {
	tr, err := transfer.NewTransport(cfg.Protocol)
	if err != nil {
		return nil, err
	}
	c, err := transfer.NewClient(transfer.ClientOptions{
		ClusterID:       cfg.ClusterID,
		Transport:       tr,
		StripeThreshold: cfg.StripeSize,
		StripeChunk:     cfg.StripeSize,
		DialTimeout:     cfg.DialTimeout,
		ConnsPerPeer:    cfg.ConnsPerPeer,
		Logger:          cfg.Logger,
	})
	if err != nil {
		return nil, err
	}
	return transferRPC{c}, nil
}

func (r transferRPC) Call(ctx context.Context, addr string, req, resp transfer.Message) error {
	return r.c.Call(ctx, addr, req, resp)
}

func (r transferRPC) Write(ctx context.Context, addr string, req *transfer.WriteRequest, p []byte) error {
	return r.c.Write(ctx, addr, *req, p)
}

func (r transferRPC) Read(ctx context.Context, addr string, req *transfer.ReadRequest, dst []byte, sum bool) (*transfer.ReadResponse, int, uint64, error) {
	if !sum {
		resp, n, err := r.c.Read(ctx, addr, *req, dst)
		return &resp, n, 0, err
	}
	resp, n, digest, err := r.c.ReadSum(ctx, addr, *req, dst)
	return &resp, n, digest, err
}

func (r transferRPC) Close() error { return r.c.Close() }
