package worker

import (
	"errors"
	"time"

	"github.com/mooncake-go/mooncake/internal/base"
)

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
// the control loop last talked to. A failed one asks the control loop to register again: its
// answer may have carried drops, which the leader hands out once (vouch.go).

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
			n, _, err := w.heartbeatDrops(addr, false) // no stats: see heartbeatRequest
			if err != nil {
				// Its answer's drops, if one was sent, are lost: heartbeatDrops asked the control
				// loop to register again, whose reconciliation drops them.
				w.log.Debug("early drop fetch failed; registering again to reconcile what its answer carried", "leader", addr, "err", err)
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

// applyDrops removes what the master says this worker must not hold: pending writes of a
// revoked or expired put, and committed objects removed or unknown to the master. A drop of a
// version the worker does not hold is a no-op.
func (w *Worker) applyDrops(kvs []base.KeyVersion) {
	for _, kv := range kvs {
		if err := w.drop(kv.Key, kv.Version); err != nil && !errors.Is(err, base.ErrObjectNotFound) && !errors.Is(err, base.ErrInvalidVersion) {
			w.log.Warn("drop failed", "key", kv.Key, "version", kv.Version, "err", err)
		}
	}
}
