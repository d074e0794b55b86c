package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"strings"
	"syscall"
	"time"

	"github.com/mooncake-go/mooncake/internal/base"
	"github.com/mooncake-go/mooncake/server/worker"
)

// Segment management (Mooncake's mount_segment, allocate_and_mount_segment, unmount_segment,
// unmount_and_free_segment). Each mounted segment is one more embedded worker in this process
// (embedded.go): its own DRAM arena, its own worker id, which is the segment id the calls
// return and take (get_replica_desc's segment_name, a preferred_segment), and its own
// listening port on this store's host. Unmounting one is what close() does for the setup
// segment: the worker's Shutdown leaves the cluster synchronously (LeaveWorker), so when the
// call returns the leader places nothing on it and the objects only it held are gone.
//
// Mooncake's mount_segment maps a region of a file; here the region is checked (the file
// opens and holds [offset, offset+size)) and the arena is allocated like
// allocate_and_mount_segment's: the worker's arena is its own memfd (shared with same-host
// clients), so a caller's file cannot back it without giving that up.

// maxUnmountGrace bounds grace_period_seconds: how long in-flight reads of an unmounted
// segment may go on finishing their sends.
const maxUnmountGrace = 10 * time.Minute

// mountSegment starts one more embedded worker of size bytes and returns its id and the
// arena's size (size rounded up to the arena's pages). path, when not "", names a file that
// must hold [offset, offset+size) (mount_segment); location must be "" or "cpu".
func (s *store) mountSegment(size uint64, path string, offset uint64, location string) (base.WorkerID, int64, error) {
	switch {
	case size == 0:
		return "", 0, fmt.Errorf("%w: mount a segment: size must be positive", base.ErrInvalidParams)
	case size > 1<<50:
		return "", 0, fmt.Errorf("%w: mount a segment: size %d is implausible", base.ErrInvalidParams, size)
	case location != "" && !strings.EqualFold(location, "cpu"):
		return "", 0, fmt.Errorf("%w: mount a segment: location %q: only host memory (\"cpu\" or \"\") can be mounted here", base.ErrNotSupported, location)
	}
	if path != "" {
		if err := checkRegion(path, offset, size); err != nil {
			return "", 0, err
		}
	}
	s.mu.Lock()
	cl, masters, clusterID, hostname := s.cl, s.masters, s.clusterID, s.hostname
	s.mu.Unlock()
	if cl == nil {
		return "", 0, errNotSetUp
	}
	host, _, err := net.SplitHostPort(hostname)
	if err != nil {
		return "", 0, fmt.Errorf("mount a segment: this store's host %q: %w", hostname, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), workerReadyTimeout)
	defer cancel()
	var w *worker.Worker
	for try := 0; ; try++ {
		addr, _, err := localAddress(host, pickHostPort)
		if err != nil {
			return "", 0, err
		}
		w, err = startEmbedded(ctx, cl, clusterID, masters, addr, int64(size))
		if err == nil {
			break
		}
		if !errors.Is(err, syscall.EADDRINUSE) || try >= 3 {
			return "", 0, err
		}
	}
	capacity := int64(size)
	if st, err := cl.Status(ctx); err == nil {
		for _, ws := range st.Workers {
			if ws.ID == string(w.ID()) && ws.DRAMCapacityBytes > 0 {
				capacity = ws.DRAMCapacityBytes
			}
		}
	}
	s.mu.Lock()
	if s.cl != cl { // closed meanwhile: this segment goes too
		s.mu.Unlock()
		shutdownWorker(w, 0)
		return "", 0, errNotSetUp
	}
	if s.mounted == nil {
		s.mounted = map[base.WorkerID]*worker.Worker{}
	}
	s.mounted[w.ID()] = w
	s.mu.Unlock()
	return w.ID(), capacity, nil
}

// checkRegion checks that the file at path holds [offset, offset+size).
func checkRegion(path string, offset, size uint64) error {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("%w: mount_segment: %w", base.ErrInvalidParams, err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return fmt.Errorf("%w: mount_segment: %w", base.ErrInvalidParams, err)
	}
	if offset+size < offset || fi.Mode().IsRegular() && uint64(fi.Size()) < offset+size {
		return fmt.Errorf("%w: mount_segment: %s holds %d bytes, not [%d, %d+%d)", base.ErrInvalidParams, path, fi.Size(), offset, offset, size)
	}
	return nil
}

// unmountSegments unmounts the segments ids names, each as close() unmounts the setup
// segment: when it returns, the leader places nothing on them and the objects only they held
// are gone. grace bounds how long reads already in flight may finish (Mooncake's
// grace_period_seconds; at most maxUnmountGrace). Every id is checked first: one that is not
// a segment this store mounted fails the call with nothing unmounted.
func (s *store) unmountSegments(ids []string, grace time.Duration) error {
	if grace < 0 || grace > maxUnmountGrace {
		return fmt.Errorf("%w: unmount_segment: grace_period_seconds must be 0 to %d", base.ErrInvalidParams, int(maxUnmountGrace/time.Second))
	}
	if len(ids) == 0 {
		return fmt.Errorf("%w: unmount_segment: no segment ids", base.ErrInvalidParams)
	}
	s.mu.Lock()
	if s.cl == nil {
		s.mu.Unlock()
		return errNotSetUp
	}
	ws := make([]*worker.Worker, 0, len(ids))
	for _, id := range ids {
		w, ok := s.mounted[base.WorkerID(id)]
		if !ok {
			s.mu.Unlock()
			if s.worker != nil && string(s.worker.ID()) == id {
				return fmt.Errorf("%w: unmount_segment: %q is the segment setup mounted; close() unmounts it", base.ErrInvalidParams, id)
			}
			return fmt.Errorf("%w: unmount_segment: %q is not a segment this store mounted", base.ErrSegmentNotFound, id)
		}
		ws = append(ws, w)
	}
	for _, id := range ids {
		delete(s.mounted, base.WorkerID(id))
	}
	s.mu.Unlock()
	for _, w := range ws {
		shutdownWorker(w, grace)
	}
	return nil
}

// takeMountedLocked empties the mounted set and returns what it held (close stops them).
func (s *store) takeMountedLocked() []*worker.Worker {
	ws := make([]*worker.Worker, 0, len(s.mounted))
	for _, w := range s.mounted {
		ws = append(ws, w)
	}
	s.mounted = nil
	return ws
}

// mountedSegmentLocked returns the id of the mounted segment listening at addr, "" when none.
func (s *store) mountedSegmentLocked(addr string) base.WorkerID {
	for id, w := range s.mounted {
		if w.Addr() == addr {
			return id
		}
	}
	return ""
}
