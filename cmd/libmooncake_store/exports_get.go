//go:build cgo

package main

/*
#include <stdlib.h>
#include <stdint.h>
#define MOONCAKE_STORE_TYPES_ONLY
#include "mooncake_store.h"
#include "offthread.h"
*/
import "C"

import (
	"fmt"
	"math"
	"runtime/debug"
	"unsafe"

	"github.com/mooncake-go/mooncake/client"
	"github.com/mooncake-go/mooncake/internal/base"
)

// The get exports (mooncake_store.h "Get"): into caller buffers, scattered over several,
// ranged, and into library-owned memory.

func getInto(h C.uintptr_t, key *C.char, buffer C.uintptr_t, size C.size_t) (int64, error) {
	_, cl, k, err := openKey(h, key)
	if err != nil {
		return 0, err
	}
	var m callerMem
	defer m.release()
	b, err := m.output("buffer", uintptr(buffer), uint64(size))
	if err != nil {
		return 0, err
	}
	probeWrite(b)
	n, err := cl.GetInto(bg, k, b)
	if err == nil {
		err = m.deliver("buffer", b, n)
	}
	return int64(n), err
}

//export mooncake_store_get_into
func mooncake_store_get_into(h C.uintptr_t, key *C.char, buffer C.uintptr_t, size C.size_t) (rc C.int64_t) {
	defer catchInt64(&rc, debug.SetPanicOnFault(true))
	return result64(getInto(h, key, buffer, size))
}

// destinations returns the caller's n output buffers, checked and write-probed (device
// buffers staged in m).
func destinations(m *callerMem, what string, buffers *C.uintptr_t, sizes *C.size_t, n int) ([][]byte, error) {
	bufs, err := array(what, buffers, n)
	if err != nil {
		return nil, err
	}
	szs, err := array("sizes", sizes, n)
	if err != nil {
		return nil, err
	}
	dsts := make([][]byte, n)
	for i := range dsts {
		if dsts[i], err = m.output(fmt.Sprintf("%s[%d]", what, i), uintptr(bufs[i]), uint64(szs[i])); err != nil {
			return nil, err
		}
		probeWrite(dsts[i])
	}
	return dsts, nil
}

// batchGetInto reads a batch into the caller's buffers. With resume it is the second pass
// after batchGetIntoNoWait: it reads only the items marked noWaitPending in results_out.
func batchGetInto(h C.uintptr_t, keys *C.uintptr_t, buffers *C.uintptr_t, sizes *C.size_t, count C.size_t, results *C.int64_t, resume bool) error {
	_, cl, ks, err := openBatch(h, keys, count)
	if err != nil {
		return err
	}
	out, err := array("results_out", results, len(ks))
	if err != nil {
		return err
	}
	var m callerMem
	defer m.release()
	dsts, err := destinations(&m, "buffers", buffers, sizes, len(ks))
	if err != nil {
		return err
	}
	if !resume {
		got, errs := cl.BatchGetInto(bg, ks, dsts)
		m.deliverAll(dsts, got, errs)
		return setResults(out, got, errs)
	}
	var idx []int
	for i := range out {
		if out[i] == noWaitPending {
			idx = append(idx, i)
		}
	}
	subKeys, subDsts := make([]string, len(idx)), make([][]byte, len(idx))
	for j, i := range idx {
		subKeys[j], subDsts[j] = ks[i], dsts[i]
	}
	got, errs := cl.BatchGetInto(bg, subKeys, subDsts)
	m.deliverAll(subDsts, got, errs)
	subOut := make([]C.int64_t, len(idx))
	err = setResults(subOut, got, errs)
	for j, i := range idx {
		out[i] = subOut[j]
	}
	return err
}

// noWaitPending marks, in results_out between the two passes of batch_get_into, an item the
// first pass left to the second.
const noWaitPending = C.int64_t(math.MinInt64)

// batchGetIntoNoWait is batch_get_into's first pass, on the calling thread: every object that
// can be read with no network wait (client.BatchGetIntoNoWait: a cached lookup and an unpinned
// shared-memory copy) is read, and gets its size in results_out; the others get
// noWaitPending. It returns how many are left, or -1 when an argument is bad (nothing
// written; the second pass reads and reports it as a whole).
func batchGetIntoNoWait(h C.uintptr_t, keys *C.uintptr_t, buffers *C.uintptr_t, sizes *C.size_t, count C.size_t, results *C.int64_t) int {
	_, cl, ks, err := openBatch(h, keys, count)
	if err != nil {
		return -1
	}
	out, err := array("results_out", results, len(ks))
	if err != nil {
		return -1
	}
	var m callerMem
	defer m.release()
	dsts, err := destinations(&m, "buffers", buffers, sizes, len(ks))
	if err != nil || m.device() {
		return -1 // device buffers: the second pass reads the whole batch and delivers it
	}
	left := 0
	ns, oks := cl.BatchGetIntoNoWait(ks, dsts) // the refreshes it asks for leave in one call
	for i, n := range ns {
		if oks[i] {
			out[i] = C.int64_t(n)
		} else {
			out[i] = noWaitPending
			left++
		}
	}
	return left
}

// mcgo_batch_get_into_nowait is batch_get_into's first pass (offthread.go), run on the
// calling thread. It never sets the last error: a fault or a bad argument returns -1 and the
// second pass reports it.
//
//export mcgo_batch_get_into_nowait
func mcgo_batch_get_into_nowait(h C.uintptr_t, keys *C.uintptr_t, buffers *C.uintptr_t, sizes *C.size_t, count C.size_t,
	results *C.int64_t) (left C.int64_t) {
	defer func(old bool) {
		debug.SetPanicOnFault(old)
		if recover() != nil {
			left = -1
		}
	}(debug.SetPanicOnFault(true))
	return C.int64_t(batchGetIntoNoWait(h, keys, buffers, sizes, count, results))
}

// mcgo_batch_get_into is the Go half of mooncake_store_batch_get_into (offthread.go); resume
// says the first pass ran and left the items marked noWaitPending.
//
//export mcgo_batch_get_into
func mcgo_batch_get_into(call *C.mc_call, h C.uintptr_t, keys *C.uintptr_t, buffers *C.uintptr_t, sizes *C.size_t,
	count C.size_t, results *C.int64_t, resume C.int) {
	offThread(call, func() error { return batchGetInto(h, keys, buffers, sizes, count, results, resume != 0) })
}

func batchGetIntoMulti(h C.uintptr_t, keys *C.uintptr_t, count C.size_t, buffers *C.uintptr_t, sizes *C.size_t,
	partCounts *C.size_t, results *C.int64_t) error {
	_, cl, ks, err := openBatch(h, keys, count)
	if err != nil {
		return err
	}
	n := len(ks)
	out, err := array("results_out", results, n)
	if err != nil {
		return err
	}
	counts, total, err := partGroups(partCounts, n)
	if err != nil {
		return err
	}
	var m callerMem
	defer m.release()
	flat, err := destinations(&m, "buffers", buffers, sizes, total)
	if err != nil {
		return err
	}
	parts := make([][][]byte, n) // object i's destination parts
	at := 0
	for i, c := range counts {
		parts[i], at = flat[at:at+c], at+c
	}
	// An object is read whole into a scratch buffer (so its checksum is verified), then
	// scattered over its parts: one copy, which an object with a single part avoids.
	scratch := make([][]byte, n)
	got, errs := cl.BatchGetWith(bg, ks, func(i int, size int64) ([]byte, error) {
		room := 0
		for _, p := range parts[i] {
			room += len(p)
		}
		if int64(room) < size {
			return nil, fmt.Errorf("%w: get %q: %d bytes of buffers for an object of %d", base.ErrInvalidParams, ks[i], room, size)
		}
		if len(parts[i]) == 1 {
			return parts[i][0][:size], nil
		}
		scratch[i] = make([]byte, size)
		return scratch[i], nil
	})
	for i := range errs {
		if errs[i] == nil && len(parts[i]) > 1 {
			rest := scratch[i][:got[i]]
			for _, p := range parts[i] {
				rest = rest[copy(p, rest):]
			}
		}
		if errs[i] == nil {
			errs[i] = m.deliverParts(fmt.Sprintf("buffers of %q", ks[i]), parts[i], got[i])
		}
	}
	return setResults(out, got, errs)
}

// mcgo_batch_get_into_multi_buffers is the Go half of
// mooncake_store_batch_get_into_multi_buffers (offthread.go).
//
//export mcgo_batch_get_into_multi_buffers
func mcgo_batch_get_into_multi_buffers(call *C.mc_call, h C.uintptr_t, keys *C.uintptr_t, count C.size_t,
	buffers *C.uintptr_t, sizes *C.size_t, partCounts *C.size_t, results *C.int64_t) {
	offThread(call, func() error { return batchGetIntoMulti(h, keys, count, buffers, sizes, partCounts, results) })
}

// rangeReads checks the fragments of get_into_ranges: a bad one gets its error in errs and
// no read; the others become reads (idx maps them back to fragments).
func rangeReads(s *store, m *callerMem, ks []string, ds []C.uintptr_t, offs []C.uint64_t, szs []C.size_t) (reads []client.RangeRead, idx []int, errs []error) {
	errs = make([]error, len(ks))
	for i := range ks {
		b, err := m.output(fmt.Sprintf("dsts[%d]", i), uintptr(ds[i]), uint64(szs[i]))
		switch {
		case err != nil:
		case len(b) == 0:
			err = fmt.Errorf("%w: fragment %d has size 0", base.ErrInvalidParams, i)
		case !s.registered(uintptr(ds[i]), uintptr(szs[i])):
			err = fmt.Errorf("%w: fragment %d: [%#x, +%d) is not inside a registered buffer", base.ErrInvalidParams, i, uintptr(ds[i]), uint64(szs[i]))
		case uint64(offs[i]) > 1<<62:
			err = fmt.Errorf("%w: fragment %d: source offset %d", base.ErrInvalidParams, i, uint64(offs[i]))
		}
		if err != nil {
			errs[i] = err
			continue
		}
		probeWrite(b)
		reads = append(reads, client.RangeRead{Key: ks[i], Offset: int64(offs[i]), Dst: b})
		idx = append(idx, i)
	}
	return reads, idx, errs
}

func getIntoRanges(h C.uintptr_t, count C.size_t, keys *C.uintptr_t, dsts *C.uintptr_t, srcOffsets *C.uint64_t,
	sizes *C.size_t, results *C.int64_t) error {
	s, cl, ks, err := openBatch(h, keys, count)
	if err != nil {
		return err
	}
	n := len(ks)
	out, err := array("results_out", results, n)
	if err != nil {
		return err
	}
	ds, err := array("dsts", dsts, n)
	if err != nil {
		return err
	}
	offs, err := array("src_offsets", srcOffsets, n)
	if err != nil {
		return err
	}
	szs, err := array("sizes", sizes, n)
	if err != nil {
		return err
	}
	var m callerMem
	defer m.release()
	reads, idx, errs := rangeReads(s, &m, ks, ds, offs, szs)
	rerrs := cl.BatchGetRanges(bg, reads)
	outs, lens := make([][]byte, len(reads)), make([]int, len(reads))
	for j := range reads {
		outs[j], lens[j] = reads[j].Dst, len(reads[j].Dst)
	}
	m.deliverAll(outs, lens, rerrs)
	for j, err := range rerrs {
		errs[idx[j]] = err
	}
	got := make([]int, n)
	for i := range got {
		got[i] = int(szs[i])
	}
	return setResults(out, got, errs)
}

// mcgo_get_into_ranges is the Go half of mooncake_store_get_into_ranges (offthread.go).
//
//export mcgo_get_into_ranges
func mcgo_get_into_ranges(call *C.mc_call, h C.uintptr_t, count C.size_t, keys *C.uintptr_t, dsts *C.uintptr_t,
	srcOffsets *C.uint64_t, sizes *C.size_t, results *C.int64_t) {
	offThread(call, func() error { return getIntoRanges(h, count, keys, dsts, srcOffsets, sizes, results) })
}

// cBuffer is C memory for a get into a library-owned buffer. Alloc may be called again for
// the same object (it changed between lookup and read): the earlier allocation is freed.
type cBuffer struct{ p unsafe.Pointer }

func (b *cBuffer) alloc(size int64) ([]byte, error) {
	b.free()
	if size <= 0 || size > 1<<48 {
		return nil, fmt.Errorf("%w: object size %d", base.ErrInternal, size)
	}
	b.p = C.malloc(C.size_t(size))
	if b.p == nil {
		return nil, fmt.Errorf("%w: cannot allocate %d bytes", base.ErrNoSpace, size)
	}
	return unsafe.Slice((*byte)(b.p), size), nil
}

func (b *cBuffer) free() {
	if b.p != nil {
		C.free(b.p)
		b.p = nil
	}
}

func getBuffer(h C.uintptr_t, key *C.char, bufferOut *C.uintptr_t) (int64, error) {
	outs, err := array("buffer_out", bufferOut, 1)
	if err != nil {
		return 0, err
	}
	outs[0] = 0
	_, cl, k, err := openKey(h, key)
	if err != nil {
		return 0, err
	}
	var b cBuffer
	n, err := cl.GetWith(bg, k, b.alloc)
	if err != nil {
		b.free()
		return 0, err
	}
	outs[0] = C.uintptr_t(uintptr(b.p))
	return int64(n), nil
}

//export mooncake_store_get_buffer
func mooncake_store_get_buffer(h C.uintptr_t, key *C.char, bufferOut *C.uintptr_t) (rc C.int64_t) {
	defer catchInt64(&rc, debug.SetPanicOnFault(true))
	return result64(getBuffer(h, key, bufferOut))
}

func batchGetBuffer(h C.uintptr_t, keys *C.uintptr_t, count C.size_t, buffersOut *C.uintptr_t, results *C.int64_t) error {
	_, cl, ks, err := openBatch(h, keys, count)
	if err != nil {
		return err
	}
	out, err := array("results_out", results, len(ks))
	if err != nil {
		return err
	}
	bout, err := array("buffers_out", buffersOut, len(ks))
	if err != nil {
		return err
	}
	bufs := make([]cBuffer, len(ks))
	got, errs := cl.BatchGetWith(bg, ks, func(i int, size int64) ([]byte, error) { return bufs[i].alloc(size) })
	for i := range bufs {
		if errs[i] != nil {
			bufs[i].free()
		}
		bout[i] = C.uintptr_t(uintptr(bufs[i].p))
	}
	return setResults(out, got, errs)
}

// mcgo_batch_get_buffer is the Go half of mooncake_store_batch_get_buffer (offthread.go).
//
//export mcgo_batch_get_buffer
func mcgo_batch_get_buffer(call *C.mc_call, h C.uintptr_t, keys *C.uintptr_t, count C.size_t, buffersOut *C.uintptr_t,
	results *C.int64_t) {
	offThread(call, func() error { return batchGetBuffer(h, keys, count, buffersOut, results) })
}

//export mooncake_store_free_buffer
func mooncake_store_free_buffer(p C.uintptr_t) {
	if p != 0 {
		C.free(pointerOf(uintptr(p)))
	}
}
