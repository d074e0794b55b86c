package client

import (
	"context"
	"fmt"

	"github.com/mooncake-go/mooncake/internal/base"
	"github.com/mooncake-go/mooncake/transfer"
)

// DrainWorker starts draining a worker (the DrainWorker call, served by the leader): it gets
// no new puts, and its objects are copied to the other workers in the background; progress
// shows in Status (WorkerStatus.Draining and Objects, Status.Repair). Once its Objects reach
// 0 it can be stopped with nothing lost. With cancel the drain stops and the worker takes
// puts again. Both are safe to repeat. An unknown worker fails with an error wrapping
// base.ErrSegmentNotFound.
func (c *Client) DrainWorker(ctx context.Context, id base.WorkerID, cancel bool) error {
	if err := base.ValidateWorkerID(id); err != nil {
		return err
	}
	ctx, done := c.withTimeout(ctx)
	defer done()
	req := &transfer.DrainWorkerRequest{WorkerID: id, Cancel: cancel}
	if err := c.masterCall(ctx, req, transfer.NewEmpty(transfer.OpDrainWorker), nil); err != nil {
		what := "drain"
		if cancel {
			what = "cancel the drain of"
		}
		return fmt.Errorf("%s worker %s: %w", what, id, err)
	}
	return nil
}

// RetireWorker forgets a dead worker for good (the RetireWorker call): the replicas the
// metadata kept for its return are dropped, and objects that only it held are removed. Use it
// for a worker that will not come back; a worker that returns later registers as new and its
// old copies are dropped. A worker that is not dead fails with base.ErrInvalidParams, an
// unknown one with base.ErrSegmentNotFound.
func (c *Client) RetireWorker(ctx context.Context, id base.WorkerID) error {
	if err := base.ValidateWorkerID(id); err != nil {
		return err
	}
	ctx, done := c.withTimeout(ctx)
	defer done()
	req := &transfer.RetireWorkerRequest{WorkerID: id}
	if err := c.masterCall(ctx, req, transfer.NewEmpty(transfer.OpRetireWorker), nil); err != nil {
		return fmt.Errorf("retire worker %s: %w", id, err)
	}
	return nil
}
