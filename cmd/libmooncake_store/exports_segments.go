//go:build cgo

package main

/*
#include <stdint.h>
#include <stddef.h>
*/
import "C"

import (
	"fmt"
	"runtime/debug"
	"time"
	"unsafe"

	"github.com/mooncake-go/mooncake/internal/base"
)

// Segment management for the Python package (segments.go). Mooncake's C API has no such
// calls (its store_c.h mounts nothing beyond setup's segment), so these are not in
// mooncake_store.h: they are the library's internal exports, declared once in
// python/mooncake/_lib.py, and may change with it.

// mcpy_mount_segment mounts one more segment of size bytes (path not NULL: mount_segment's
// file region, checked; NULL: allocate_and_mount_segment), writes its id (NUL-terminated)
// to id_out and the bytes mounted to allocated_out. 0 or a negative code.
//
//export mcpy_mount_segment
func mcpy_mount_segment(h C.uintptr_t, size C.uint64_t, path *C.char, offset C.uint64_t, location *C.char,
	idOut C.uintptr_t, idLen C.size_t, allocatedOut *C.uint64_t) (rc C.int) {
	defer catchInt(&rc, debug.SetPanicOnFault(true))
	return C.int(fail(mountSegment(h, size, path, offset, location, idOut, idLen, allocatedOut)))
}

func mountSegment(h C.uintptr_t, size C.uint64_t, path *C.char, offset C.uint64_t, location *C.char,
	idOut C.uintptr_t, idLen C.size_t, allocatedOut *C.uint64_t) error {
	s, err := lookupHandle(uintptr(h))
	if err != nil {
		return err
	}
	out, err := bytesAt("id_out", uintptr(idOut), uint64(idLen))
	if err != nil {
		return err
	}
	if allocatedOut == nil {
		return fmt.Errorf("%w: allocated_out is NULL", base.ErrInvalidParams)
	}
	var p string
	if path != nil {
		if p, err = goString("path", uintptr(unsafe.Pointer(path)), 4096); err != nil {
			return err
		}
		if p == "" {
			return fmt.Errorf("%w: mount_segment: path is empty", base.ErrInvalidParams)
		}
	}
	id, capacity, err := s.mountSegment(uint64(size), p, uint64(offset), optString(location))
	if err != nil {
		return err
	}
	if len(out) < len(id)+1 {
		s.unmountSegments([]string{string(id)}, 0)
		return fmt.Errorf("%w: id_out of %d bytes for a segment id of %d and its NUL", base.ErrInvalidParams, len(out), len(id))
	}
	out[copy(out, id)] = 0
	*allocatedOut = C.uint64_t(capacity)
	return nil
}

// mcpy_unmount_segment unmounts the count segments ids names (ids mcpy_mount_segment
// returned), letting reads in flight finish for up to grace_seconds. 0 or a negative code;
// nothing is unmounted when one id is unknown.
//
//export mcpy_unmount_segment
func mcpy_unmount_segment(h C.uintptr_t, ids *C.uintptr_t, count C.size_t, graceSeconds C.uint64_t) (rc C.int) {
	defer catchInt(&rc, debug.SetPanicOnFault(true))
	return C.int(fail(unmountSegment(h, ids, count, graceSeconds)))
}

func unmountSegment(h C.uintptr_t, ids *C.uintptr_t, count C.size_t, graceSeconds C.uint64_t) error {
	s, err := lookupHandle(uintptr(h))
	if err != nil {
		return err
	}
	n, err := checkCount(count)
	if err != nil {
		return err
	}
	ptrs, err := array("segment_ids", ids, n)
	if err != nil {
		return err
	}
	names := make([]string, n)
	for i, u := range ptrs {
		if names[i], err = goString(fmt.Sprintf("segment_ids[%d]", i), uintptr(u), base.MaxKeyLen); err != nil {
			return err
		}
	}
	if uint64(graceSeconds) > uint64(maxUnmountGrace/time.Second) {
		return fmt.Errorf("%w: unmount_segment: grace_period_seconds %d is over %d", base.ErrInvalidParams, uint64(graceSeconds), int(maxUnmountGrace/time.Second))
	}
	return s.unmountSegments(names, time.Duration(graceSeconds)*time.Second)
}
