package worker

import (
	"context"
	"fmt"

	"github.com/mooncake-go/mooncake/internal/base"
	"github.com/mooncake-go/mooncake/transfer"
)

// replicate serves Replicate (op 60): the leader asks this worker to copy an object it holds
// to another worker, for repair (a replica lost on a dead worker) or drain. The bytes stay
// pinned (the tier.Reader) while the Write streams them, and the copy carries the checksum
// this worker verified, so the target refuses anything corrupted on the way. The leader
// records the copy in the metadata only after this returns OK.
func (w *Worker) replicate(ctx context.Context, r *transfer.ReplicateRequest) error {
	if err := base.ValidateKey(r.Key); err != nil {
		return err
	}
	if err := base.ValidateWorkerID(r.To); err != nil {
		return err
	}
	if r.To == w.id || r.ToAddr == "" {
		return fmt.Errorf("%w: replicate %q to %s at %q: not another worker", base.ErrInvalidParams, r.Key, r.To, r.ToAddr)
	}
	if w.closing.Load() {
		return fmt.Errorf("%w: worker %s is shutting down", base.ErrUnavailable, w.id)
	}
	rd, err := w.eng.Get(r.Key, r.Version)
	if err != nil {
		return err
	}
	defer rd.Release()
	meta := rd.Meta()
	req := transfer.WriteRequest{Key: r.Key, Version: meta.Version, Persistence: r.Persistence, Checksum: meta.Checksum}
	if err := w.cli.Write(ctx, r.ToAddr, req, rd.Bytes()); err != nil {
		return fmt.Errorf("replicate %q version %d to %s (%s): %w", r.Key, r.Version, r.To, r.ToAddr, err)
	}
	return nil
}
