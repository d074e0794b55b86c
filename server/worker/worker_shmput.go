package worker

import (
	"context"
	"errors"
	"fmt"

	"github.com/mooncake-go/mooncake/internal/base"
	"github.com/mooncake-go/mooncake/transfer"
)

// Same-host puts (ShmPutOpen, ShmPutWrite, ShmPutClose in docs/protocol.md). A client on
// this host asks for a staging area: a memfd of shmPutStageSize bytes that this worker maps
// read-only and the client maps read-write. The client copies a value (or a chunk of it) into
// the area and sends ShmPutWrite; the worker copies the range into the object's arena range
// through the very path a Write frame's payload takes (beginWrite: the pending object, the
// hash of each chunk as it lands, the checksum verified at commit), so a put's semantics,
// errors and commit are those of a TCP put and only the byte transport differs. The arena
// itself stays read-only to clients: a client can only spoil its own staged bytes, which the
// checksum of what was copied catches.

const (
	// shmPutStageSize is the size of one client's staging area: eight of the client's 4 MiB
	// slots, so eight puts in flight (the bench's concurrency) each have one. Pages are
	// allocated as the client first writes them, so a client that stages only small values
	// costs only what it touched.
	shmPutStageSize = 32 << 20
	// shmPutMaxStages bounds the staging areas a worker holds at once (at most
	// shmPutMaxStages * shmPutStageSize bytes of shared memory besides the arena: 512 MiB).
	// A client past it is refused and puts over TCP.
	shmPutMaxStages = 16
)

// shmStages holds the staging areas of the clients on this host. An area ends exactly once,
// by the first of: ShmPutClose, the end of the connection that opened it (the client died or
// closed), or Shutdown. Copies in flight hold a reference to the area (StagingArea.Acquire),
// so its memory is unmapped only after the last of them. Area ids are random (connTable), so
// a client cannot write through another client's area by guessing (it could only spoil that
// client's put, which its checksum catches).
type shmStages struct {
	connTable[*shmStage]
}

type shmStage struct{ a *transfer.StagingArea }

func (s *shmStage) end() { s.a.Close() }

// shmPutOpen creates a staging area for the caller, ended with ctx (its connection) at the
// latest.
func (w *Worker) shmPutOpen(ctx context.Context, req *transfer.ShmPutOpenRequest) (*transfer.ShmPutOpenResponse, error) {
	switch bid := transfer.BootID(); {
	case !w.shared:
		return nil, fmt.Errorf("%w: worker %s keeps its memory private (shared memory is off)", base.ErrNotSupported, w.id)
	case bid == "":
		return nil, fmt.Errorf("%w: worker %s cannot read its kernel boot id", base.ErrNotSupported, w.id)
	case req.BootID != bid:
		return nil, fmt.Errorf("%w: worker %s runs on another host (boot id %q, the client's %q)", base.ErrNotSupported, w.id, bid, req.BootID)
	case w.closing.Load():
		return nil, fmt.Errorf("%w: worker %s is shutting down", base.ErrUnavailable, w.id)
	}
	a, err := transfer.NewStagingArea(shmPutStageSize)
	if err != nil {
		return nil, err
	}
	id, err := w.stages.add(&shmStage{a: a}, shmPutMaxStages)
	if err != nil {
		a.Close()
		if errors.Is(err, errTableFull) {
			return nil, fmt.Errorf("%w: worker %s holds %d staging areas, the most it keeps; put over TCP", base.ErrNotSupported, w.id, shmPutMaxStages)
		}
		return nil, fmt.Errorf("%w: worker %s is shutting down", base.ErrUnavailable, w.id)
	}
	// After the area is in the table: if ctx is already done, it ends at once (the client is
	// gone; nobody will read the answer).
	w.stages.endWith(ctx, id)
	info := a.Info()
	info.Stage = id
	return &info, nil
}

// shmPutWrite copies req.Length bytes at req.StageOffset of the caller's staging area into the
// object req.Write names, at req.Write.Offset, as a Write frame carrying those bytes would.
func (w *Worker) shmPutWrite(req *transfer.ShmPutWriteRequest) error {
	a := w.stages.acquire(req.Stage)
	if a == nil {
		// NOT_SUPPORTED tells the client to put over TCP (and open a new area next time).
		return fmt.Errorf("%w: worker %s has no staging area %#x (closed, or it ended with its connection)", base.ErrNotSupported, w.id, req.Stage)
	}
	defer a.Release()
	src, err := a.Bytes(req.StageOffset, req.Length)
	if err != nil {
		return err
	}
	sink, err := w.beginWrite(&req.Write, req.Length)
	if err != nil {
		w.met.observe(wopWrite, err)
		return err
	}
	// The staged bytes may change under the copy (the client's mapping is writable): what
	// lands is what is hashed (Done), so a change is a checksum mismatch at commit, never a
	// stored object that differs from its checksum.
	copy(sink.Dst, src)
	return sink.Done(nil)
}

// acquire returns area id with a reference the caller Releases; nil when there is none.
func (s *shmStages) acquire(id uint64) *transfer.StagingArea {
	var a *transfer.StagingArea
	s.lookup(id, func(st *shmStage) {
		if st.a.Acquire() {
			a = st.a
		}
	})
	return a
}

// handleShmPut serves the same-host put calls; ok is false for any other call.
func (w *Worker) handleShmPut(ctx context.Context, req transfer.Message) (transfer.Message, bool, error) {
	switch r := req.(type) {
	case *transfer.ShmPutOpenRequest:
		resp, err := w.shmPutOpen(ctx, r)
		return resp, true, err
	case *transfer.ShmPutWriteRequest:
		return nil, true, w.shmPutWrite(r)
	case *transfer.ShmPutCloseRequest:
		w.stages.end(r.Stage)
		return nil, true, nil
	}
	return nil, false, nil
}
