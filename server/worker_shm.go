package server

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"sync"
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
	mu     sync.Mutex // protects m and closed; a leaf lock (Readers are released outside it)
	m      map[uint64]*shmLease
	closed bool
}

type shmLease struct {
	r       *tier.Reader
	expires time.Time
	// stop cancels the context.AfterFunc that ends the lease with its connection; guarded by
	// shmLeases.mu (set after the lease is in the table).
	stop func() bool
}

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
	r, err := w.eng.Get(req.Key, req.Version)
	if err != nil {
		return nil, err
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
	id, err := w.shm.add(l)
	if err != nil {
		r.Release()
		return nil, fmt.Errorf("%w: worker %s is shutting down", base.ErrUnavailable, w.id)
	}
	// After the lease is in the table: if ctx is already done, AfterFunc runs at once and
	// ends it (the client is gone; nobody will read the answer).
	w.shm.setStop(id, context.AfterFunc(ctx, func() { w.shm.end(id) }))
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

// add puts l in the table under a fresh random id.
func (s *shmLeases) add(l *shmLease) (uint64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return 0, base.ErrClosed
	}
	if s.m == nil {
		s.m = make(map[uint64]*shmLease)
	}
	for {
		id := rand.Uint64()
		if _, dup := s.m[id]; id != 0 && !dup {
			s.m[id] = l
			return id, nil
		}
	}
}

// setStop records the AfterFunc stop of lease id, or calls it when the lease already ended.
func (s *shmLeases) setStop(id uint64, stop func() bool) {
	s.mu.Lock()
	l, ok := s.m[id]
	if ok {
		l.stop = stop
	}
	s.mu.Unlock()
	if !ok {
		stop()
	}
}

// end ends lease id if it is still held and reports whether it was.
func (s *shmLeases) end(id uint64) bool {
	s.mu.Lock()
	l, ok := s.m[id]
	var stop func() bool
	if ok {
		delete(s.m, id)
		stop = l.stop
	}
	s.mu.Unlock()
	if !ok {
		return false
	}
	if stop != nil {
		stop()
	}
	l.r.Release()
	return true
}

// release ends the leases of a ShmRelease and counts those that were still held.
func (s *shmLeases) release(ids []uint64) int64 {
	var n int64
	for _, id := range ids {
		if s.end(id) {
			n++
		}
	}
	return n
}

// expire ends the leases whose TTL passed (the sweeper) and returns how many.
func (s *shmLeases) expire(now time.Time) int {
	var ids []uint64
	s.mu.Lock()
	for id, l := range s.m {
		if now.After(l.expires) {
			ids = append(ids, id)
		}
	}
	s.mu.Unlock()
	return int(s.release(ids))
}

// closeAll ends every lease and refuses new ones (Shutdown, before the engine closes).
func (s *shmLeases) closeAll() {
	s.mu.Lock()
	s.closed = true
	ids := make([]uint64, 0, len(s.m))
	for id := range s.m {
		ids = append(ids, id)
	}
	s.mu.Unlock()
	s.release(ids)
}

// count returns the number of leases held (metrics).
func (s *shmLeases) count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.m)
}
