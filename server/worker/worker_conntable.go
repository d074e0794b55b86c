package worker

import (
	"context"
	"errors"
	"math/rand/v2"
	"sync"
)

var (
	errTableClosed = errors.New("server: the worker is shutting down")
	errTableFull   = errors.New("server: too many held")
)

// connHeld is something a client on this host holds on the worker through one of its
// connections: a shared-memory lease (worker_shm.go) or a staging area (worker_shmput.go).
// end lets it go; the table calls it exactly once, outside its lock.
type connHeld interface{ end() }

// connTable holds the connHeld things of clients under random 64-bit ids, so a client
// cannot end or use another's by guessing. An entry ends exactly once, by the first of: end
// (the client's call), the end of the connection that made it (endWith), a sweep (endIf), or
// closeAll (Shutdown, which also refuses new entries). The zero value is ready to use.
type connTable[T connHeld] struct {
	mu     sync.Mutex // protects m and closed; a leaf lock but for lookup's fn (entries end outside it)
	m      map[uint64]*connEntry[T]
	closed bool
}

type connEntry[T connHeld] struct {
	v T
	// stop cancels the context.AfterFunc that ends the entry with its connection; guarded by
	// connTable.mu (set after the entry is in the table).
	stop func() bool
}

// add puts v in the table under a fresh random non-zero id. It fails (and v stays the
// caller's) with errTableClosed after closeAll, or errTableFull when limit > 0 entries are
// held.
func (t *connTable[T]) add(v T, limit int) (uint64, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	switch {
	case t.closed:
		return 0, errTableClosed
	case limit > 0 && len(t.m) >= limit:
		return 0, errTableFull
	}
	if t.m == nil {
		t.m = make(map[uint64]*connEntry[T])
	}
	for {
		id := rand.Uint64()
		if _, dup := t.m[id]; id != 0 && !dup {
			t.m[id] = &connEntry[T]{v: v}
			return id, nil
		}
	}
}

// endWith ends entry id when ctx (the connection that made it) ends; at once if it already
// has. Call it after add.
func (t *connTable[T]) endWith(ctx context.Context, id uint64) {
	stop := context.AfterFunc(ctx, func() { t.end(id) })
	t.mu.Lock()
	e, ok := t.m[id]
	if ok {
		e.stop = stop
	}
	t.mu.Unlock()
	if !ok {
		stop()
	}
}

// lookup calls fn with entry id under the table's lock and reports whether there is one. fn
// must be quick and take no lock but leaf ones.
func (t *connTable[T]) lookup(id uint64, fn func(T)) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	e, ok := t.m[id]
	if ok {
		fn(e.v)
	}
	return ok
}

// end ends entry id if it is still held and reports whether it was.
func (t *connTable[T]) end(id uint64) bool {
	t.mu.Lock()
	e, ok := t.m[id]
	if ok {
		delete(t.m, id)
	}
	t.mu.Unlock()
	if !ok {
		return false
	}
	if e.stop != nil {
		e.stop()
	}
	e.v.end()
	return true
}

// endAll ends the entries of ids and counts those that were still held.
func (t *connTable[T]) endAll(ids []uint64) int64 {
	var n int64
	for _, id := range ids {
		if t.end(id) {
			n++
		}
	}
	return n
}

// endIf ends the entries for which due (called under the lock) is true and returns how many.
func (t *connTable[T]) endIf(due func(T) bool) int {
	var ids []uint64
	t.mu.Lock()
	for id, e := range t.m {
		if due(e.v) {
			ids = append(ids, id)
		}
	}
	t.mu.Unlock()
	return int(t.endAll(ids))
}

// closeAll ends every entry and refuses new ones.
func (t *connTable[T]) closeAll() {
	t.mu.Lock()
	t.closed = true
	ids := make([]uint64, 0, len(t.m))
	for id := range t.m {
		ids = append(ids, id)
	}
	t.mu.Unlock()
	t.endAll(ids)
}

// count returns the number of entries held.
func (t *connTable[T]) count() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.m)
}
