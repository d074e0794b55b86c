package nvme

import (
	"fmt"
	"strconv"
	"strings"
	"sync"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/mooncake-go/mooncake/internal/base"
	"github.com/mooncake-go/mooncake/internal/invariants"
)

// Extent files are named extents/<id as 16 hex digits>.ext.
const extentSuffix = ".ext"

func extentName(id uint64) string { return fmt.Sprintf("%016x%s", id, extentSuffix) }

func parseExtentName(name string) (uint64, bool) {
	if !strings.HasSuffix(name, extentSuffix) || len(name) != 16+len(extentSuffix) {
		return 0, false
	}
	id, err := strconv.ParseUint(name[:16], 16, 64)
	return id, err == nil
}

func invariantf(format string, args ...any) error {
	return fmt.Errorf("%w: %w", base.ErrInternal, invariants.AssertionFailedf(format, args...))
}

// reserveRecord reserves n bytes (an aligned record) at the end of the active extent, rolling
// to a new extent when it is full. It returns the extent with a write reference the caller
// must drop with releaseW, the offset, and the write handle.
func (s *Store) reserveRecord(n int64, force bool) (*extent, int64, vfs.File, error) {
	reserve := s.reserve
	if force {
		if s.ballastGone.Load() {
			return nil, 0, nil, s.errBallastGone() // GC copies too: the room is the index's
		}
		reserve = func(n int64, extentBytes bool) error { return s.reserveMaybeForce(n, extentBytes, true) }
	}
	if err := reserve(n, true); err != nil {
		return nil, 0, nil, err
	}
	s.mu.Lock()
	e := s.mu.active
	var toRelease *extent
	if e != nil && e.size.Load()+n > s.opts.ExtentSize && e.size.Load() > blockSize {
		// Full: seal it. Its write handle closes once the writes in flight are done.
		e.sealed = true
		s.mu.active = nil
		toRelease, e = e, nil
	}
	if e == nil {
		var err error
		e, err = s.newExtentLocked()
		if err != nil {
			s.mu.Unlock()
			s.m.extentBytes.Add(-n)
			if toRelease != nil {
				s.releaseW(toRelease)
			}
			return nil, 0, nil, err
		}
		s.mu.active = e
	}
	off := e.size.Add(n) - n
	e.wRefs++
	w := e.w
	s.mu.Unlock()
	if toRelease != nil {
		s.releaseW(toRelease)
	}
	return e, off, w, nil
}

// newExtentLocked creates the next extent file, writes its header and syncs the directory,
// so a record synced into it later is found after a power failure. The header block is
// counted even past capacity: the record that needs the extent was admitted, and one block
// over is harmless.
// REQUIRES: s.mu.
func (s *Store) newExtentLocked() (*extent, error) {
	id := s.mu.nextID
	s.mu.nextID++
	path := s.fs.PathJoin(s.extDir, extentName(id))
	w, err := s.fs.Create(path, vfs.WriteCategoryUnspecified)
	if err != nil {
		return nil, ioErr("create extent", err)
	}
	fail := func(what string, err error) (*extent, error) {
		w.Close()
		_ = s.fs.Remove(path)
		return nil, ioErr(what, err)
	}
	if s.direct {
		if err := setDirect(w); err != nil {
			return fail("O_DIRECT on a new extent", err)
		}
	}
	_ = s.reserveMaybeForce(blockSize, true, true)
	hdr := getBuf(blockSize)
	encodeExtentHeader(hdr, id)
	_, err = w.WriteAt(hdr, 0)
	putBuf(hdr)
	if err != nil {
		s.m.extentBytes.Add(-blockSize)
		return fail(fmt.Sprintf("write extent %d header", id), err)
	}
	if err := s.syncDir(); err != nil {
		s.m.extentBytes.Add(-blockSize)
		return fail("sync extent directory", err)
	}
	r, err := s.fs.Open(path)
	if err != nil {
		s.m.extentBytes.Add(-blockSize)
		return fail("open extent for reading", err)
	}
	e := &extent{id: id, path: path, r: r, w: w, wRefs: 1}
	e.size.Store(blockSize)
	s.mu.extents[id] = e
	s.m.extents.Add(1)
	return e, nil
}

func (s *Store) syncDir() error {
	d, err := s.fs.OpenDir(s.extDir)
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	return err
}

// sealExtent stops appends to e (after a write or sync error).
func (s *Store) sealExtent(e *extent) {
	s.mu.Lock()
	release := false
	if s.mu.active == e {
		s.mu.active = nil
		release = true // the active role's reference
	}
	e.sealed = true
	s.mu.Unlock()
	if release {
		s.releaseW(e)
	}
}

// releaseW drops a write reference. The last one of a sealed extent syncs (unless SyncNone)
// and closes its write handle.
func (s *Store) releaseW(e *extent) {
	s.mu.Lock()
	e.wRefs--
	if e.wRefs < 0 {
		s.mu.Unlock()
		_ = invariantf("extent %d: write reference count below zero", e.id)
		return
	}
	var w vfs.File
	if e.wRefs == 0 && e.sealed {
		w, e.w = e.w, nil
	}
	s.mu.Unlock()
	if w == nil {
		return
	}
	if s.opts.Sync != SyncNone {
		if err := w.SyncData(); err != nil {
			s.setSyncErr(e, err)
			s.log.Error("nvme: final sync of a sealed extent failed", "extent", e.id, "err", err)
		}
	}
	if err := w.Close(); err != nil {
		s.log.Error("nvme: closing a sealed extent failed", "extent", e.id, "err", err)
	}
}

// acquireW returns e's write handle with a reference, or nil once it is closed (and synced).
func (s *Store) acquireW(e *extent) vfs.File {
	s.mu.Lock()
	defer s.mu.Unlock()
	if e.w == nil {
		return nil
	}
	e.wRefs++
	return e.w
}

// acquireExtent returns extent id with a read reference, or nil if it does not exist (GC
// removed it). The caller must releaseExtent it.
func (s *Store) acquireExtent(id uint64) *extent {
	s.mu.Lock()
	defer s.mu.Unlock()
	e := s.mu.extents[id]
	if e != nil {
		e.refs++
	}
	return e
}

func (s *Store) releaseExtent(e *extent) {
	s.mu.Lock()
	e.refs--
	closeR := e.removed && e.refs == 0
	s.mu.Unlock()
	if closeR {
		e.r.Close()
	}
}

// syncGroup runs group commits of extent files. At most one goroutine (the leader) syncs at a
// time; callers that arrive meanwhile wait for the next sync, which the first of them leads.
// This is pebble's WAL pattern: no timer on the sync=true path, and N concurrent durable
// writers share one fdatasync per extent.
type syncGroup struct {
	mu   sync.Mutex // guards the fields below and extent.syncErr
	cond sync.Cond  // signalled when a sync finishes or the leader steps down
	// dirty holds the extents written since the last sync started.
	dirty map[*extent]struct{}
	// started and finished count syncs. Invariant: finished <= started <= finished+1.
	started, finished uint64
	running           bool // a leader exists
}

func (s *Store) markDirty(e *extent) {
	s.group.mu.Lock()
	s.group.dirty[e] = struct{}{}
	s.group.mu.Unlock()
}

func (s *Store) setSyncErr(e *extent, err error) {
	s.group.mu.Lock()
	if e.syncErr == nil {
		e.syncErr = err
	}
	s.group.mu.Unlock()
}

// syncExtent returns once e (with every other dirty extent) has been synced by a sync that
// started after the call; its error is e's sticky sync error.
func (s *Store) syncExtent(e *extent) error {
	g := &s.group
	g.mu.Lock()
	g.dirty[e] = struct{}{}
	target := g.started + 1
	s.awaitSyncLocked(target)
	err := e.syncErr
	g.mu.Unlock()
	if err != nil {
		s.sealExtent(e)
	}
	return err
}

// syncDirty syncs every dirty extent (the SyncGroup tick and Close).
func (s *Store) syncDirty() {
	g := &s.group
	g.mu.Lock()
	if len(g.dirty) > 0 {
		s.awaitSyncLocked(g.started + 1)
	}
	g.mu.Unlock()
}

// awaitSyncLocked waits for sync number target, leading syncs when no one else does.
// REQUIRES: s.group.mu.
func (s *Store) awaitSyncLocked(target uint64) {
	g := &s.group
	for g.finished < target {
		if g.running {
			g.cond.Wait()
			continue
		}
		g.running = true
		for g.finished < target {
			g.started++
			gen := g.started
			files := g.dirty
			g.dirty = make(map[*extent]struct{})
			g.mu.Unlock()
			for e := range files {
				w := s.acquireW(e)
				if w == nil {
					continue // closed after its final sync; any error is already in syncErr
				}
				if err := w.SyncData(); err != nil {
					s.setSyncErr(e, err)
					s.log.Error("nvme: extent sync failed; the extent is sealed", "extent", e.id, "err", err)
				}
				s.releaseW(e)
			}
			g.mu.Lock()
			g.finished = gen
			g.cond.Broadcast()
		}
		g.running = false
		g.cond.Broadcast()
	}
}

// writeOpts is the pebble durability for an index update.
func writeOpts(durable bool) *pebble.WriteOptions {
	if durable {
		return pebble.Sync
	}
	return pebble.NoSync
}
