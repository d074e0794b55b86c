package worker

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/mooncake-go/mooncake/internal/base"
	"github.com/mooncake-go/mooncake/tier"
	"github.com/mooncake-go/mooncake/transfer"
)

// shmLeases holds the pins that ShmPin hands to clients on this host: each lease owns one
// tier.Reader, so the arena range it names cannot be freed or reused while a client copies
// from it. A lease ends exactly once, by the first of: ShmRelease, the end of the connection
// that made it (the client died or gave up), its TTL (the sweeper), or Shutdown.
//
// Lease ids are random 64-bit numbers, so a client cannot end another client's lease by
// guessing (which would only let the range be reused under that client's copy; the copy is
// still caught by its checksum and its ShmRelease answer, see client/shm.go).
type shmLeases struct {
	connTable[*shmLease]
}

type shmLease struct {
	r       *tier.Reader
	expires time.Time
}

func (l *shmLease) end() { l.r.Release() }

// shmOpen describes the shared arena to a client (ShmOpen).
func (w *Worker) shmOpen() (*transfer.ShmOpenResponse, error) {
	info, ok := w.share, w.shared
	if !ok {
		return nil, fmt.Errorf("%w: worker %s keeps its arena private (shared memory is off)", base.ErrNotSupported, w.id)
	}
	if transfer.BootID() == "" {
		return nil, fmt.Errorf("%w: worker %s cannot read its kernel boot id", base.ErrNotSupported, w.id)
	}
	resp := &transfer.ShmOpenResponse{
		BootID: transfer.BootID(), PID: int64(os.Getpid()), FD: int64(info.FD), Inode: info.Inode, Dev: info.Dev,
		Size: info.Size, ArenaID: info.ID, LeaseTTL: w.cfg.ShmLeaseTTL,
	}
	if w.gens != nil {
		w.gens.Describe(resp)
	}
	return resp, nil
}

// shmPin pins the object req names and leases its arena range to the caller until ShmRelease
// or the end of ctx (the connection).
func (w *Worker) shmPin(ctx context.Context, req *transfer.ShmPinRequest) (*transfer.ShmPinResponse, error) {
	info, ok := w.share, w.shared
	if !ok {
		return nil, fmt.Errorf("%w: worker %s keeps its arena private (shared memory is off)", base.ErrNotSupported, w.id)
	}
	if err := base.ValidateKey(req.Key); err != nil {
		return nil, err
	}
	// Only a DRAM copy can be pinned: an object on NVMe alone is NOT_SUPPORTED here, and the
	// client reads it over TCP, which reads NVMe once (and brings the object back into DRAM
	// when there is room). Reading it here too would read and verify it twice whenever the
	// arena is full, the read landing in a heap buffer no client can map.
	r, inDRAM, err := w.eng.GetDRAM(req.Key, req.Version)
	if err != nil {
		return nil, err
	}
	if !inDRAM {
		return nil, fmt.Errorf("%w: %q is on NVMe only; read it over TCP", base.ErrNotSupported, req.Key)
	}
	meta, size := r.Meta(), int64(len(r.Bytes()))
	base0, inArena := r.ArenaOffset()
	off, n := req.Offset, req.Length
	switch {
	case !inArena:
		r.Release()
		return nil, fmt.Errorf("%w: %q is not in the shared arena (read from NVMe into a heap buffer); read it over TCP", base.ErrNotSupported, req.Key)
	case off < 0 || n < 0 || off > size || (n > 0 && n > size-off):
		r.Release()
		return nil, fmt.Errorf("%w: range [%d, +%d) of %q outside its %d bytes", base.ErrInvalidParams, off, n, req.Key, size)
	}
	if n == 0 {
		n = size - off
	}
	l := &shmLease{r: r, expires: w.now().Add(w.cfg.ShmLeaseTTL)}
	id, err := w.shm.add(l, 0)
	if err != nil {
		r.Release()
		return nil, fmt.Errorf("%w: worker %s is shutting down", base.ErrUnavailable, w.id)
	}
	// After the lease is in the table: if ctx is already done, it ends at once (the client
	// is gone; nobody will read the answer).
	w.shm.endWith(ctx, id)
	return &transfer.ShmPinResponse{
		Lease: id, ArenaID: info.ID, ArenaOffset: base0 + off, Length: n,
		Version: meta.Version, Size: meta.Size, Checksum: meta.Checksum, Tier: r.Tier(),
	}, nil
}

// shmTouch records the reads a client on this host made by copying objects out of the shared
// arena without a pin (ShmTouch): each item's answer is OK, the miss (OBJECT_NOT_FOUND,
// INVALID_VERSION), or NOT_SUPPORTED when the object is no longer in DRAM, so the client
// stops copying from where it was.
func (w *Worker) shmTouch(req *transfer.ShmTouchRequest) (*transfer.BatchResponse, error) {
	if !w.shared {
		return nil, fmt.Errorf("%w: worker %s keeps its arena private (shared memory is off)", base.ErrNotSupported, w.id)
	}
	items := make([]transfer.ItemError, len(req.Items))
	for i, it := range req.Items {
		err := base.ValidateKey(it.Key)
		if err == nil {
			var inDRAM bool
			inDRAM, err = w.eng.Touch(it.Key, it.Version)
			if err == nil && !inDRAM {
				err = fmt.Errorf("%w: %q is no longer in the shared arena", base.ErrNotSupported, it.Key)
			}
		}
		items[i] = transfer.ItemErrorOf(err)
	}
	return transfer.NewBatchResponse(transfer.OpShmTouch, items), nil
}

// release ends the leases of a ShmRelease and counts those that were still held.
func (s *shmLeases) release(ids []uint64) int64 { return s.endAll(ids) }

// expire ends the leases whose TTL passed (the sweeper) and returns how many.
func (s *shmLeases) expire(now time.Time) int {
	return s.endIf(func(l *shmLease) bool { return now.After(l.expires) })
}
