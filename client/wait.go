package client

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/mooncake-go/mooncake/internal/base"
	"github.com/mooncake-go/mooncake/transfer"
)

// batchPutStart is BatchPutStart through masterCall, retried while every item failed as
// unavailable (no worker alive yet: a cluster that is starting), so a batch put waits for a
// first worker within ctx as a single put does (masterCall retries a whole-call unavailable
// error; a batch reports it per item).
func (c *Client) batchPutStart(ctx context.Context, req *transfer.BatchPutStartRequest, resp *transfer.BatchPutStartResponse) error {
	backoff := 20 * time.Millisecond
	for {
		if err := c.masterCall(ctx, req, resp, nil); err != nil {
			return err
		}
		if !allUnavailable(resp.Items) {
			return nil
		}
		t := time.NewTimer(backoff + rand.N(backoff/2+1))
		select {
		case <-ctx.Done():
			t.Stop()
			err := resp.Items[0].Err.Err()
			for i := range resp.Items {
				resp.Items[i].Err = transfer.ItemErrorOf(fmt.Errorf("%w: gave up waiting for a live worker: %v", base.ErrUnavailable, err))
			}
			return nil
		case <-t.C:
		}
		backoff = min(2*backoff, c.cfg.MaxBackoff)
	}
}

// allUnavailable reports whether there are items and every one failed as unavailable.
func allUnavailable(items []transfer.PutStartResult) bool {
	for i := range items {
		if !errors.Is(items[i].Err.Err(), base.ErrUnavailable) {
			return false
		}
	}
	return len(items) > 0
}
