package tier

import (
	"context"
	"fmt"
	"time"

	"github.com/mooncake-go/mooncake/internal/base"
)

// Test-only exports: compiled into this package for its tests (package tier_test in this
// directory), never into the production binary.

// CommitTrusted is Commit without the checksum pass: it records checksum as the object's
// checksum without reading the bytes, for benchmarks that measure the engine without the
// hash. (Production puts hash as the bytes land: Writer.Landed.) A wrong checksum here is
// served to readers and caught only by the lower tier's own checks. checksum must not be 0.
func (w *Writer) CommitTrusted(checksum uint64) error {
	if w.done {
		return fmt.Errorf("%w: tier: Writer already committed or aborted", base.ErrInvalidParams)
	}
	if checksum == 0 {
		w.Abort()
		return fmt.Errorf("%w: tier: CommitTrusted needs the checksum", base.ErrInvalidParams)
	}
	return w.commit(checksum)
}

// WaitForSuperseded is waitForSuperseded, the decision of a Put that found nothing to evict.
var WaitForSuperseded = waitForSuperseded

// Pin replaces key's pins: softTTL > 0 soft-pins it until now+softTTL, hard pins it until
// Unpin. Pins matter for DRAM eviction only.
func (e *Engine) Pin(key string, softTTL time.Duration, hard bool) error {
	if softTTL < 0 {
		return fmt.Errorf("%w: tier: negative soft pin TTL %v", base.ErrInvalidParams, softTTL)
	}
	var until time.Time
	if softTTL > 0 {
		until = e.opts.Now().Add(softTTL)
	}
	return e.setPins(key, until, hard)
}

// Unpin lifts both pins of key.
func (e *Engine) Unpin(key string) error { return e.setPins(key, time.Time{}, false) }

// WaitSpills waits until no spill is queued or being written. The background evictor may
// still be about to enqueue more (a Put past the high watermark kicked it): Settle waits for
// that too.
func (e *Engine) WaitSpills(ctx context.Context) error { return e.spillQ.waitIdle(ctx) }

// Settle waits until the engine has no eviction left to do: the evictor's pass in flight, if
// any, has enqueued its spills, DRAM is at most at the low watermark (a pass of its own), and
// no spill is queued or being written. Tests that check where objects ended up after Puts
// call it instead of WaitSpills.
func (e *Engine) Settle(ctx context.Context) error {
	if err := e.evictToLow(); err != nil {
		return err
	}
	return e.WaitSpills(ctx)
}
