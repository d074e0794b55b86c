package lifecycle

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/mooncake-go/mooncake/internal/base"
)

// SessionLimits bound the inventory a leader accumulates from paged registrations. Past a
// bound the page is refused and the session dropped; the defaults are far above a real
// worker (a million objects with 64-byte keys is about 110 MiB) and exist so that a buggy or
// hostile sender cannot exhaust the leader's memory.
type SessionLimits struct {
	// PerWorkerObjects bounds one session's objects. Default 1<<26 (67 million).
	PerWorkerObjects int
	// PerWorkerBytes bounds one session's estimated heap. Default 8 GiB.
	PerWorkerBytes int64
	// TotalBytes bounds every session's estimated heap together. Default 16 GiB.
	TotalBytes int64
	// TTL drops a session whose next page has not arrived within it (a worker that died or
	// gave up mid-way); the worker starts over from page 0. Default 2 min.
	TTL time.Duration
}

func (l *SessionLimits) ensureDefaults() {
	if l.PerWorkerObjects == 0 {
		l.PerWorkerObjects = 1 << 26
	}
	if l.PerWorkerBytes == 0 {
		l.PerWorkerBytes = 8 << 30
	}
	if l.TotalBytes == 0 {
		l.TotalBytes = 16 << 30
	}
	if l.TTL == 0 {
		l.TTL = 2 * time.Minute
	}
}

// session is one paged registration in progress (a new leader knows none: the worker starts
// over).
type session struct {
	id uint64
	// next is the page number expected next. Invariant: next == len(pages).
	next uint32
	// began is when page 0 arrived: the registration's reconciliation counts from it (objects
	// created after it are never taken as lost). last is when the latest page arrived.
	began, last time.Time
	// pages are the inventory pages received so far, as decoded (no copy is made).
	pages [][]base.ObjectMeta
	// objects and bytes count the entries in pages and their estimated heap.
	objects int
	bytes   int64
}

type sessionState struct {
	byWorker map[base.WorkerID]*session
	// bytes is the sum of the sessions' bytes.
	bytes int64
}

func newSessionState() sessionState { return sessionState{byWorker: map[base.WorkerID]*session{}} }

func (s *sessionState) drop(id base.WorkerID) {
	if x := s.byWorker[id]; x != nil {
		s.bytes -= x.bytes
		delete(s.byWorker, id)
	}
}

// RegisterPage takes one page of a paged registration of worker id (session non-zero) with
// inv, whose estimated heap is size bytes. Pages with more set are kept; the final page
// (more false) returns every earlier page and page 0's arrival time, and done. The rules:
//  1. Only the leader accumulates; a new leader knows no session.
//  2. Page 0 starts a session and replaces any older one of the worker (its attempt was
//     abandoned: the worker starts each attempt over with a new session id).
//  3. Any other page must carry the session's id and the next page number, and arrive within
//     TTL of the previous page; otherwise it is refused with UNAVAILABLE and the session
//     dropped, and the worker starts over from page 0 with a new session.
//  4. A page that would take the session, or all sessions, past SessionLimits is refused with
//     UNAVAILABLE (too large) and the session dropped.
//
// An accepted page also counts as a sign of life (touch): the worker does not heartbeat while
// it sends pages.
func (m *Machine) RegisterPage(now time.Time, id base.WorkerID, sessionID uint64, page uint32, more bool,
	inv []base.ObjectMeta, size int64) (earlier [][]base.ObjectMeta, began time.Time, done bool, err error) {
	ss := &m.sessions
	s := ss.byWorker[id]
	lim := m.cfg.Sessions
	var refuse string
	switch {
	case !m.leader:
		refuse = "this master does not lead"
	case page == 0:
		ss.drop(id)
		s = &session{id: sessionID, began: now}
	case s == nil:
		refuse = "no registration in progress (this leader never saw page 0, or the session expired or was replaced)"
	case s.id != sessionID:
		refuse = fmt.Sprintf("another registration (session %016x) replaced this one", s.id)
	case s.next != page:
		refuse = fmt.Sprintf("page out of order: expected page %d", s.next)
	case now.Sub(s.last) > lim.TTL:
		refuse = fmt.Sprintf("the session expired (no page for %s)", lim.TTL)
	}
	if refuse == "" && more {
		switch {
		case s.objects+len(inv) > lim.PerWorkerObjects || s.bytes+size > lim.PerWorkerBytes:
			refuse = fmt.Sprintf("%v: the inventory exceeds the leader's bound for one worker (%d objects, %s)",
				base.ErrTooLarge, lim.PerWorkerObjects, base.Bytes(lim.PerWorkerBytes))
		case ss.bytes+size > lim.TotalBytes:
			refuse = fmt.Sprintf("%v: registrations in progress hold %s, the leader's bound is %s; retry later",
				base.ErrTooLarge, base.Bytes(ss.bytes), base.Bytes(lim.TotalBytes))
		}
	}
	if refuse != "" {
		if cur := ss.byWorker[id]; cur != nil && (page == 0 || cur.id == sessionID) {
			ss.drop(id)
		}
		return nil, time.Time{}, false, fmt.Errorf("%w: worker %s registration session %016x page %d refused: %s; register again from page 0",
			base.ErrUnavailable, id, sessionID, page, refuse)
	}
	m.touch(now, id)
	if more {
		s.pages = append(s.pages, inv)
		s.next++
		s.last = now
		s.objects += len(inv)
		s.bytes += size
		ss.bytes += size
		ss.byWorker[id] = s
		return nil, time.Time{}, false, nil
	}
	if ss.byWorker[id] == s {
		ss.drop(id)
	}
	return s.pages, s.began, true, nil
}

// ExpireSessions drops the registrations idle for the session TTL and reports each
// (SessionExpired), in worker order.
func (m *Machine) ExpireSessions(now time.Time) []Effect {
	var out []Effect
	for id, s := range m.sessions.byWorker {
		if idle := now.Sub(s.last); idle > m.cfg.Sessions.TTL {
			out = append(out, SessionExpired{ID: id, Pages: len(s.pages), Objects: s.objects, Idle: idle})
			m.sessions.drop(id)
		}
	}
	slices.SortFunc(out, func(a, b Effect) int {
		return strings.Compare(string(a.(SessionExpired).ID), string(b.(SessionExpired).ID))
	})
	return out
}

// Sessions returns the registrations in progress and their estimated heap.
func (m *Machine) Sessions() (n int, bytes int64) {
	return len(m.sessions.byWorker), m.sessions.bytes
}
