//go:build cgo

package main

/*
#include <stdlib.h>
#include <string.h>
#define MOONCAKE_STORE_TYPES_ONLY
#include "mooncake_store.h"
*/
import "C"

import (
	"errors"
	"fmt"
	"os"
	"runtime"
	"runtime/debug"
	"sync/atomic"
	"unsafe"

	"github.com/mooncake-go/mooncake/internal/base"
)

// Conversions of C arguments: pointers arrive as uintptr_t and become slices only after
// their checks (rules 2 and 3 of doc.go).

// minPointer is the lowest address a caller's buffer may have: no mapping lives in the first
// page, and a value under it in a Go pointer slot would crash the runtime's stack scan.
const minPointer = 4096

// maxParts bounds the parts of one multi-buffer call (the sum over its objects).
const maxParts = 1 << 20

// maxBatchItems is the client's batch limit (client.maxBatch), checked before C arrays are read.
const maxBatchItems = 4096

// pointerOf reinterprets an address as a pointer to C memory. The address must have passed
// checkRange. (Written this way because a uintptr to unsafe.Pointer conversion of a value
// that did not come from a pointer is what go vet flags; this one is C memory the Go heap
// never sees.)
func pointerOf(u uintptr) unsafe.Pointer { return *(*unsafe.Pointer)(unsafe.Pointer(&u)) }

func checkRange(what string, u uintptr, n uint64) error {
	switch {
	case n == 0:
		return nil
	case u == 0:
		return fmt.Errorf("%w: %s is NULL with a size of %d", base.ErrInvalidParams, what, n)
	case u < minPointer:
		return fmt.Errorf("%w: %s %#x is not a valid address", base.ErrInvalidParams, what, u)
	case n > 1<<48 || uint64(u)+n < uint64(u):
		return fmt.Errorf("%w: %s size %d is not valid", base.ErrInvalidParams, what, n)
	}
	return nil
}

// bytesAt returns the caller's n bytes of host memory at u, used in place: the calls whose
// memory is the library's own business (an id, an output string) take no device memory.
func bytesAt(what string, u uintptr, n uint64) ([]byte, error) {
	b, dev, err := callerBytes(what, u, n)
	if err == nil && dev {
		err = fmt.Errorf("%w: %s %#x is GPU memory, which this call does not take", base.ErrInvalidParams, what, u)
	}
	return b, err
}

// callerBytes checks the caller's range [u, u+n) and says whether it is device memory (cuda.go);
// for host memory it returns the bytes, used in place.
func callerBytes(what string, u uintptr, n uint64) (b []byte, device bool, err error) {
	if err := checkRange(what, u, n); err != nil || n == 0 {
		return nil, false, err
	}
	if device, err = isDevice(what, u, n); err != nil || device {
		return nil, device, err
	}
	return unsafe.Slice((*byte)(pointerOf(u)), n), false, nil
}

// checkBuffer is checkRange for a range that may be device memory (register_buffer).
func checkBuffer(what string, u uintptr, n uint64) error {
	_, _, err := callerBytes(what, u, n)
	return err
}

// GPU memory. A caller's range of device memory is staged through host memory: a put's
// value is copied to the host before the put (input), a get lands in host memory and is
// copied to the device after it (callerMem.output, then deliver). Host ranges are used in
// place, as before, after one classification each (docs/clib.md "GPU memory").

// callerMem is the caller's memory of one call: where each device range is staged. Its
// owner calls release when the call is done with every slice input and output returned.
// Copies are batched: the inputs staged are copied from the device by fetch, the outputs to
// it by deliver and deliverAll, each batch waiting once per stream (a layer-wise put of a
// thousand 8 KiB blocks waits once, not a thousand times).
type callerMem struct {
	staged map[*byte]devCopy // the first byte of an output stage -> its copy
	ins    []devCopy         // input stages not yet fetched
	pinned [][]byte          // the pinned stages this call holds (staging.go), returned by release
	carve  []byte            // the rest of a pinned block small stages are cut from
}

// input returns the caller's n bytes at u for reading (a put's value): host memory in place,
// device memory as a host stage, filled by fetch. Every caller of input calls fetch before
// the bytes are used.
func (m *callerMem) input(what string, u uintptr, n uint64) ([]byte, error) {
	b, dev, err := callerBytes(what, u, n)
	if err != nil || !dev {
		return b, err
	}
	c := m.stage(u, n)
	m.ins = append(m.ins, c)
	return c.host, nil
}

// fetch copies every input staged since the last fetch from the device.
func (m *callerMem) fetch(what string) error {
	err := copyMany(what, m.ins, false)
	m.ins = m.ins[:0]
	return err
}

// output returns n bytes at u for writing (a get's destination): host memory in place, or
// for device memory a host stage that deliver copies to the device.
func (m *callerMem) output(what string, u uintptr, n uint64) ([]byte, error) {
	b, dev, err := callerBytes(what, u, n)
	if err != nil || !dev {
		return b, err
	}
	c := m.stage(u, n)
	if m.staged == nil {
		m.staged = map[*byte]devCopy{}
	}
	m.staged[&c.host[0]] = c
	return c.host, nil
}

// smallBlock is the pinned block small stages are cut from; stageAlign aligns each cut.
const (
	smallBlock = 4 * minPinnedStage
	stageAlign = 64
)

// stage returns n bytes of host memory to stage the device range at u: pinned memory when
// the driver gives it (the DMA then goes straight there, at the bus's speed), ordinary
// memory otherwise. Stages under minPinnedStage are cut from one pinned block of the call.
func (m *callerMem) stage(u uintptr, n uint64) devCopy {
	if n >= minPinnedStage {
		b, pinned := getStage(u, n)
		if pinned {
			m.pinned = append(m.pinned, b)
		}
		return devCopy{dev: u, host: b, pinned: pinned}
	}
	if uint64(len(m.carve)) < n {
		b, pinned := getStage(u, smallBlock)
		if !pinned {
			return devCopy{dev: u, host: make([]byte, n)}
		}
		m.pinned = append(m.pinned, b)
		m.carve = b
	}
	b := m.carve[:n:n]
	m.carve = m.carve[min(uint64(len(m.carve)), (n+stageAlign-1)&^(stageAlign-1)):]
	return devCopy{dev: u, host: b, pinned: true}
}

// release returns the call's pinned stages to the pool: nothing may use a slice input or
// output returned after it.
func (m *callerMem) release() {
	for _, b := range m.pinned {
		putStage(b)
	}
	m.pinned, m.carve = nil, nil
}

// deliver copies the first n bytes of b, a slice output returned, to the device range it
// stands for; for host memory (already written in place) it does nothing.
func (m *callerMem) deliver(what string, b []byte, n int) error {
	return m.deliverParts(what, [][]byte{b}, n)
}

// deliverParts delivers the first n bytes of an object read into parts (in order), one
// batch of copies.
func (m *callerMem) deliverParts(what string, parts [][]byte, n int) error {
	cs := m.appendOut(nil, parts, n)
	return copyMany(what, cs, true)
}

// appendOut appends to cs the copies that deliver the first n bytes of parts.
func (m *callerMem) appendOut(cs []devCopy, parts [][]byte, n int) []devCopy {
	for _, b := range parts {
		if n <= 0 {
			break
		}
		k := min(n, len(b))
		if c, ok := m.staged[unsafe.SliceData(b)]; ok && k > 0 {
			c.host = c.host[:k]
			cs = append(cs, c)
		}
		n -= k
	}
	return cs
}

// deliverAll delivers each destination read without error (got[i] bytes into dsts[i]) in
// one batch; a failed batch becomes the error of every item it held.
func (m *callerMem) deliverAll(dsts [][]byte, got []int, errs []error) {
	var cs []devCopy
	var items []int
	for i := range dsts {
		if errs[i] != nil {
			continue
		}
		k := len(cs)
		if cs = m.appendOut(cs, dsts[i:i+1], got[i]); len(cs) > k {
			items = append(items, i)
		}
	}
	if err := copyMany("buffers", cs, true); err != nil {
		for _, i := range items {
			errs[i] = err
		}
	}
}

// device reports whether any output of m is device memory.
func (m *callerMem) device() bool { return len(m.staged) > 0 }

// array returns the caller's C array of n elements at p (nil p with n > 0 is an error).
func array[T any](what string, p *T, n int) ([]T, error) {
	if n == 0 {
		return nil, nil
	}
	if p == nil {
		return nil, fmt.Errorf("%w: %s is NULL with %d items", base.ErrInvalidParams, what, n)
	}
	var zero T
	if err := checkRange(what, uintptr(unsafe.Pointer(p)), uint64(n)*uint64(unsafe.Sizeof(zero))); err != nil {
		return nil, err
	}
	return unsafe.Slice(p, n), nil
}

// goString copies a NUL-terminated C string of at most max bytes; a longer one is an error
// (a key is at most base.MaxKeyLen bytes: the scan stops there).
func goString(what string, u uintptr, max int) (string, error) {
	if u == 0 {
		return "", fmt.Errorf("%w: %s is NULL", base.ErrInvalidParams, what)
	}
	if u < minPointer {
		return "", fmt.Errorf("%w: %s %#x is not a valid address", base.ErrInvalidParams, what, u)
	}
	n := int(C.strnlen((*C.char)(pointerOf(u)), C.size_t(max+1)))
	if n > max {
		return "", fmt.Errorf("%w: %s is over %d bytes", base.ErrInvalidKey, what, max)
	}
	return C.GoStringN((*C.char)(pointerOf(u)), C.int(n)), nil
}

func goKey(p *C.char) (string, error) {
	return goString("key", uintptr(unsafe.Pointer(p)), base.MaxKeyLen)
}

// optString is an optional C string argument ("" for NULL).
func optString(p *C.char) string {
	if p == nil {
		return ""
	}
	return C.GoString(p)
}

func goKeys(p *C.uintptr_t, n int) ([]string, error) {
	ptrs, err := array("keys", p, n)
	if err != nil {
		return nil, err
	}
	keys := make([]string, n)
	for i, u := range ptrs {
		if keys[i], err = goString(fmt.Sprintf("keys[%d]", i), uintptr(u), base.MaxKeyLen); err != nil {
			return nil, err
		}
	}
	return keys, nil
}

// checkCount bounds a batch before its arrays are read.
func checkCount(n C.size_t) (int, error) {
	if n > maxBatchItems {
		return 0, fmt.Errorf("%w: batch of %d items is over the limit of %d", base.ErrInvalidParams, uint64(n), maxBatchItems)
	}
	return int(n), nil
}

// pageSize is the probe stride.
var pageSize = os.Getpagesize()

// probeRead reads one byte of every page of b in the calling goroutine, which runs with
// debug.SetPanicOnFault: an unmapped buffer panics here (recovered into INVALID_PARAMS)
// instead of faulting in a transfer goroutine, which would kill the process.
func probeRead(b []byte) {
	var x byte
	for i := 0; i < len(b); i += pageSize {
		x ^= b[i]
	}
	if len(b) > 0 {
		x ^= b[len(b)-1]
	}
	probeSink = x
}

// probeWrite checks that every page of b (an output buffer) is writable, so a read-only or
// unmapped buffer fails here, as probeRead, and changes no byte: the probe is an atomic
// compare-and-swap of the aligned word holding the byte with its own value, which the CPU
// checks as a write (a fault on a read-only page) while the word keeps its value, even
// against a concurrent writer. A probe that stored a byte would clobber what the caller
// keeps there: the bytes past a short object, the buffer of a miss, or an item that
// batch_get_into's first pass already read (the second pass probes the batch again).
func probeWrite(b []byte) {
	for i := 0; i < len(b); i += pageSize {
		probeWriteAt(&b[i])
	}
	if len(b) > 0 {
		probeWriteAt(&b[len(b)-1])
	}
}

// probeWriteAt probes the aligned 4-byte word holding *p: aligned down, it lies in the same
// page (pages are 4-byte aligned) and, for Go memory, in the same allocation.
func probeWriteAt(p *byte) {
	w := (*uint32)(unsafe.Pointer(uintptr(unsafe.Pointer(p)) &^ 3))
	v := atomic.LoadUint32(w)
	atomic.CompareAndSwapUint32(w, v, v)
}

var probeSink byte

// panicError turns a recovered panic into an error: a memory fault (a bad caller pointer,
// under SetPanicOnFault) is INVALID_PARAMS, anything else is a bug (INTERNAL, stack on stderr).
func panicError(r any) error {
	var re runtime.Error
	if e, ok := r.(error); ok && errors.As(e, &re) {
		if f, ok := re.(interface{ Addr() uintptr }); ok {
			return fmt.Errorf("%w: bad memory address %#x passed in (%v)", base.ErrInvalidParams, f.Addr(), re)
		}
	}
	fmt.Fprintf(os.Stderr, "libmooncake_store: panic: %v\n%s", r, debug.Stack())
	return fmt.Errorf("%w: panic: %v", base.ErrInternal, r)
}

// catchInt and catchInt64 end every export: they restore the goroutine's fault mode and turn
// a panic into an error code (recover works only in the deferred function itself, hence two).
func catchInt(rc *C.int, oldFault bool) {
	debug.SetPanicOnFault(oldFault)
	if r := recover(); r != nil {
		*rc = C.int(fail(panicError(r)))
	}
}

func catchInt64(rc *C.int64_t, oldFault bool) {
	debug.SetPanicOnFault(oldFault)
	if r := recover(); r != nil {
		*rc = C.int64_t(fail(panicError(r)))
	}
}

// fail records err as the thread's last error and returns its code (0 for nil and for a
// batch's itemError, whose text is still recorded; see outcome).
func fail(err error) int {
	code, last := outcome(err)
	if last != nil {
		setLastError(last)
	}
	return code
}

// replicateArgs converts the C config (NULL: the defaults).
func replicateArgs(c *C.mooncake_replicate_config_t) (rcArgs, error) {
	var a rcArgs
	if c == nil {
		return a, nil
	}
	a.replicaNum = uint64(c.replica_num)
	a.hardPin = c.with_hard_pin != 0
	a.softPinAction = int(c.soft_pin_action)
	a.hasSoftPinTTL = c.has_soft_pin_ttl != 0
	a.softPinTTLms = uint64(c.soft_pin_ttl_ms)
	a.persistence = int(c.persistence)
	n := uint64(c.preferred_segments_count)
	if n > 64 {
		return a, fmt.Errorf("%w: %d preferred segments (at most 64)", base.ErrInvalidParams, n)
	}
	segs, err := array("preferred_segments", (*C.uintptr_t)(unsafe.Pointer(c.preferred_segments)), int(n))
	if err != nil {
		return a, err
	}
	for i, u := range segs {
		if u == 0 {
			continue
		}
		s, err := goString(fmt.Sprintf("preferred_segments[%d]", i), uintptr(u), 1024)
		if err != nil {
			return a, err
		}
		a.preferred = append(a.preferred, s)
	}
	return a, nil
}
