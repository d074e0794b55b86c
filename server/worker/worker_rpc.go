package worker

import (
	"context"
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
	case *transfer.KVSessionPinsRequest:
		return w.kvSessionPins(r), nil
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
	if req.Cached && !w.vouch.ok(w.now()) {
		return transfer.ReadSource{}, true, fmt.Errorf("%w: %q: a read from a kept lookup, and this worker cannot vouch that the leader owes it no drop (no settled heartbeat answer lately): look it up again",
			base.ErrInvalidVersion, req.Key)
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
