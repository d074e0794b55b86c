package server

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/mooncake-go/mooncake/internal/base"
	"github.com/mooncake-go/mooncake/tier"
	"github.com/mooncake-go/mooncake/transfer"
)

// workerHandler serves the worker's data calls over transfer.
//
// Ownership: a Write's payload lands straight in the tier.Writer's arena range (no copy on
// the Go heap); the pending entry owns the Writer until Commit (handed to the engine) or an
// abort. Each chunk is hashed as it lands (tier.Writer.Landed), so Commit verifies the
// client's checksum without a second pass over the object. A Read sends the pinned bytes of a tier.Reader; the transfer server calls Release
// after the send.
type workerHandler struct {
	transfer.UnimplementedHandler
	w *Worker
}

func (h *workerHandler) HandleWrite(_ context.Context, req *transfer.WriteRequest, n int64) (transfer.WriteSink, error) {
	w := h.w
	sink, err := w.beginWrite(req, n)
	if err != nil {
		w.met.observe(wopWrite, err)
		return transfer.WriteSink{}, err
	}
	return sink, nil
}

// pendingForWriteLocked returns the pending object a chunk of k (an object of size bytes)
// belongs to (nil: none yet), or why the chunk is refused: the object is committing, its
// first chunk gave another size, or the put was dropped. REQUIRES: w.pend.
func (w *Worker) pendingForWriteLocked(k pendKey, size int64) (*pending, error) {
	p := w.pend.m[k]
	switch {
	case p != nil && p.committing:
		return nil, fmt.Errorf("%w: write of %q version %d: already committing", base.ErrInvalidParams, k.key, k.v)
	case p != nil && p.size != size:
		return nil, fmt.Errorf("%w: write of %q: size %d differs from the first chunk's %d", base.ErrInvalidParams, k.key, size, p.size)
	case p == nil && w.droppedLocked(k):
		return nil, fmt.Errorf("%w: write of %q version %d: the put was dropped (revoked, expired or superseded)", base.ErrObjectNotFound, k.key, k.v)
	}
	return p, nil
}

// beginWrite finds or creates the pending object of req and returns the sink for one chunk.
func (w *Worker) beginWrite(req *transfer.WriteRequest, n int64) (transfer.WriteSink, error) {
	if w.closing.Load() {
		return transfer.WriteSink{}, fmt.Errorf("%w: worker %s is shutting down", base.ErrUnavailable, w.id)
	}
	if err := base.ValidateKey(req.Key); err != nil {
		return transfer.WriteSink{}, err
	}
	if req.Version == 0 {
		return transfer.WriteSink{}, fmt.Errorf("%w: write of %q without a version (PutStart gives one)", base.ErrInvalidParams, req.Key)
	}
	if req.TotalSize <= 0 || req.Offset < 0 || n < 0 || req.Offset > req.TotalSize || n > req.TotalSize-req.Offset {
		return transfer.WriteSink{}, fmt.Errorf("%w: write of %q: chunk [%d, +%d) outside an object of %d bytes",
			base.ErrInvalidParams, req.Key, req.Offset, n, req.TotalSize)
	}
	if req.Commit && (req.Offset != 0 || n != req.TotalSize) {
		return transfer.WriteSink{}, fmt.Errorf("%w: write of %q with commit must carry the whole object", base.ErrInvalidParams, req.Key)
	}
	k := pendKey{req.Key, req.Version}
	w.pend.Lock()
	p, err := w.pendingForWriteLocked(k, req.TotalSize)
	if err != nil {
		w.pend.Unlock()
		return transfer.WriteSink{}, err
	}
	if p == nil {
		// Put may evict inline, wait on the spill queue or wait for the master's drops of
		// superseded versions: not under pend.mu, which applying those drops takes
		// (worker_drop.go). Meanwhile another chunk of the object may have made the pending
		// entry, or a drop of the version may have come: check again.
		w.pend.Unlock()
		wr, err := w.eng.Put(req.Key, req.Version, req.TotalSize, tier.PutOptions{
			Persistence: req.Persistence, SoftPinTTL: req.SoftPinTTL, HardPin: req.HardPin, Model: req.Model})
		if err != nil {
			return transfer.WriteSink{}, err
		}
		w.pend.Lock()
		q, err := w.pendingForWriteLocked(k, req.TotalSize)
		switch {
		case err != nil:
			w.pend.Unlock()
			wr.Abort()
			return transfer.WriteSink{}, err
		case q != nil:
			defer wr.Abort() // another chunk's Put won; after pend.mu is released
			p = q
		default:
			p = &pending{w: wr, size: req.TotalSize, deadline: w.now().Add(w.cfg.PendingWriteTimeout)}
			w.pend.m[k] = p
		}
	}
	p.inflight++
	dst := p.w.Bytes()[req.Offset : req.Offset+n]
	w.pend.Unlock()

	commit, checksum, off := req.Commit, req.Checksum, req.Offset
	return transfer.WriteSink{
		Dst: dst,
		Done: func(err error) error {
			if err == nil {
				// Hash the chunk now, while later stripes are still arriving, so Commit makes
				// no second pass. Before inflight drops: nothing aborts or commits p.w while
				// a chunk is in flight.
				p.w.Landed(off, n)
			}
			w.pend.Lock()
			p.inflight--
			abort := false
			if err != nil {
				if !p.failed {
					p.failed = true
					if w.pend.m[k] == p {
						delete(w.pend.m, k)
					}
				}
			} else {
				p.received += n
			}
			if p.failed && p.inflight == 0 {
				abort = true
			}
			doCommit := err == nil && commit && !p.failed
			if doCommit {
				p.committing = true // stays in pend.m until commitPending returns
			}
			w.pend.Unlock()
			if abort {
				p.w.Abort()
			}
			if err != nil {
				w.met.observe(wopWrite, err)
				return err
			}
			if p.failed {
				err := fmt.Errorf("%w: write of %q was dropped (revoked, expired or a chunk failed)", base.ErrObjectNotFound, k.key)
				w.met.observe(wopWrite, err)
				return err
			}
			w.met.observe(wopWrite, nil)
			if doCommit {
				err := w.commitPending(k, p, checksum)
				w.met.observe(wopCommit, err)
				if err == nil {
					w.met.mc.observeWrite(p.size, w.now().Sub(p.deadline.Add(-w.cfg.PendingWriteTimeout)))
				}
				return err
			}
			return nil
		},
	}, nil
}

// commit makes a striped write visible once every chunk landed.
func (w *Worker) commit(req *transfer.CommitRequest) error {
	k := pendKey{req.Key, req.Version}
	w.pend.Lock()
	p := w.pend.m[k]
	switch {
	case p == nil:
		w.pend.Unlock()
		return fmt.Errorf("%w: commit of %q version %d: no write in progress (it expired after %v or was dropped)",
			base.ErrObjectNotFound, req.Key, req.Version, w.cfg.PendingWriteTimeout)
	case p.committing:
		w.pend.Unlock()
		return fmt.Errorf("%w: commit of %q version %d: already committing", base.ErrInvalidParams, req.Key, req.Version)
	case p.inflight > 0:
		w.pend.Unlock()
		return fmt.Errorf("%w: commit of %q while chunks are still arriving", base.ErrReplicaNotReady, req.Key)
	case p.received < p.size:
		w.pend.Unlock()
		return fmt.Errorf("%w: commit of %q: %d of %d bytes received", base.ErrReplicaNotReady, req.Key, p.received, p.size)
	}
	p.committing = true // stays in pend.m until commitPending returns
	w.pend.Unlock()
	if err := w.commitPending(k, p, req.Checksum); err != nil {
		return err
	}
	w.met.mc.observeWrite(p.size, w.now().Sub(p.deadline.Add(-w.cfg.PendingWriteTimeout)))
	return nil
}

// sessionCommit is commit for a put session (transfer.SessionCommitRequest): it also answers
// the checksum the worker computed over the bytes that landed, which the client cannot know
// (it wrote ranges, never held the object) and PutEnd must carry. A version already committed
// here answers again, so a resend after a lost reply succeeds.
func (w *Worker) sessionCommit(r *transfer.SessionCommitRequest) (*transfer.SessionCommitResponse, error) {
	if err := base.ValidateKey(r.Key); err != nil {
		return nil, err
	}
	err := w.commit(&transfer.CommitRequest{Key: r.Key, Version: r.Version})
	if err != nil && !errors.Is(err, base.ErrObjectNotFound) {
		return nil, err
	}
	info, ierr := w.eng.Info(r.Key, r.Version)
	if ierr != nil {
		if err != nil {
			return nil, err // nothing pending and nothing committed: the pending error says why
		}
		return nil, ierr
	}
	return &transfer.SessionCommitResponse{Checksum: info.Checksum, Size: info.Size}, nil
}

func (h *workerHandler) HandleCall(ctx context.Context, req transfer.Message) (transfer.Message, error) {
	w := h.w
	if resp, ok, err := w.handleShmPut(ctx, req); ok {
		return resp, err
	}
	switch r := req.(type) {
	case *transfer.ShmPinRequest:
		resp, err := w.shmPin(ctx, r)
		w.met.observe(wopShmPin, err)
		return resp, err
	case *transfer.ShmReleaseRequest:
		n := w.shm.release(r.Leases)
		w.met.observe(wopShmRelease, nil)
		return transfer.NewCountResponse(transfer.OpShmRelease, n), nil
	case *transfer.ShmTouchRequest:
		resp, err := w.shmTouch(r)
		w.met.observe(wopShmTouch, err)
		return resp, err
	case *transfer.PrefetchRequest:
		return w.prefetch(r)
	case *transfer.CommitRequest:
		err := w.commit(r)
		w.met.observe(wopCommit, err)
		return nil, err
	case *transfer.SessionCommitRequest:
		resp, err := w.sessionCommit(r)
		w.met.observe(wopCommit, err)
		if err != nil {
			return nil, err
		}
		return resp, nil
	case *transfer.ReplicateRequest:
		err := w.replicate(ctx, r)
		w.met.observe(wopReplicate, err)
		return nil, err
	case *transfer.DropRequest:
		if err := base.ValidateKey(r.Key); err != nil {
			return nil, err
		}
		err := w.drop(r.Key, r.Version)
		w.met.observe(wopDrop, err)
		return nil, err
	case *transfer.Empty:
		switch r.Op() {
		case transfer.OpPing:
			return nil, nil
		case transfer.OpShmOpen:
			return w.shmOpen()
		case transfer.OpWorkerMemory:
			return w.memoryResponse()
		}
	}
	return nil, fmt.Errorf("%w: %s is not a worker call", base.ErrNotSupported, req.Op())
}

func (h *workerHandler) HandleRead(_ context.Context, req *transfer.ReadRequest) (transfer.ReadSource, error) {
	start := time.Now()
	src, _, err := h.w.read(req, false)
	return h.observeRead(start, src, err)
}

// HandleReadNow serves a read of an object in DRAM on the connection's read loop (no I/O);
// anything else goes to HandleRead (transfer.ReadNowHandler).
func (h *workerHandler) HandleReadNow(_ context.Context, req *transfer.ReadRequest) (transfer.ReadSource, bool, error) {
	start := time.Now()
	src, ok, err := h.w.read(req, true)
	if !ok {
		return transfer.ReadSource{}, false, nil
	}
	src, err = h.observeRead(start, src, err)
	return src, true, err
}

// observeRead counts a read and, for a read that will be sent, has its Release record the
// read's latency.
func (h *workerHandler) observeRead(start time.Time, src transfer.ReadSource, err error) (transfer.ReadSource, error) {
	h.w.met.observe(wopRead, err)
	if err == nil {
		// The transfer server calls Release after the last byte is sent: the read's end.
		release, tier, n := src.Release, src.Resp.Tier, int64(len(src.Data))
		src.Release = func() {
			release()
			h.w.met.mc.observeRead(tier, n, time.Since(start))
		}
	}
	return src, err
}

// read pins the object (or range) req asks for. With dramOnly it does not block: ok is false
// when the object is committed but not in DRAM (and nothing was done).
func (w *Worker) read(req *transfer.ReadRequest, dramOnly bool) (src transfer.ReadSource, ok bool, err error) {
	if err := base.ValidateKey(req.Key); err != nil {
		return transfer.ReadSource{}, true, err
	}
	var r *tier.Reader
	if dramOnly {
		if r, ok, err = w.eng.GetDRAM(req.Key, req.Version); !ok {
			return transfer.ReadSource{}, false, nil
		}
	} else {
		r, err = w.eng.Get(req.Key, req.Version)
	}
	if err != nil {
		return transfer.ReadSource{}, true, err
	}
	meta := r.Meta()
	data := r.Bytes()
	off, n := req.Offset, req.Length
	if off < 0 || n < 0 || off > int64(len(data)) || (n > 0 && n > int64(len(data))-off) {
		r.Release()
		return transfer.ReadSource{}, true, fmt.Errorf("%w: range [%d, +%d) of %q outside its %d bytes", base.ErrInvalidParams, off, n, req.Key, len(data))
	}
	if n == 0 {
		n = int64(len(data)) - off
	}
	src = transfer.ReadSource{
		Resp:    transfer.ReadResponse{Version: meta.Version, Size: meta.Size, Checksum: meta.Checksum, Tier: r.Tier()},
		Data:    data[off : off+n],
		Release: r.Release,
	}
	// Bytes in a memfd arena may go by reference (sendfile) to a client that verifies: the
	// transfer server decides (transfer.ReadSource.File: the socket keeps referring to the
	// pages after Release, which only a verifying client can afford). An anonymous arena, or
	// bytes in a Go buffer (an NVMe hit with a full arena), are always copied.
	if base0, inArena := r.ArenaOffset(); inArena && w.shared {
		src.File = transfer.FileRange{Valid: true, FD: w.share.FD, Offset: base0 + off}
	}
	return src, true, nil
}
