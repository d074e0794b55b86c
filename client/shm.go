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
// that worker's arena when it runs on this host (design.md section 5). A get then costs one
// small call (ShmPin; its ShmRelease is batched in the background) and one memory copy
// instead of a TCP transfer; a repeated get of the same version costs no call at all (an
// unpinned read, see readShm).
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
	// locs remembers where verified pinned reads found objects in arena (key and version ->
	// range), so later gets of the same version copy without a pin (readShm); at most
	// maxShmLocs entries. Dropped with the arena.
	locs map[base.KeyVersion]shmLoc
	// touch holds the unpinned reads to report with the next ShmTouch, sent by the flusher
	// (a set: a key read many times between two flushes is reported once; at most
	// maxShmTouchQueue, beyond which reads go unreported: touches only inform eviction).
	touch map[base.KeyVersion]struct{}
	// touchSince is when touch last went from empty to not: the flusher holds touches (but
	// not leases) until shmTouchDelay after it, so a hot loop of gets sends one ShmTouch per
	// delay instead of one per round trip.
	touchSince time.Time
	// noTouch says the worker does not take ShmTouch (an older build): without touches its
	// eviction order would not see unpinned reads, so every read pins.
	noTouch bool
}

// shmLoc is where a pin found one version of an object: n bytes at off in arena arenaID,
// while the key's copy generation is gen (read before the pin).
type shmLoc struct {
	arenaID uint64
	off, n  int64
	gen     uint64
}

// maxShmLocs bounds the object locations remembered per worker (about 100 bytes each plus
// the key).
const maxShmLocs = 1 << 16

// shmTouchDelay is how long unpinned reads wait to be reported, so they go in batches: a
// loop of 4 KiB gets otherwise sent a ShmTouch per round trip (thousands a second, each
// costing both processes CPU on a small machine), while eviction order needs no better
// than millisecond precision.
const shmTouchDelay = 2 * time.Millisecond

// maxShmTouchQueue bounds the unpinned reads waiting for a ShmTouch, per worker.
const maxShmTouchQueue = 4 * transfer.MaxShmTouch

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

// mapped returns addr's mapped arena with a reference the caller must Release, or nil when
// none is mapped now (it never maps: that takes a call to the worker).
func (s *shmPeers) mapped(addr string) *transfer.SharedArena {
	s.mu.Lock()
	defer s.mu.Unlock()
	if p := s.m[addr]; p != nil && !s.closed && p.arena != nil && p.arena.Acquire() {
		return p.arena
	}
	return nil
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
		p.locs = nil
		a.Close()
	}
}

// location returns where an earlier pin found kv in the current arena of addr (false: pin).
func (s *shmPeers) location(addr string, kv base.KeyVersion) (shmLoc, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	p := s.m[addr]
	if p == nil || p.noTouch {
		return shmLoc{}, false
	}
	l, ok := p.locs[kv]
	return l, ok
}

// known reports whether a pin found kv in some worker's mapped arena (a cheap filter before
// a no-wait get allocates its buffer).
func (s *shmPeers) known(kv base.KeyVersion) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, p := range s.m {
		if _, ok := p.locs[kv]; ok && p.arena != nil && !p.noTouch {
			return true
		}
	}
	return false
}

// remember records where a verified pinned read found kv in addr's arena.
func (s *shmPeers) remember(addr string, kv base.KeyVersion, l shmLoc) {
	s.mu.Lock()
	defer s.mu.Unlock()
	p := s.m[addr]
	if p == nil || p.noTouch || s.closed {
		return
	}
	if p.locs == nil {
		p.locs = make(map[base.KeyVersion]shmLoc)
	}
	if _, ok := p.locs[kv]; !ok && len(p.locs) >= maxShmLocs {
		for k := range p.locs { // full: drop an arbitrary entry (map order)
			delete(p.locs, k)
			break
		}
	}
	p.locs[kv] = l
}

// dropLocation forgets where kv was in addr's arena (a copy from there failed its checksum,
// or the worker said the object moved or went).
func (s *shmPeers) dropLocation(addr string, kv base.KeyVersion) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if p := s.m[addr]; p != nil {
		delete(p.locs, kv)
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
		p.locs = nil
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
	s.startFlushLocked(c, addr, p)
}

// touchLater queues an unpinned read of kv for a batched ShmTouch to addr, sent by the
// flusher: the worker's eviction order sees the read a round trip later.
func (s *shmPeers) touchLater(c *Client, addr string, kv base.KeyVersion) {
	s.mu.Lock()
	defer s.mu.Unlock()
	p := s.m[addr]
	if p == nil || s.closed {
		return
	}
	if p.touch == nil {
		p.touch = make(map[base.KeyVersion]struct{})
	}
	if len(p.touch) == 0 {
		p.touchSince = time.Now()
	}
	if len(p.touch) < maxShmTouchQueue {
		p.touch[kv] = struct{}{}
	}
	s.startFlushLocked(c, addr, p)
}

// startFlushLocked starts p's flusher unless it runs. REQUIRES: s.mu.
func (s *shmPeers) startFlushLocked(c *Client, addr string, p *shmPeer) {
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

// flush sends p's queued leases and touches until none is left.
func (s *shmPeers) flush(ctx context.Context, c *Client, addr string, p *shmPeer) {
	defer s.flushers.Done()
	for {
		s.mu.Lock()
		n := min(len(p.release), transfer.MaxShmRelease)
		if (n == 0 && len(p.touch) == 0) || ctx.Err() != nil {
			p.flushing = false
			p.release = p.release[:0]
			clear(p.touch)
			s.mu.Unlock()
			return
		}
		if wait := shmTouchDelay - time.Since(p.touchSince); n == 0 && wait > 0 {
			// Only touches: let more gather (shmTouchDelay).
			s.mu.Unlock()
			t := time.NewTimer(wait)
			select {
			case <-t.C:
			case <-ctx.Done():
				t.Stop()
			}
			continue
		}
		var leases []uint64
		if n > 0 {
			leases = make([]uint64, n)
			copy(leases, p.release)
			p.release = append(p.release[:0], p.release[n:]...)
		}
		var touches []base.KeyVersion
		for kv := range p.touch {
			if len(touches) == transfer.MaxShmTouch {
				break
			}
			touches = append(touches, kv)
			delete(p.touch, kv)
		}
		s.mu.Unlock()
		if len(leases) > 0 {
			cctx, cancel := context.WithTimeout(ctx, c.cfg.Timeout)
			err := c.rpc.Call(cctx, addr, &transfer.ShmReleaseRequest{Leases: leases}, transfer.NewCountResponse(transfer.OpShmRelease, 0))
			cancel()
			if err != nil {
				// The leases end anyway: with their connection, or after the worker's lease TTL.
				c.log.Debug("client: releasing shared-memory leases", "worker", addr, "leases", n, "err", err)
			}
		}
		if len(touches) > 0 {
			s.sendTouches(ctx, c, addr, touches)
		}
	}
}

// sendTouches reports unpinned reads to the worker at addr and forgets the locations its
// answer says are no longer the objects'.
func (s *shmPeers) sendTouches(ctx context.Context, c *Client, addr string, touches []base.KeyVersion) {
	cctx, cancel := context.WithTimeout(ctx, c.cfg.Timeout)
	defer cancel()
	resp := transfer.NewBatchResponse(transfer.OpShmTouch, nil)
	err := c.rpc.Call(cctx, addr, &transfer.ShmTouchRequest{Items: touches}, resp)
	var answer *base.CodeError
	switch {
	case err == nil && len(resp.Items) == len(touches):
	case err == nil:
		err = fmt.Errorf("%w: %d answers to %d touches", base.ErrInvalidParams, len(resp.Items), len(touches))
		fallthrough
	case errors.As(err, &answer):
		// An older worker (unknown opcode) or a refusal: read with pins from now on.
		c.log.Debug("client: worker refused ShmTouch; reading through pins", "worker", addr, "err", err)
		s.mu.Lock()
		if p := s.m[addr]; p != nil {
			p.noTouch, p.locs = true, nil
		}
		s.mu.Unlock()
		return
	default:
		// No answer: the worker may be gone. Unmap its arena (the next get maps it again, or
		// reads elsewhere) rather than keep copying objects it may no longer hold.
		if ctx.Err() == nil {
			c.log.Debug("client: touching shared-memory reads", "worker", addr, "err", err)
			s.mu.Lock()
			a := (*transfer.SharedArena)(nil)
			if p := s.m[addr]; p != nil {
				a = p.arena
			}
			s.mu.Unlock()
			if a != nil {
				s.forget(addr, a)
			}
		}
		return
	}
	for i, it := range resp.Items {
		if it.Code != base.CodeOK {
			// The object moved or went: the next get of it pins (or misses) as usual. The
			// cached lookup is left alone: it may already name a newer version, and a get of
			// the old one misses at the worker anyway.
			s.dropLocation(addr, touches[i])
		}
	}
}

// errShmFallback says a shared-memory read did not happen and the get should go over TCP.
var errShmFallback = errors.New("client: read over TCP")

// readShm reads the object from the replica's worker through shared memory. It returns
// errShmFallback when that path is not available for this worker or object (nothing read;
// buf may hold partial bytes that the TCP read overwrites), nil when buf holds the object
// (verified unless SkipChecksumVerify), or the error of the read.
//
// A get of a version this client read before from the same arena is unpinned: it copies from
// where the pin found the object, with no call to the worker. Why that is as safe as a pin:
//  1. The worker publishes copy generations (transfer.ShmGenTable, mapped with the arena):
//     a key's slot is bumped whenever a DRAM copy of a key hashing there stops being the
//     object's (removed, replaced, evicted, spilled), before its range can be freed. The
//     client reads the slot before sending the ShmPin and keeps the location with it; an
//     unpinned copy is used only if the slot still holds that value before and after the
//     copy. Unchanged means the pinned copy is still the index's copy of that version: the
//     same answer a ShmPin would give now, so a get sees another client's upsert or remove
//     on that worker exactly as soon as it does through a pin (lookupcache.go). A slot
//     shared with a busy key only sends gets back to pinning.
//  2. Whatever happened to the range, the copy's checksum must be the committed one
//     (lr.Checksum), computed over the bytes the caller gets (copyHashed hashes buf, not the
//     arena), so a torn or reused range can never pass.
//  3. The range is bounds-checked against the mapping (SharedArena.Bytes), and belongs to the
//     arena the pin named (arena id): a restarted worker's arena is never read at an old
//     offset.
//  4. The worker still sees the read: ShmTouch reports it to its eviction order, batched in
//     the background.
//
// With SkipChecksumVerify there is no proof, so every read pins and waits for its release.
func (c *Client) readShm(ctx context.Context, key string, r base.Placement, lr *transfer.LookupResponse, buf []byte) error {
	a := c.shm.acquire(ctx, c, r.Address)
	if a == nil {
		return errShmFallback
	}
	defer a.Release()
	if !c.cfg.SkipChecksumVerify && c.readUnpinned(a, key, r.Address, lr, buf) {
		return nil
	}
	kv := base.KeyVersion{Key: key, Version: lr.Version}
	gen, hasGen := a.Gen(key) // before the pin: a detach after this read changes it
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
		if pin.Tier == base.TierDRAM && hasGen {
			// The object's own DRAM copy (not a temporary range of an NVMe read, freed with
			// the lease): later gets of this version can copy from it unpinned while gen holds.
			c.shm.remember(r.Address, kv, shmLoc{arenaID: pin.ArenaID, off: pin.ArenaOffset, n: pin.Length, gen: gen})
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

// readShmNoWait is readShm's unpinned read alone, for GetIntoNoWait: true when buf holds
// the object; false (nothing sent, nothing waited for) when it needs a call to the worker.
func (c *Client) readShmNoWait(key string, r base.Placement, lr *transfer.LookupResponse, buf []byte) bool {
	a := c.shm.mapped(r.Address)
	if a == nil {
		return false
	}
	defer a.Release()
	return c.readUnpinned(a, key, r.Address, lr, buf)
}

// readUnpinned copies the object out of a (addr's mapped arena) from where an earlier pin
// found it, if its copy generation allows (readShm), and reports whether buf holds it.
func (c *Client) readUnpinned(a *transfer.SharedArena, key, addr string, lr *transfer.LookupResponse, buf []byte) bool {
	kv := base.KeyVersion{Key: key, Version: lr.Version}
	loc, ok := c.shm.location(addr, kv)
	if !ok {
		return false
	}
	if !copyUnpinned(a, key, loc, lr, buf) {
		c.shm.dropLocation(addr, kv)
		return false
	}
	c.shm.touchLater(c, addr, kv)
	c.reads.unpinned.Add(1)
	return true
}

// copyUnpinned copies the object from where a pin found it, into buf, and reports whether
// the copy is the object: key's copy generation is loc's before and after the copy, and the
// copy's checksum is lr's (readShm). A false leaves buf with unspecified bytes.
func copyUnpinned(a *transfer.SharedArena, key string, loc shmLoc, lr *transfer.LookupResponse, buf []byte) bool {
	if loc.arenaID != a.ArenaID() || loc.n != lr.Size || int64(len(buf)) != lr.Size || lr.Size == 0 {
		return false
	}
	if g, ok := a.Gen(key); !ok || g != loc.gen {
		return false
	}
	src, err := a.Bytes(loc.off, loc.n)
	if err != nil {
		return false
	}
	if copyHashed(buf, src) != lr.Checksum {
		return false
	}
	g, ok := a.Gen(key)
	return ok && g == loc.gen
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
	return copyHashed(buf, src), nil
}

// copyHashed copies src (len(dst) bytes) into dst chunk by chunk and returns the checksum of
// dst: of the bytes the caller gets, hashed from the cache right after each chunk lands, so
// a src that changes during the copy cannot make a torn dst pass.
func copyHashed(dst, src []byte) uint64 {
	h := base.NewChecksum()
	for off := 0; off < len(dst); off += shmChunk {
		end := min(off+shmChunk, len(dst))
		copy(dst[off:end], src[off:end])
		h.Write(dst[off:end])
	}
	return h.Sum64()
}
