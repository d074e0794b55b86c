package client

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/mooncake-go/mooncake/internal/base"
	"github.com/mooncake-go/mooncake/transfer"
)

// Re-placing puts (issue 18): one worker that is gone never fails a put. When a write to a
// placed worker fails in a way another worker would not repeat, the put is revoked and placed
// again with that worker excluded (PutStartRequest.Exclude), within the put's own deadline;
// it fails only when the leader has no worker with room left (base.ErrNoSpace naming the
// excluded ones), or the deadline passes. Put, PutFrom, upserts and BatchPut share these
// rules; see docs/protocol.md, "Re-placing a put".

// replicaError is a write to one placed replica that failed: it names the worker, so the
// put can be placed again without it.
type replicaError struct {
	worker base.WorkerID
	addr   string
	err    error
}

func (e *replicaError) Error() string {
	return fmt.Sprintf("worker %s (%s): %v", e.worker, e.addr, e.err)
}

func (e *replicaError) Unwrap() error { return e.err }

// replaceable returns the workers a put whose write failed with err must be placed again
// without; nil when placing it again cannot help:
//   - the put's own context is done (its deadline, or the caller's cancel);
//   - the failure is the value's or the call's (CORRUPTION: the checksum of the caller's
//     bytes; INVALID_PARAMS, TOO_LARGE, INVALID_KEY), or the worker cannot take this kind of
//     put (NOT_SUPPORTED: durable without an NVMe tier) or is in another cluster;
//   - it is not a write to a worker (an error without a replicaError).
//
// A failure without the worker's answer (refused, reset, closed, a dial or attempt timeout)
// and the worker's answers UNAVAILABLE (shutting down), TIMEOUT, NO_SPACE (the leader's view
// of its room was stale), OBJECT_NOT_FOUND and INVALID_VERSION (the version was dropped:
// revoked, superseded or expired), SEGMENT_NOT_FOUND and CLOSED call for another worker.
func replaceable(ctx context.Context, err error) []base.WorkerID {
	if ctx.Err() != nil {
		return nil
	}
	var re *replicaError
	if !errors.As(err, &re) {
		return nil
	}
	switch {
	case errors.Is(err, base.ErrCorruption), errors.Is(err, base.ErrInvalidParams), errors.Is(err, base.ErrTooLarge),
		errors.Is(err, base.ErrInvalidKey), errors.Is(err, base.ErrNotSupported), errors.Is(err, base.ErrClusterMismatch),
		errors.Is(err, base.ErrProtocolVersion):
		return nil
	case !isServerError(err):
		return []base.WorkerID{re.worker} // no answer: refused, reset, EOF, timed out
	case errors.Is(err, base.ErrUnavailable), errors.Is(err, base.ErrTimeout), errors.Is(err, base.ErrNoSpace),
		errors.Is(err, base.ErrObjectNotFound), errors.Is(err, base.ErrInvalidVersion),
		errors.Is(err, base.ErrSegmentNotFound), errors.Is(err, base.ErrClosed):
		return []base.WorkerID{re.worker}
	}
	return nil
}

// maxRecommits bounds how often one put is placed again because its commit was refused
// (recommit): each such round writes the whole value again.
const maxRecommits = 3

// recommit reports whether a put whose PutEnd the leader refused with err should be placed
// and written again: a worker it wrote to left between the write and the commit (unmounted,
// marked dead: SEGMENT_NOT_FOUND). The leader places no put on such a worker, so the next
// placement avoids it without an exclusion.
func recommit(ctx context.Context, err error) bool {
	return ctx.Err() == nil && errors.Is(err, base.ErrSegmentNotFound)
}

// exclusion accumulates, over the attempts of one put, the workers it failed on and the last
// failure (for the error when no worker is left).
type exclusion struct {
	workers []base.WorkerID
	cause   error
}

// add records a failed attempt and reports whether the put should be placed again: err
// names a worker worth excluding (replaceable) and the list stays within what PutStart
// carries.
func (x *exclusion) add(ctx context.Context, err error) bool {
	ws := replaceable(ctx, err)
	if len(ws) == 0 {
		return false
	}
	for _, w := range ws {
		if !slices.Contains(x.workers, w) {
			x.workers = append(x.workers, w)
		}
	}
	x.cause = err
	return len(x.workers) <= transfer.MaxExclude
}

// wrap adds the last write failure to err, the error of a later attempt (typically the
// leader's "no worker with room left after excluding ...").
func (x *exclusion) wrap(err error) error {
	if x.cause == nil {
		return err
	}
	return fmt.Errorf("%w (placed again after: %v)", err, x.cause)
}

// writeAttempt bounds one attempt's writes to half the time the put has left, so a worker
// that hangs (accepts the connection, never answers) leaves time to place the put elsewhere.
// Without a deadline the attempt has none either.
func writeAttempt(ctx context.Context) (context.Context, context.CancelFunc) {
	d, ok := ctx.Deadline()
	if !ok {
		return context.WithCancel(ctx)
	}
	return context.WithTimeout(ctx, time.Until(d)/2)
}
