package transfer

import (
	"context"
	"fmt"

	"github.com/mooncake-go/mooncake/internal/base"
	"github.com/mooncake-go/mooncake/transfer/internal/wire"
)

// Put sessions (docs/protocol.md, "Put sessions"): ranges of a reserved object written as a
// layer-wise engine produces them, committed by SessionCommit.
type (
	SessionCommitRequest  = wire.SessionCommitRequest
	SessionCommitResponse = wire.SessionCommitResponse
)

// OpSessionCommit is the opcode of SessionCommit.
const OpSessionCommit = wire.OpSessionCommit

// WriteRange sends src as the bytes [off, off+len(src)) of the object req describes
// (req.TotalSize bytes, placed by PutStart) to the worker at addr, without committing: the
// worker keeps the object pending until a SessionCommit (or Commit) once every byte landed,
// and drops it after its pending-write timeout otherwise. A range over StripeThreshold is cut
// into StripeChunk chunks written in parallel over the peer's connections. src is only read,
// and not retained after WriteRange returns.
//
// Not retried: on an error some chunks may have landed; writing the range again is safe (a
// range written twice holds the bytes of the last write).
func (c *Client) WriteRange(ctx context.Context, addr string, req WriteRequest, off int64, src []byte) error {
	n := int64(len(src))
	if off < 0 || n == 0 || req.TotalSize <= 0 || off > req.TotalSize || n > req.TotalSize-off {
		return fmt.Errorf("%w: transfer: range [%d, +%d) outside an object of %d bytes", base.ErrInvalidParams, off, n, req.TotalSize)
	}
	req.Commit = false
	if n <= c.opts.StripeThreshold {
		req.Offset = off
		return c.do(ctx, addr, &call{op: wire.OpWrite, req: &req, payload: src})
	}
	return c.stripe(ctx, addr, n, func(ctx context.Context, o, k int64) error {
		chunk := req
		chunk.Offset = off + o
		return c.do(ctx, addr, &call{op: wire.OpWrite, req: &chunk, payload: src[o : o+k]})
	})
}
