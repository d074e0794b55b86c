package worker

import (
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/mooncake-go/mooncake/internal/base"
	"github.com/mooncake-go/mooncake/tier"
	"github.com/mooncake-go/mooncake/transfer"
)

// The write assembly: objects being written (a Write's chunks land straight in a tier.Writer's
// arena range, striped chunks in any order and in parallel), their commit, and the drops
// that meet them. One state type, writes (Worker.pend), under one lock; the methods of writes
// change that state only, the Worker's methods here around them call the tier engine and
// count metrics, outside the lock.
//
// Drops, and how they meet local commits.
//
// The master owes a worker a drop of every version of a key it placed there except the one
// it lists (docs/tier.md, "Upserts"): a put revoked, refused, timed out or superseded, the
// version an upsert replaced, a removed key. The tier engine keeps a replaced version until
// its drop (tier/supersede.go), and makes it current again when the drop of the version that
// replaced it comes first. That only works if no drop is lost on the way, so two windows are
// closed here:
//
//  1. A drop that arrives while its version is being committed (pending.committing): the
//     pending entry stays in pend.m until the commit returns, the drop marks it, and the
//     committer removes what it just committed (commitPending).
//  2. A drop that arrives before any byte of its version (a put superseded before its client
//     wrote, a slow client): the drop is remembered for PendingWriteTimeout (pend.dropped),
//     and a write of that version is refused. A write later than that commits and is held
//     until the worker's next registration settles it (the master drops what it does not
//     list). A drop of a version this worker held is not remembered: repair and drain copy
//     committed versions with plain writes, and may bring that version back here.

// maxDropTombstones bounds pend.dropped: 65,536 entries of a 64-byte key take ~8 MiB. Past
// it a drop is not remembered (window 2 reopens for it; nothing else changes).
const maxDropTombstones = 1 << 16

type pendKey struct {
	key string
	v   base.Version
}

// pending is an object being written: Writes landed (or landing) in w.Bytes(), no Commit yet.
// All fields are guarded by writes' lock.
type pending struct {
	w        *tier.Writer
	size     int64
	received int64     // payload bytes landed (a resent chunk counts twice)
	inflight int       // Write payloads being read into w.Bytes() right now
	deadline time.Time // dropped by the sweeper after this, unless inflight > 0
	// failed: a chunk failed, or the write was dropped/expired, while others were in flight;
	// the last one to finish aborts w. Invariant: failed entries are no longer in pend.m.
	failed bool
	// committing: every byte landed and w.Commit runs (commitPending); the entry stays in
	// pend.m until it returns, so a drop meanwhile is not lost: it sets dropped, and the
	// committer removes the version it just committed.
	committing, dropped bool
}

// writes is the write assembly's state: the pending objects and the drops remembered for
// versions with no pending write. Its methods named ...Locked require its lock.
type writes struct {
	sync.Mutex // protects m, allocating, dropped and every pending's fields
	m          map[pendKey]*pending
	// allocating holds the objects whose first chunk's tier Put runs (no entry in m yet):
	// the other chunks of one wait for it rather than each allocate the whole object
	// (allocatePending).
	allocating map[pendKey]*allocation
	// dropped remembers, until the time given, drops of versions that had no pending
	// write here: a write of one arriving later is refused. At most maxDropTombstones
	// entries.
	dropped map[pendKey]time.Time
}

func newWrites() writes {
	return writes{m: map[pendKey]*pending{}, allocating: map[pendKey]*allocation{}, dropped: map[pendKey]time.Time{}}
}

// allocation is the tier Put of an object's arena range that its first chunk runs. done is
// closed when it ends; err (set before) says why it failed, and is every waiting chunk's
// answer too.
type allocation struct {
	done chan struct{}
	err  error
}

// forWriteLocked returns the pending object a chunk of k (an object of size bytes) belongs
// to (nil: none yet), or why the chunk is refused: the object is committing, its first chunk
// gave another size, or the put was dropped.
func (s *writes) forWriteLocked(k pendKey, size int64) (*pending, error) {
	p := s.m[k]
	switch {
	case p != nil && p.committing:
		return nil, fmt.Errorf("%w: write of %q version %d: already committing", base.ErrInvalidParams, k.key, k.v)
	case p != nil && p.size != size:
		return nil, fmt.Errorf("%w: write of %q: size %d differs from the first chunk's %d", base.ErrInvalidParams, k.key, size, p.size)
	case p == nil && s.droppedLocked(k):
		return nil, fmt.Errorf("%w: write of %q version %d: the put was dropped (revoked, expired or superseded)", base.ErrObjectNotFound, k.key, k.v)
	}
	return p, nil
}

// chunkDone records the end of one chunk of p (n bytes; err its failure). It reports whether
// the caller must abort p's writer (the last chunk in flight of a failed write) and whether
// it must commit p (a whole object in one chunk with commit set, nothing failed).
func (s *writes) chunkDone(k pendKey, p *pending, n int64, err error, commit bool) (abort, doCommit bool) {
	s.Lock()
	defer s.Unlock()
	p.inflight--
	if err != nil {
		if !p.failed {
			p.failed = true
			if s.m[k] == p {
				delete(s.m, k)
			}
		}
	} else {
		p.received += n
	}
	abort = p.failed && p.inflight == 0
	doCommit = err == nil && commit && !p.failed
	if doCommit {
		p.committing = true // stays in pend.m until commitPending returns
	}
	return abort, doCommit
}

// startCommit marks k's pending object committing once every chunk landed, or says why it
// cannot commit (timeout names the pending write timeout in the error).
func (s *writes) startCommit(k pendKey, timeout time.Duration) (*pending, error) {
	s.Lock()
	defer s.Unlock()
	p := s.m[k]
	switch {
	case p == nil:
		return nil, fmt.Errorf("%w: commit of %q version %d: no write in progress (it expired after %v or was dropped)",
			base.ErrObjectNotFound, k.key, k.v, timeout)
	case p.committing:
		return nil, fmt.Errorf("%w: commit of %q version %d: already committing", base.ErrInvalidParams, k.key, k.v)
	case p.inflight > 0:
		return nil, fmt.Errorf("%w: commit of %q while chunks are still arriving", base.ErrReplicaNotReady, k.key)
	case p.received < p.size:
		return nil, fmt.Errorf("%w: commit of %q: %d of %d bytes received", base.ErrReplicaNotReady, k.key, p.received, p.size)
	}
	p.committing = true // stays in pend.m until commitPending returns
	return p, nil
}

// endCommit takes p, committed (or not), out of the table; it reports whether a drop of k
// came while it committed.
func (s *writes) endCommit(k pendKey, p *pending) (dropped bool) {
	s.Lock()
	defer s.Unlock()
	if s.m[k] == p {
		delete(s.m, k)
	}
	return p.dropped
}

// dropLocked applies a drop of key at v (0: every version) to the pending writes: entries
// not committing leave the table, and those with no chunk in flight are returned for the
// caller to abort; a committing one is marked for its committer. A drop of one version with
// no pending write is remembered until ttl from now; remembered says so.
func (s *writes) dropLocked(key string, v base.Version, now time.Time, ttl time.Duration) (abort []*pending, remembered bool) {
	take := func(k pendKey, p *pending) {
		if p.committing {
			p.dropped = true // commitPending removes it once committed
			return
		}
		delete(s.m, k)
		if p.inflight == 0 {
			abort = append(abort, p)
		} else {
			p.failed = true
		}
	}
	if v != 0 {
		// One version: one map entry. Heartbeat replies and registrations hand out drops by
		// the thousand, so this must not scan every pending write.
		k := pendKey{key, v}
		if p := s.m[k]; p != nil {
			take(k, p)
		} else {
			// Before the engine's Remove, under the lock: a write of v that starts after
			// this is refused (beginWrite) until the Remove has shown v was not held here.
			remembered = s.rememberDropLocked(k, now, ttl)
		}
	} else {
		for k, p := range s.m {
			if k.key == key {
				take(k, p)
			}
		}
	}
	return abort, remembered
}

// rememberDropLocked records a drop of k, which has no pending write, until ttl from now;
// false when the table is full.
func (s *writes) rememberDropLocked(k pendKey, now time.Time, ttl time.Duration) bool {
	if len(s.dropped) >= maxDropTombstones {
		s.pruneDroppedLocked(now)
		if len(s.dropped) >= maxDropTombstones {
			return false
		}
	}
	s.dropped[k] = now.Add(ttl)
	return true
}

// droppedLocked reports whether a drop of k was remembered.
func (s *writes) droppedLocked(k pendKey) bool {
	_, ok := s.dropped[k]
	return ok
}

// pruneDroppedLocked forgets drops remembered past their time.
func (s *writes) pruneDroppedLocked(now time.Time) {
	for k, until := range s.dropped {
		if now.After(until) {
			delete(s.dropped, k)
		}
	}
}

// expire takes out the writes past their deadline with no chunk in flight and not
// committing (the caller aborts them), and forgets drops remembered past their time.
func (s *writes) expire(now time.Time) (abort []*pending, keys []pendKey) {
	s.Lock()
	defer s.Unlock()
	s.pruneDroppedLocked(now)
	for k, p := range s.m {
		if p.inflight == 0 && !p.committing && now.After(p.deadline) {
			delete(s.m, k)
			abort = append(abort, p)
			keys = append(keys, k)
		}
	}
	return abort, keys
}

// abortAll ends every pending write at shutdown but those committing (their commit, still
// running, ends them): idle ones are aborted, ones with a chunk in flight marked failed.
func (s *writes) abortAll() {
	s.Lock()
	defer s.Unlock()
	for k, p := range s.m {
		if p.committing {
			continue // its commit, still running (a drain cut short), ends it
		}
		delete(s.m, k)
		if p.inflight == 0 {
			p.w.Abort()
		} else {
			p.failed = true // NB: cannot happen after the drain; kept for safety
		}
	}
}

// validateWrite checks a Write's request for a chunk of n bytes before any state is touched.
func validateWrite(req *transfer.WriteRequest, n int64) error {
	if err := base.ValidateKey(req.Key); err != nil {
		return err
	}
	if req.Version == 0 {
		return fmt.Errorf("%w: write of %q without a version (PutStart gives one)", base.ErrInvalidParams, req.Key)
	}
	if req.TotalSize <= 0 || req.Offset < 0 || n < 0 || req.Offset > req.TotalSize || n > req.TotalSize-req.Offset {
		return fmt.Errorf("%w: write of %q: chunk [%d, +%d) outside an object of %d bytes",
			base.ErrInvalidParams, req.Key, req.Offset, n, req.TotalSize)
	}
	if req.Commit && (req.Offset != 0 || n != req.TotalSize) {
		return fmt.Errorf("%w: write of %q with commit must carry the whole object", base.ErrInvalidParams, req.Key)
	}
	return nil
}

// beginWrite finds or creates the pending object of req and returns the sink for one chunk.
func (w *Worker) beginWrite(req *transfer.WriteRequest, n int64) (transfer.WriteSink, error) {
	if w.closing.Load() {
		return transfer.WriteSink{}, fmt.Errorf("%w: worker %s is shutting down", base.ErrUnavailable, w.id)
	}
	if err := validateWrite(req, n); err != nil {
		return transfer.WriteSink{}, err
	}
	k := pendKey{req.Key, req.Version}
	w.pend.Lock()
	var p *pending
	for p == nil {
		var err error
		if p, err = w.pend.forWriteLocked(k, req.TotalSize); err != nil {
			w.pend.Unlock()
			return transfer.WriteSink{}, err
		}
		if p != nil {
			break
		}
		if a := w.pend.allocating[k]; a != nil {
			// Another chunk of the object is allocating it: wait for its range, then look
			// again (a drop may have come meanwhile).
			w.pend.Unlock()
			if f := w.testWritePhase.Load(); f != nil {
				(*f)("waiting", k.key, k.v)
			}
			<-a.done
			if a.err != nil {
				return transfer.WriteSink{}, a.err
			}
			w.pend.Lock()
			continue
		}
		if p, err = w.allocatePending(k, req); err != nil {
			return transfer.WriteSink{}, err
		}
	}
	p.inflight++
	dst := p.w.Bytes()[req.Offset : req.Offset+n]
	w.pend.Unlock()

	commit, checksum, off := req.Commit, req.Checksum, req.Offset
	return transfer.WriteSink{
		Dst:  dst,
		Done: func(err error) error { return w.finishChunk(k, p, off, n, err, commit, checksum) },
	}, nil
}

// allocatePending makes k's pending object for the first chunk of req that finds none: the
// tier Put of its whole arena range. The Put may evict inline, wait on the spill queue or
// wait for the master's drops of superseded versions, so it runs without the writes' lock,
// which applying those drops takes (drop). Chunks of k that arrive meanwhile wait for it
// (writes.allocating): each running a Put of its own would allocate the whole object again,
// and of an object larger than half the free DRAM the second Put fails (NO_AVAILABLE_HANDLE,
// failing the write) after evicting objects for nothing. A drop of the version that came
// meanwhile refuses the write (and its waiting chunks).
// REQUIRES: the writes' lock, no pending object or allocation of k; the lock is held again on
// return when err is nil, released otherwise.
func (w *Worker) allocatePending(k pendKey, req *transfer.WriteRequest) (*pending, error) {
	a := &allocation{done: make(chan struct{})}
	w.pend.allocating[k] = a
	w.pend.Unlock()
	wr, err := w.eng.Put(req.Key, req.Version, req.TotalSize, tier.PutOptions{
		Persistence: req.Persistence, SoftPinTTL: req.SoftPinTTL, HardPin: req.HardPin, Model: req.Model})
	if err == nil {
		if f := w.testWritePhase.Load(); f != nil {
			(*f)("allocated", k.key, k.v)
		}
	}
	w.pend.Lock()
	delete(w.pend.allocating, k)
	if err == nil {
		// Nothing else made k's entry (its chunks waited), but a drop may have come.
		_, err = w.pend.forWriteLocked(k, req.TotalSize)
	}
	a.err = err
	close(a.done)
	if err != nil {
		w.pend.Unlock()
		if wr != nil {
			wr.Abort()
		}
		return nil, err
	}
	p := &pending{w: wr, size: req.TotalSize, deadline: w.now().Add(w.cfg.PendingWriteTimeout)}
	w.pend.m[k] = p
	return p, nil
}

// finishChunk ends one chunk of p (at off, n bytes; err its failure): it hashes what landed,
// updates the state, aborts or commits as the state says, and counts the call.
func (w *Worker) finishChunk(k pendKey, p *pending, off, n int64, err error, commit bool, checksum uint64) error {
	if err == nil {
		// Hash the chunk now, while later stripes are still arriving, so Commit makes no
		// second pass. Before inflight drops: nothing aborts or commits p.w while a chunk is
		// in flight.
		p.w.Landed(off, n)
	}
	abort, doCommit := w.pend.chunkDone(k, p, n, err, commit)
	if abort {
		p.w.Abort()
	}
	if err != nil {
		w.met.observe(wopWrite, err)
		return err
	}
	w.pend.Lock()
	failed := p.failed
	w.pend.Unlock()
	if failed {
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
}

// commit makes a striped write visible once every chunk landed.
func (w *Worker) commit(req *transfer.CommitRequest) error {
	k := pendKey{req.Key, req.Version}
	p, err := w.pend.startCommit(k, w.cfg.PendingWriteTimeout)
	if err != nil {
		return err
	}
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

// commitPending commits p, a pending write of k whose bytes all landed. The caller set
// p.committing under the writes' lock (p stays in pend.m meanwhile, so a drop of k marks it
// rather than being lost). A drop that came meanwhile undoes the commit: the version it
// replaced is current again (tier/supersede.go) and the write fails.
func (w *Worker) commitPending(k pendKey, p *pending, checksum uint64) error {
	if f := w.testBeforeCommit.Load(); f != nil {
		(*f)(k.key, k.v)
	}
	err := p.w.Commit(checksum)
	dropped := w.pend.endCommit(k, p)
	if err != nil || !dropped {
		return err
	}
	if rerr := w.eng.Remove(k.key, k.v); rerr != nil && !errors.Is(rerr, base.ErrObjectNotFound) && !errors.Is(rerr, base.ErrInvalidVersion) {
		w.log.Warn("drop failed", "key", k.key, "version", k.v, "err", rerr)
	}
	return fmt.Errorf("%w: write of %q version %d was dropped (revoked, expired or superseded) while it committed", base.ErrObjectNotFound, k.key, k.v)
}

// drop aborts a pending write of key at v, or removes the committed object at v (0: any).
// A version being committed is removed by its committer; one not seen yet is remembered.
func (w *Worker) drop(key string, v base.Version) error {
	now := w.now()
	w.pend.Lock()
	abort, remembered := w.pend.dropLocked(key, v, now, w.cfg.PendingWriteTimeout)
	w.pend.Unlock()
	for _, p := range abort {
		p.w.Abort()
	}
	err := w.eng.Remove(key, v)
	if remembered && err == nil {
		// v was held here (committed): not a put that never arrived. Repair and drain may
		// copy that very version here again later, so the drop is not remembered.
		w.pend.Lock()
		delete(w.pend.dropped, pendKey{key, v})
		w.pend.Unlock()
	}
	if len(abort) > 0 && errors.Is(err, base.ErrObjectNotFound) {
		return nil
	}
	return err
}
