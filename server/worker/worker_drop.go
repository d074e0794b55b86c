package worker

import (
	"errors"
	"fmt"
	"time"

	"github.com/mooncake-go/mooncake/internal/base"
	"github.com/mooncake-go/mooncake/transfer"
)

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

// Fetching drops early.
//
// Drops reach the worker in heartbeat replies, once a second. A version an upsert replaced is
// held until its drop (tier/supersede.go), so at GB/s of upserts a second of superseded
// versions outgrows the arena and puts would fail with "no space" for bytes already owed
// back. So the engine says when superseded versions hold many bytes (after a commit, past
// tier.Options.SupersededFetchBytes) and when a put starts waiting for them
// (SupersededHeld), and the drop fetcher (dropFetchLoop) heartbeats the leader at once to
// fetch the drops owed, again every dropFetchPoll while superseded bytes remain and drops
// keep coming, for at most dropFetchIdle without one (the master owes a drop only once it
// committed the replacing put, a moment after this worker did; a slow client's upsert can
// keep a version superseded for the whole put timeout). An early heartbeat is an ordinary
// one (the same request without its stats section, the same reply and drops), so no master
// or wire change is needed and a multi-master cluster works the same: it goes to the leader
// the control loop last talked to; its errors (not the leader, unknown worker) are left to
// the control loop.

const (
	// dropFetchPoll spaces the drop fetcher's heartbeats while none brings a drop: about a
	// raft commit on the master, so a drop owed waits at most that long.
	dropFetchPoll = 5 * time.Millisecond
	// dropFetchIdle ends a round of fetching that brings no drop (200 heartbeats): the
	// periodic heartbeat delivers what comes later, and the next kick starts a new round.
	dropFetchIdle = time.Second
)

// kickDropFetch wakes the drop fetcher; it never blocks (tier.EventListener.SupersededHeld).
func (w *Worker) kickDropFetch() {
	select {
	case w.dropKick <- struct{}{}:
	default:
	}
}

// dropFetchLoop is the drop fetcher (docs/threads.md): woken by kickDropFetch, it heartbeats
// the leader for the drops owed while superseded versions hold bytes (see "Fetching drops
// early" above). Stopped with the control loop, before Shutdown's leaving heartbeat.
func (w *Worker) dropFetchLoop() {
	defer w.loops.Done()
	t := time.NewTimer(dropFetchPoll)
	t.Stop() // NB: since Go 1.23 Stop and Reset discard a pending tick: no drain needed
	defer t.Stop()
	for {
		select {
		case <-w.stop:
			return
		case <-w.dropKick:
		}
		idle := 0
		for w.eng.SupersededBytes() > 0 && idle < int(dropFetchIdle/dropFetchPoll) {
			addr, _ := w.leader.Load().(string)
			n, err := w.heartbeatDrops(addr, false) // no stats: see heartbeatRequest
			if err != nil {
				w.log.Debug("early drop fetch failed; the control loop's heartbeat will bring them", "leader", addr, "err", err)
				break
			}
			w.dropFetch.fetches.Add(1)
			w.dropFetch.drops.Add(int64(n))
			if n > 0 {
				idle = 0
				continue // more may be owed (a reply carries at most MaxDropsPerHeartbeat)
			}
			idle++
			t.Reset(dropFetchPoll)
			select {
			case <-w.stop:
				return
			case <-t.C:
			case <-w.dropKick: // a put waits now: ask again at once
				t.Stop()
			}
		}
	}
}

// maxDropTombstones bounds pend.dropped: 65,536 entries of a 64-byte key take ~8 MiB. Past
// it a drop is not remembered (window 2 reopens for it; nothing else changes).
const maxDropTombstones = 1 << 16

// applyDrops removes what the master says this worker must not hold: pending writes of a
// revoked or expired put, and committed objects removed or unknown to the master. A drop of a
// version the worker does not hold is a no-op.
func (w *Worker) applyDrops(kvs []transfer.KeyVersion) {
	for _, kv := range kvs {
		if err := w.drop(kv.Key, kv.Version); err != nil && !errors.Is(err, base.ErrObjectNotFound) && !errors.Is(err, base.ErrInvalidVersion) {
			w.log.Warn("drop failed", "key", kv.Key, "version", kv.Version, "err", err)
		}
	}
}

// drop aborts a pending write of key at v, or removes the committed object at v (0: any).
// A version being committed is removed by its committer; one not seen yet is remembered.
func (w *Worker) drop(key string, v base.Version) error {
	now := w.now()
	w.pend.Lock()
	var abort []*pending
	take := func(k pendKey, p *pending) {
		if p.committing {
			p.dropped = true // commitPending removes it once committed
			return
		}
		delete(w.pend.m, k)
		if p.inflight == 0 {
			abort = append(abort, p)
		} else {
			p.failed = true
		}
	}
	remembered := false
	if v != 0 {
		// One version: one map entry. Heartbeat replies and registrations hand out drops by
		// the thousand, so this must not scan every pending write.
		k := pendKey{key, v}
		if p := w.pend.m[k]; p != nil {
			take(k, p)
		} else {
			// Before the engine's Remove, under pend: a write of v that starts after this
			// is refused (beginWrite) until the Remove has shown v was not held here.
			remembered = w.rememberDropLocked(k, now)
		}
	} else {
		for k, p := range w.pend.m {
			if k.key == key {
				take(k, p)
			}
		}
	}
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

// rememberDropLocked records a drop of k, which has no pending write, until
// PendingWriteTimeout from now; false when the table is full. REQUIRES: w.pend.
func (w *Worker) rememberDropLocked(k pendKey, now time.Time) bool {
	if len(w.pend.dropped) >= maxDropTombstones {
		w.pruneDroppedLocked(now)
		if len(w.pend.dropped) >= maxDropTombstones {
			return false
		}
	}
	w.pend.dropped[k] = now.Add(w.cfg.PendingWriteTimeout)
	return true
}

// droppedLocked reports whether a drop of k was remembered. REQUIRES: w.pend.
func (w *Worker) droppedLocked(k pendKey) bool {
	_, ok := w.pend.dropped[k]
	return ok
}

// pruneDroppedLocked forgets drops remembered past their time. REQUIRES: w.pend.
func (w *Worker) pruneDroppedLocked(now time.Time) {
	for k, until := range w.pend.dropped {
		if now.After(until) {
			delete(w.pend.dropped, k)
		}
	}
}

// commitPending commits p, a pending write of k whose bytes all landed. The caller set
// p.committing under w.pend (p stays in pend.m meanwhile, so a drop of k marks it rather
// than being lost). A drop that came meanwhile undoes the commit: the version it replaced
// is current again (tier/supersede.go) and the write fails.
func (w *Worker) commitPending(k pendKey, p *pending, checksum uint64) error {
	if f := w.testBeforeCommit.Load(); f != nil {
		(*f)(k.key, k.v)
	}
	err := p.w.Commit(checksum)
	w.pend.Lock()
	if w.pend.m[k] == p {
		delete(w.pend.m, k)
	}
	dropped := p.dropped
	w.pend.Unlock()
	if err != nil || !dropped {
		return err
	}
	if rerr := w.eng.Remove(k.key, k.v); rerr != nil && !errors.Is(rerr, base.ErrObjectNotFound) && !errors.Is(rerr, base.ErrInvalidVersion) {
		w.log.Warn("drop failed", "key", k.key, "version", k.v, "err", rerr)
	}
	return fmt.Errorf("%w: write of %q version %d was dropped (revoked, expired or superseded) while it committed", base.ErrObjectNotFound, k.key, k.v)
}
