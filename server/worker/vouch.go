package worker

import (
	"sync"
	"sync/atomic"
	"time"
)

// vouch is the worker's standing to serve reads from kept lookups (ReadRequest.Cached:
// placements a client learned longer ago than its lookup cache's TTL). Such a read may return
// a version only if any removal or replacement of it acknowledged more than vouchWindow ago
// has reached this worker as a drop. The worker knows that while the leader's heartbeat
// answers say it owes nothing more (HeartbeatResponse.Settled) and none of its heartbeat
// calls failed since its last registration: a failed call's answer may have carried drops
// that are now lost (the leader hands each drop out once), and only a registration, whose
// reconciliation drops whatever the metadata no longer lists, makes up for them
// (docs/protocol.md, "Reads from a kept lookup").
//
// until is read on every such read without a lock; the rest is guarded by mu.
type vouch struct {
	until atomic.Int64 // UnixNano: reads from kept lookups are served before it

	mu struct {
		sync.Mutex
		failures   uint64 // heartbeat calls that failed
		reconciled uint64 // of those, the ones a registration that started after them reconciled
		fetching   int    // early drop fetches in flight (worker_drop.go)
	}
}

// vouchWindow is how long one settled answer lets the worker vouch, from when its heartbeat
// was sent: one and a half heartbeat intervals, so a worker that heartbeats on time never
// stops vouching, and a removal acknowledged more than that ago was dropped here first.
func vouchWindow(interval time.Duration) time.Duration { return interval * 3 / 2 }

// ok reports whether a read from a kept lookup may be served at now.
func (v *vouch) ok(now time.Time) bool { return now.UnixNano() < v.until.Load() }

// fetchStarted records an early drop fetch in flight: a settled answer to another heartbeat
// does not count while it is (its drops may not be applied yet).
func (v *vouch) fetchStarted() {
	v.mu.Lock()
	v.mu.fetching++
	v.mu.Unlock()
}

// failed records a heartbeat call that failed (fetch: an early drop fetch): the worker stops
// vouching until a registration that starts after now has completed.
func (v *vouch) failed(fetch bool) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if fetch {
		v.mu.fetching--
	}
	v.mu.failures++
	v.until.Store(0)
}

// answered records a heartbeat call's answer, its drops applied: sent is when the call was
// sent, settled the answer's Settled, reregister its Reregister (the leader may have cleared
// the drops it owed: no vouching until the registration it asks for).
func (v *vouch) answered(fetch, settled, reregister bool, sent time.Time, window time.Duration) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if fetch {
		v.mu.fetching--
	}
	switch {
	case reregister:
		v.until.Store(0)
	case settled && v.mu.failures == v.mu.reconciled && v.mu.fetching == 0:
		v.until.Store(sent.Add(window).UnixNano())
	}
}

// registering returns the failures a registration starting now will reconcile; pass it to
// registered when the registration completes.
func (v *vouch) registering() uint64 {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.mu.failures
}

// registered records a completed registration that started when registering returned
// failures. The worker vouches again from the next settled answer.
func (v *vouch) registered(failures uint64) {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.mu.reconciled = max(v.mu.reconciled, failures)
}
