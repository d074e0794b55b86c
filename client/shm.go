package client

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/mooncake-go/mooncake/internal/base"
	"github.com/mooncake-go/mooncake/transfer"
)

// shmRetry is how long a worker whose arena could not be mapped (another host, another uid,
// an older worker, shared memory off) is read over TCP before the client asks again.
const shmRetry = time.Minute

// shmChunk is the unit of the fused copy-and-hash: small enough that the hash reads the bytes
// the copy just wrote from the CPU cache.
const shmChunk = 64 << 10

// shmPeers is the client's shared-memory path: per worker address, a read-only mapping of
// that worker's arena when it runs on this host (design.md section 5). A get then costs two
// small calls (ShmPin, ShmRelease) and one memory copy instead of a TCP transfer.
//
// Ownership: a shmPeer owns its mapping's first reference; readers Acquire one for the length
// of a copy. forget and close drop the peer's reference, so a mapping is unmapped only after
// the last copy from it ended.
type shmPeers struct {
	mu     sync.Mutex // protects m, every shmPeer's fields, closed and ctx/cancel
	m      map[string]*shmPeer
	closed bool
	// ctx ends the release flushers when the client closes; flushers counts them.
	ctx      context.Context
	cancel   context.CancelFunc
	flushers sync.WaitGroup
}

type shmPeer struct {
	// host says whether the worker runs on this host, by kernel boot id (ShmOpen's answer,
	// even when the arena could not be mapped, e.g. another uid); hostUnknown until a
	// ShmOpen answered. It orders replicas (orderReplicas).
	host    hostMatch
	arena   *transfer.SharedArena // nil: none mapped (see retryAt)
	opening bool                  // one goroutine is asking ShmOpen; others use TCP meanwhile
	retryAt time.Time             // with arena nil: do not ask again before
	// release holds leases to end with the next ShmRelease; flushing says a flusher
	// goroutine is sending them (it sends until release is empty, so leases that arrive
	// while a call is in flight go in the next one: batching grows with the load).
	release  []uint64
	flushing bool
}

// acquire returns the mapped arena of the worker at addr with a reference the caller must
// Release, mapping it first when due; nil when the worker is to be read over TCP.
func (s *shmPeers) acquire(ctx context.Context, c *Client, addr string) *transfer.SharedArena {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	if s.m == nil {
		s.m = make(map[string]*shmPeer)
	}
	p := s.m[addr]
	if p == nil {
		p = &shmPeer{}
		s.m[addr] = p
	}
	if p.arena != nil && p.arena.Acquire() {
		a := p.arena
		s.mu.Unlock()
		return a
	}
	if p.opening || time.Now().Before(p.retryAt) {
		s.mu.Unlock()
		return nil
	}
	p.opening = true
	s.mu.Unlock()

	var info transfer.ShmOpenResponse
	err := c.rpc.Call(ctx, addr, transfer.NewEmpty(transfer.OpShmOpen), &info)
	var a *transfer.SharedArena
	host := hostUnknown
	if err == nil {
		host = hostOther
		if bid := transfer.BootID(); bid != "" && info.BootID == bid {
			host = hostSame
		}
		a, err = transfer.MapSharedArena(&info)
	}

	s.mu.Lock()
	defer s.mu.Unlock()
	p.opening = false
	if host != hostUnknown {
		p.host = host
	}
	if err != nil || s.closed {
		if a != nil {
			a.Close()
		}
		p.retryAt = time.Now().Add(shmRetry)
		c.log.Debug("client: reading over TCP, not shared memory", "worker", addr, "err", err)
		return nil
	}
	p.arena = a
	a.Acquire()
	return a
}

// hostMatch is what the client knows of a worker's host.
type hostMatch uint8

const (
	hostUnknown hostMatch = iota
	hostSame              // the worker's kernel boot id is ours
	hostOther             // the worker answered ShmOpen with another boot id
)

// host returns what ShmOpen told of addr's host (hostUnknown when it was never asked, or
// the worker keeps its arena private and so does not say).
func (s *shmPeers) host(addr string) hostMatch {
	s.mu.Lock()
	defer s.mu.Unlock()
	if p := s.m[addr]; p != nil {
		return p.host
	}
	return hostUnknown
}

// forget drops the mapping a of addr (the worker restarted with a new arena): the next get
// maps the new one.
func (s *shmPeers) forget(addr string, a *transfer.SharedArena) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if p := s.m[addr]; p != nil && p.arena == a {
		p.arena = nil
		p.retryAt = time.Time{}
		a.Close()
	}
}

// close unmaps every arena (as soon as its copies in flight end) and stops the release
// flushers (leases they did not send end on the worker with the client's connections).
func (s *shmPeers) close() {
	s.mu.Lock()
	s.closed = true
	for _, p := range s.m {
		if p.arena != nil {
			p.arena.Close()
			p.arena = nil
		}
	}
	if s.cancel != nil {
		s.cancel()
	}
	s.mu.Unlock()
	s.flushers.Wait()
}

// releaseLater queues lease for a batched ShmRelease to addr, sent by a flusher goroutine.
func (s *shmPeers) releaseLater(c *Client, addr string, lease uint64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	p := s.m[addr]
	if p == nil || s.closed {
		return // closing: the worker ends the lease with the connection
	}
	p.release = append(p.release, lease)
	if p.flushing {
		return
	}
	p.flushing = true
	if s.ctx == nil {
		s.ctx, s.cancel = context.WithCancel(context.Background())
	}
	ctx := s.ctx
	s.flushers.Add(1)
	go s.flush(ctx, c, addr, p)
}

// flush sends p's queued leases until none is left.
func (s *shmPeers) flush(ctx context.Context, c *Client, addr string, p *shmPeer) {
	defer s.flushers.Done()
	for {
		s.mu.Lock()
		n := min(len(p.release), transfer.MaxShmRelease)
		if n == 0 || ctx.Err() != nil {
			p.flushing = false
			p.release = p.release[:0]
			s.mu.Unlock()
			return
		}
		batch := make([]uint64, n)
		copy(batch, p.release)
		p.release = append(p.release[:0], p.release[n:]...)
		s.mu.Unlock()
		cctx, cancel := context.WithTimeout(ctx, c.cfg.Timeout)
		err := c.rpc.Call(cctx, addr, &transfer.ShmReleaseRequest{Leases: batch}, transfer.NewCountResponse(transfer.OpShmRelease, 0))
		cancel()
		if err != nil {
			// The leases end anyway: with their connection, or after the worker's lease TTL.
			c.log.Debug("client: releasing shared-memory leases", "worker", addr, "leases", n, "err", err)
		}
	}
}

// errShmFallback says a shared-memory read did not happen and the get should go over TCP.
var errShmFallback = errors.New("client: read over TCP")

// readShm reads the object from the replica's worker through shared memory. It returns
// errShmFallback when that path is not available for this worker or object (nothing read;
// buf may hold partial bytes that the TCP read overwrites), nil when buf holds the object
// (verified unless SkipChecksumVerify), or the error of the read.
func (c *Client) readShm(ctx context.Context, key string, r transfer.Replica, lr *transfer.LookupResponse, buf []byte) error {
	a := c.shm.acquire(ctx, c, r.Address)
	if a == nil {
		return errShmFallback
	}
	defer a.Release()
	var pin transfer.ShmPinResponse
	if err := c.rpc.Call(ctx, r.Address, &transfer.ShmPinRequest{Key: key, Version: lr.Version}, &pin); err != nil {
		var answer *base.CodeError
		switch {
		case errors.Is(err, base.ErrNotSupported):
			return errShmFallback // not in the shared arena (e.g. an NVMe read into a heap buffer)
		case !errors.As(err, &answer) && ctx.Err() == nil:
			// No answer at all: the worker may be gone for good. Unmap now rather than keep
			// its whole arena alive in this process (a mapping outlives the worker); the
			// next get that reaches it maps it again.
			c.shm.forget(r.Address, a)
		}
		return err
	}
	// The lease is ours from here: release it on every path.
	copied, err := c.copyPinned(a, &pin, lr, buf)
	if errors.Is(err, errShmArenaChanged) {
		c.shm.forget(r.Address, a)
		err = errShmFallback
	}
	if !c.cfg.SkipChecksumVerify {
		// The checksum is the proof that buf holds the object's bytes, whatever happened to
		// the lease during the copy, so the release need not be waited for: it is batched
		// with other gets' and sent by a flusher.
		c.shm.releaseLater(c, r.Address, pin.Lease)
		switch {
		case err != nil:
			return err
		case copied != lr.Checksum:
			// Not a corruption verdict: the lease may have ended during the copy (its
			// connection broke) and the range been reused. TCP reads the object again, and
			// its own check decides.
			c.log.Debug("client: shared-memory copy failed its checksum; reading over TCP", "key", key, "worker", r.WorkerID)
			return errShmFallback
		}
		return nil
	}
	// Unverified: only the worker's word that the lease held through the copy makes the
	// bytes trustworthy.
	held := transfer.NewCountResponse(transfer.OpShmRelease, 0)
	rerr := c.rpc.Call(ctx, r.Address, &transfer.ShmReleaseRequest{Leases: []uint64{pin.Lease}}, held)
	switch {
	case err != nil:
		return err
	case rerr != nil, held.Count != 1:
		// No answer, or the lease had ended during the copy (its connection broke, or its
		// TTL passed): the range may have been reused under us. Read again over TCP.
		return errShmFallback
	}
	return nil
}

var errShmArenaChanged = errors.New("client: the worker's shared arena changed")

// copyPinned copies the leased range into buf, hashing each chunk after it lands (unless
// SkipChecksumVerify), and returns the checksum.
func (c *Client) copyPinned(a *transfer.SharedArena, pin *transfer.ShmPinResponse, lr *transfer.LookupResponse, buf []byte) (uint64, error) {
	switch {
	case pin.ArenaID != a.ArenaID():
		return 0, errShmArenaChanged
	case pin.Version != lr.Version:
		return 0, fmt.Errorf("%w: worker pinned version %d, want %d", base.ErrInvalidVersion, pin.Version, lr.Version)
	case pin.Size != lr.Size || pin.Length != lr.Size || int64(len(buf)) != lr.Size:
		return 0, fmt.Errorf("%w: worker pinned %d bytes of %d, want %d", base.ErrCorruption, pin.Length, pin.Size, lr.Size)
	}
	src, err := a.Bytes(pin.ArenaOffset, pin.Length)
	if err != nil {
		return 0, err
	}
	if c.cfg.SkipChecksumVerify {
		copy(buf, src)
		return 0, nil
	}
	h := base.NewChecksum()
	for off := 0; off < len(src); off += shmChunk {
		end := min(off+shmChunk, len(src))
		copy(buf[off:end], src[off:end])
		h.Write(buf[off:end]) // hash what the caller gets, from the cache
	}
	return h.Sum64(), nil
}
