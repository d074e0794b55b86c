package client

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mooncake-go/mooncake/internal/base"
	"github.com/mooncake-go/mooncake/transfer"
)

// Same-host puts: a put to a worker on this host copies the value into a staging area the
// worker created for this client (ShmPutOpen) and asks the worker to copy it into the
// object's arena range (ShmPutWrite), instead of sending it over TCP. The put's PutStart,
// PutEnd, checksum, errors and durability are those of a TCP put: only the byte transport
// differs. Whatever goes wrong before the worker took the bytes (no area, another host,
// the area gone, the staged bytes spoiled) falls back to TCP.

const (
	// shmPutSlot is the most one ShmPutWrite carries: the area is cut into slots of this
	// size, and a larger value streams through slots chunk by chunk. 4 MiB amortizes the
	// call (~30-50 µs on loopback) over ~0.5 ms of copying, while a chunk still stays in L3
	// for the worker's hash that follows its copy.
	shmPutSlot = 4 << 20
	// shmPutDepth is how many chunks of one put are in flight: the client copies the next
	// chunk while the worker copies the last one.
	shmPutDepth = 2
)

// shmStagers is the client's side of same-host puts: per worker address, the staging area
// that worker made for this client, mapped read-write.
//
// Ownership: a shmStager owns its area's first reference; every put Acquires one for its
// copies and calls, so an area forgotten (or the client closed) meanwhile is unmapped after
// the last put using it ends.
type shmStagers struct {
	mu     sync.Mutex // protects m, closed and every shmStager's fields but slots
	m      map[string]*shmStager
	closed bool

	// puts counts completed puts (of one replica) by path (WriteStats).
	puts struct{ shm, tcp, fallbacks atomic.Int64 }
	// staged, when set (tests only; nil in production), is called with each chunk right
	// after it was copied into its slot and before the worker is asked to take it.
	staged func(slot []byte)
}

type shmStager struct {
	area  *transfer.StagingArea // nil: none mapped (see retryAt)
	stage uint64                // the worker's id of area
	// opened is non-nil while one goroutine asks ShmPutOpen, and closed when it is done:
	// other puts wait for it rather than go over TCP.
	opened  chan struct{}
	retryAt time.Time // with area nil: do not ask again before
	// slots holds the offsets of the free slots of area (buffered to their number): a put
	// takes one per chunk in flight and gives it back after the worker's answer, so a slot
	// is never written while the worker may still copy from it.
	slots chan int64
}

// acquire returns addr's staging area with a reference the caller Releases, its stage id and
// free-slot channel, opening one first when due; nil when the put is to go over TCP.
func (s *shmStagers) acquire(ctx context.Context, c *Client, addr string) (*transfer.StagingArea, uint64, chan int64) {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil, 0, nil
	}
	if s.m == nil {
		s.m = make(map[string]*shmStager)
	}
	p := s.m[addr]
	if p == nil {
		p = &shmStager{}
		s.m[addr] = p
	}
	for p.opened != nil {
		// Another put is opening the area: one round trip and a mapping, worth waiting for.
		opened := p.opened
		s.mu.Unlock()
		select {
		case <-opened:
		case <-ctx.Done():
			return nil, 0, nil
		}
		s.mu.Lock()
	}
	if p.area != nil && p.area.Acquire() {
		a, id, slots := p.area, p.stage, p.slots
		s.mu.Unlock()
		return a, id, slots
	}
	if s.closed || time.Now().Before(p.retryAt) || c.shm.host(addr) == hostOther {
		s.mu.Unlock()
		return nil, 0, nil
	}
	opened := make(chan struct{})
	p.opened = opened
	s.mu.Unlock()
	defer close(opened)

	var info transfer.ShmPutOpenResponse
	err := errNoBootID
	if bid := transfer.BootID(); bid != "" {
		err = c.rpc.Call(ctx, addr, &transfer.ShmPutOpenRequest{BootID: bid}, &info)
	}
	var a *transfer.StagingArea
	if err == nil {
		a, err = transfer.MapStagingArea(&info)
	}
	if err == nil && a.Size() < shmPutSlot {
		err = errors.New("client: staging area smaller than one slot")
	}
	if err != nil && info.Stage != 0 {
		// Opened but not usable here (e.g. another uid cannot open /proc/<pid>/fd): let the
		// worker drop it now rather than with the connection.
		c.closeStage(addr, info.Stage)
	}

	s.mu.Lock()
	defer s.mu.Unlock()
	p.opened = nil
	if err != nil || s.closed {
		if a != nil {
			a.Close()
		}
		if err == nil || ctx.Err() == nil {
			// A refusal (another host, shared memory off, too many areas) or a mapping
			// that failed: not again for a while. A cancelled call says nothing.
			p.retryAt = time.Now().Add(shmRetry)
		}
		c.log.Debug("client: putting over TCP, not shared memory", "worker", addr, "err", err)
		return nil, 0, nil
	}
	n := a.Size() / shmPutSlot
	p.area, p.stage, p.slots = a, info.Stage, make(chan int64, n)
	for i := range n {
		p.slots <- i * shmPutSlot
	}
	a.Acquire()
	return a, p.stage, p.slots
}

var errNoBootID = errors.New("client: cannot read the kernel boot id")

// closeStage asks the worker at addr to drop staging area stage (best effort: it ends with
// the connection that opened it anyway).
func (c *Client) closeStage(addr string, stage uint64) {
	ctx, cancel := context.WithTimeout(context.Background(), revokeTimeout)
	defer cancel()
	if err := c.rpc.Call(ctx, addr, &transfer.ShmPutCloseRequest{Stage: stage}, transfer.NewEmpty(transfer.OpShmPutClose)); err != nil {
		c.log.Debug("client: closing a staging area", "worker", addr, "err", err)
	}
}

// forget drops addr's area a (the worker no longer has it): the next put opens another.
func (s *shmStagers) forget(addr string, a *transfer.StagingArea) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if p := s.m[addr]; p != nil && p.area == a {
		p.area = nil
		p.retryAt = time.Time{}
		a.Close()
	}
}

// close unmaps every area as soon as the puts using it end. The workers drop their side
// with the client's connections.
func (s *shmStagers) close() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closed = true
	for _, p := range s.m {
		if p.area != nil {
			p.area.Close()
			p.area = nil
		}
	}
}

// writeReplica writes value to replica r, through shared memory when r's worker is on this
// host, else (or when that path fails before the worker took the bytes) over TCP.
func (c *Client) writeReplica(ctx context.Context, r base.Placement, req *transfer.WriteRequest, value []byte) error {
	if !c.cfg.DisableSharedMemory {
		err := c.writeShm(ctx, r, req, value)
		if err == nil {
			c.stage.puts.shm.Add(1)
		}
		if err != errShmFallback {
			return err
		}
	}
	if err := c.rpc.Write(ctx, r.Address, req, value); err != nil {
		return err
	}
	c.stage.puts.tcp.Add(1)
	return nil
}

// writeShm copies value through addr's staging area. It returns errShmFallback when the bytes
// are to go over TCP instead: nothing was staged, or the worker answered that it has no such
// area (NOT_SUPPORTED) or that what it copied fails the checksum (the pending object was
// aborted, so a TCP write starts afresh; any chunks that did land are overwritten by it and
// the commit rehashes). An error without the worker's answer is returned as is: a chunk may
// still be being copied, and a TCP write must not race it.
func (c *Client) writeShm(ctx context.Context, r base.Placement, req *transfer.WriteRequest, value []byte) error {
	a, stage, slots := c.stage.acquire(ctx, c, r.Address)
	if a == nil {
		return errShmFallback
	}
	defer a.Release()
	n := int64(len(value))
	if n <= shmPutSlot {
		w := *req
		w.Offset, w.Commit = 0, true
		return c.shmPutResult(r.Address, a, stage, c.shmPutChunk(ctx, r.Address, a, stage, slots, &w, value))
	}

	// Chunks of up to shmPutSlot, shmPutDepth in flight, then a Commit as for striped writes.
	// After a failure no more chunks start, but those in flight are not cancelled: each must
	// end with the worker's answer before the caller may fall back to TCP (see above).
	var (
		wg       sync.WaitGroup
		mu       sync.Mutex // protects first and noAnswer
		first    error
		noAnswer error // a chunk that failed without the worker's answer
		stop     = make(chan struct{})
		stopOnce sync.Once
	)
	fail := func(err error) {
		var answer *base.CodeError
		mu.Lock()
		if first == nil {
			first = err
		}
		if noAnswer == nil && !errors.As(err, &answer) {
			noAnswer = err
		}
		mu.Unlock()
		stopOnce.Do(func() { close(stop) })
	}
	depth := make(chan struct{}, shmPutDepth)
chunks:
	for off := int64(0); off < n; off += shmPutSlot {
		select {
		case depth <- struct{}{}:
		case <-stop:
			break chunks
		case <-ctx.Done():
			fail(ctx.Err())
			break chunks
		}
		select {
		case <-stop:
			<-depth
			break chunks
		default:
		}
		w := *req
		w.Offset, w.Commit, w.Checksum = off, false, 0
		chunk := value[off:min(off+shmPutSlot, n)]
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-depth }()
			if err := c.shmPutChunk(ctx, r.Address, a, stage, slots, &w, chunk); err != nil {
				fail(err)
			}
		}()
	}
	wg.Wait()
	err := first
	if noAnswer != nil {
		err = noAnswer
	}
	if err == nil {
		err = c.rpc.Call(ctx, r.Address, &transfer.CommitRequest{Key: req.Key, Version: req.Version, Checksum: req.Checksum},
			transfer.NewEmpty(transfer.OpCommit))
	}
	return c.shmPutResult(r.Address, a, stage, err)
}

// shmPutChunk stages chunk in a free slot and asks the worker to take it as w describes.
func (c *Client) shmPutChunk(ctx context.Context, addr string, a *transfer.StagingArea, stage uint64, slots chan int64,
	w *transfer.WriteRequest, chunk []byte) error {
	var off int64
	select {
	case off = <-slots:
	case <-ctx.Done():
		return ctx.Err()
	}
	// The slot is free again only after the worker's answer (or when no call was made).
	defer func() { slots <- off }()
	dst, err := a.Bytes(off, int64(len(chunk)))
	if err != nil {
		return err
	}
	copy(dst, chunk)
	if c.stage.staged != nil {
		c.stage.staged(dst)
	}
	return c.rpc.Call(ctx, addr, &transfer.ShmPutWriteRequest{Stage: stage, StageOffset: off, Length: int64(len(chunk)), Write: *w},
		transfer.NewEmpty(transfer.OpShmPutWrite))
}

// shmPutResult turns the outcome of a staged write into writeShm's answer.
func (c *Client) shmPutResult(addr string, a *transfer.StagingArea, stage uint64, err error) error {
	var answer *base.CodeError
	switch {
	case err == nil:
		return nil
	case !errors.As(err, &answer):
		if !errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded) {
			// The worker is gone or unreachable (the put is placed elsewhere: replace.go): do
			// not keep its area mapped; a worker back at addr gets a fresh one.
			c.stage.forget(addr, a)
		}
		return err // no answer: see writeShm
	case errors.Is(err, base.ErrNotSupported):
		// Usually the area is gone (it ended with its connection); the worker also says
		// NOT_SUPPORTED for a put it cannot take at all (durable without an NVMe tier),
		// which TCP then reports. Either way drop the area on both sides: a client keeps at
		// most one per worker.
		c.stage.forget(addr, a)
		c.closeStage(addr, stage)
	case errors.Is(err, base.ErrCorruption):
		// The staged bytes changed between our copy and the worker's (another process of
		// this uid wrote the area, or memory failed): the value itself is intact.
		c.log.Debug("client: staged put failed its checksum on the worker; putting over TCP", "worker", addr, "err", err)
	default:
		return err
	}
	c.stage.puts.fallbacks.Add(1)
	return errShmFallback
}

// WriteStats counts the replica writes a client completed, by path.
type WriteStats struct {
	// SharedMemory counts writes staged in shared memory for a worker on this host.
	SharedMemory int64
	// TCP counts writes sent over TCP.
	TCP int64
	// Fallbacks counts shared-memory writes the worker turned down (its staging area gone,
	// or the staged bytes spoiled), each then sent over TCP (and counted there).
	Fallbacks int64
}

// WriteStats returns how many replica writes took each path since Connect.
func (c *Client) WriteStats() WriteStats {
	p := &c.stage.puts
	return WriteStats{SharedMemory: p.shm.Load(), TCP: p.tcp.Load(), Fallbacks: p.fallbacks.Load()}
}
