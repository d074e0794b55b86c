//go:build cgo

package main

/*
#include <stdlib.h>
#include <stdint.h>
#define MOONCAKE_STORE_TYPES_ONLY
#include "mooncake_store.h"
*/
import "C"

import (
	"context"
	"encoding/json"
	"fmt"
	"runtime/debug"
	"unsafe"

	"github.com/mooncake-go/mooncake/client"
	"github.com/mooncake-go/mooncake/internal/base"
)

// The exported functions, in mooncake_store.h's order. Each is: defer catch, resolve the
// handle, convert the arguments, call Go, map the error (doc.go). Pointers to caller memory
// and handles cross as uintptr_t; the header declares them as void * (same ABI).

func main() {}

// open resolves a handle to its store and connected client.
func open(h C.uintptr_t) (*store, *client.Client, error) {
	s, err := lookupHandle(uintptr(h))
	if err != nil {
		return nil, nil, err
	}
	cl, err := s.client()
	return s, cl, err
}

var bg = context.Background()

// cGetenv reads the process environment as C sees it now (Python's os.environ writes reach
// it through putenv; Go's os.Getenv has a copy taken when the library was loaded).
func cGetenv(name string) string {
	cs := C.CString(name)
	defer C.free(unsafe.Pointer(cs))
	return optString(C.getenv(cs))
}

// ---- Lifecycle ----

//export mooncake_store_create
func mooncake_store_create() C.uintptr_t { return C.uintptr_t(newHandle()) }

//export mooncake_store_destroy
func mooncake_store_destroy(h C.uintptr_t) {
	if s := dropHandle(uintptr(h)); s != nil {
		s.close()
	}
}

//export mooncake_store_setup
func mooncake_store_setup(h C.uintptr_t, localHostname, metadataServer *C.char, globalSegmentSize, localBufferSize C.uint64_t,
	protocol, deviceName, masterServerAddr *C.char) (rc C.int) {
	defer catchInt(&rc, debug.SetPanicOnFault(true))
	s, err := lookupHandle(uintptr(h))
	if err != nil {
		return C.int(fail(err))
	}
	return C.int(fail(s.setup(setupArgs{
		localHostname: optString(localHostname), metadataServer: optString(metadataServer),
		globalSegmentSize: uint64(globalSegmentSize), localBufferSize: uint64(localBufferSize),
		protocol: optString(protocol), deviceName: optString(deviceName), masterServerAddr: optString(masterServerAddr),
	}, cGetenv)))
}

//export mooncake_store_init_all
func mooncake_store_init_all(h C.uintptr_t, protocol, deviceName *C.char, mountSegmentSize C.uint64_t) C.int {
	return mooncake_store_setup(h, nil, nil, mountSegmentSize, 0, protocol, deviceName, nil)
}

//export mooncake_store_close
func mooncake_store_close(h C.uintptr_t) (rc C.int) {
	defer catchInt(&rc, debug.SetPanicOnFault(true))
	s, err := lookupHandle(uintptr(h))
	if err != nil {
		return C.int(fail(err))
	}
	s.close()
	return 0
}

//export mooncake_store_health_check
func mooncake_store_health_check(h C.uintptr_t) (rc C.int) {
	defer catchInt(&rc, debug.SetPanicOnFault(true))
	s, err := lookupHandle(uintptr(h))
	if err != nil {
		return C.int(fail(err))
	}
	return C.int(s.healthCheck())
}

// ---- Put ----

// putOne is put, put_from, upsert and upsert_from.
func putOne(h C.uintptr_t, key *C.char, value C.uintptr_t, size C.size_t, cfg *C.mooncake_replicate_config_t, upsert bool) int {
	s, cl, err := open(h)
	if err != nil {
		return fail(err)
	}
	k, err := goKey(key)
	if err != nil {
		return fail(err)
	}
	b, err := bytesAt("value", uintptr(value), uint64(size))
	if err != nil {
		return fail(err)
	}
	a, err := replicateArgs(cfg)
	if err != nil {
		return fail(err)
	}
	a.upsert = upsert
	rc, err := s.replicateConfig(cl, a)
	if err != nil {
		return fail(err)
	}
	// Put hashes the value in this goroutine before anything is sent: a bad pointer faults here.
	return fail(okIfExists(cl.Put(bg, k, b, rc), a))
}

//export mooncake_store_put
func mooncake_store_put(h C.uintptr_t, key *C.char, value C.uintptr_t, size C.size_t, cfg *C.mooncake_replicate_config_t) (rc C.int) {
	defer catchInt(&rc, debug.SetPanicOnFault(true))
	return C.int(putOne(h, key, value, size, cfg, false))
}

//export mooncake_store_put_from
func mooncake_store_put_from(h C.uintptr_t, key *C.char, buffer C.uintptr_t, size C.size_t, cfg *C.mooncake_replicate_config_t) (rc C.int) {
	defer catchInt(&rc, debug.SetPanicOnFault(true))
	return C.int(putOne(h, key, buffer, size, cfg, false))
}

//export mooncake_store_upsert
func mooncake_store_upsert(h C.uintptr_t, key *C.char, value C.uintptr_t, size C.size_t, cfg *C.mooncake_replicate_config_t) (rc C.int) {
	defer catchInt(&rc, debug.SetPanicOnFault(true))
	return C.int(putOne(h, key, value, size, cfg, true))
}

//export mooncake_store_upsert_from
func mooncake_store_upsert_from(h C.uintptr_t, key *C.char, buffer C.uintptr_t, size C.size_t, cfg *C.mooncake_replicate_config_t) (rc C.int) {
	defer catchInt(&rc, debug.SetPanicOnFault(true))
	return C.int(putOne(h, key, buffer, size, cfg, true))
}

// partsOf returns the caller's parts (each checked and read-probed in this goroutine).
func partsOf(bufs []C.uintptr_t, sizes []C.size_t) ([][]byte, error) {
	parts := make([][]byte, len(bufs))
	for i := range bufs {
		b, err := bytesAt(fmt.Sprintf("buffers[%d]", i), uintptr(bufs[i]), uint64(sizes[i]))
		if err != nil {
			return nil, err
		}
		probeRead(b)
		parts[i] = b
	}
	return parts, nil
}

// batchPut is batch_put_from, batch_upsert_from and batch_put_from_multi_buffers (partCounts
// nil: one part per object).
func batchPut(h C.uintptr_t, keys *C.uintptr_t, count C.size_t, buffers *C.uintptr_t, sizes *C.size_t, partCounts *C.size_t,
	cfg *C.mooncake_replicate_config_t, results *C.int, upsert bool) int {
	s, cl, err := open(h)
	if err != nil {
		return fail(err)
	}
	n, err := checkCount(count)
	if err != nil {
		return fail(err)
	}
	out, err := array("results_out", results, n)
	if err != nil {
		return fail(err)
	}
	ks, err := goKeys(keys, n)
	if err != nil {
		return fail(err)
	}
	counts := make([]int, n)
	total := 0
	if partCounts == nil {
		for i := range counts {
			counts[i] = 1
		}
		total = n
	} else {
		pc, err := array("part_counts", partCounts, n)
		if err != nil {
			return fail(err)
		}
		for i, c := range pc {
			if uint64(c) > maxParts || total+int(c) > maxParts {
				return fail(fmt.Errorf("%w: more than %d parts", base.ErrInvalidParams, maxParts))
			}
			counts[i] = int(c)
			total += int(c)
		}
	}
	bufs, err := array("buffers", buffers, total)
	if err != nil {
		return fail(err)
	}
	szs, err := array("sizes", sizes, total)
	if err != nil {
		return fail(err)
	}
	parts, err := partsOf(bufs, szs)
	if err != nil {
		return fail(err)
	}
	a, err := replicateArgs(cfg)
	if err != nil {
		return fail(err)
	}
	a.upsert = upsert
	rc, err := s.replicateConfig(cl, a)
	if err != nil {
		return fail(err)
	}
	var errs []error
	if partCounts == nil {
		errs = cl.BatchPut(bg, ks, parts, rc)
	} else {
		objs := make([][][]byte, n)
		at := 0
		for i, c := range counts {
			objs[i], at = parts[at:at+c], at+c
		}
		errs = cl.BatchPutParts(bg, ks, objs, rc)
	}
	recorded := false
	for i, err := range errs {
		err = okIfExists(err, a)
		out[i] = C.int(errorCode(err))
		if err != nil && !recorded {
			setLastError(err)
			recorded = true
		}
	}
	return 0
}

//export mooncake_store_batch_put_from
func mooncake_store_batch_put_from(h C.uintptr_t, keys *C.uintptr_t, buffers *C.uintptr_t, sizes *C.size_t, count C.size_t,
	cfg *C.mooncake_replicate_config_t, results *C.int) (rc C.int) {
	defer catchInt(&rc, debug.SetPanicOnFault(true))
	return C.int(batchPut(h, keys, count, buffers, sizes, nil, cfg, results, false))
}

//export mooncake_store_batch_upsert_from
func mooncake_store_batch_upsert_from(h C.uintptr_t, keys *C.uintptr_t, buffers *C.uintptr_t, sizes *C.size_t, count C.size_t,
	cfg *C.mooncake_replicate_config_t, results *C.int) (rc C.int) {
	defer catchInt(&rc, debug.SetPanicOnFault(true))
	return C.int(batchPut(h, keys, count, buffers, sizes, nil, cfg, results, true))
}

//export mooncake_store_batch_put_from_multi_buffers
func mooncake_store_batch_put_from_multi_buffers(h C.uintptr_t, keys *C.uintptr_t, count C.size_t, buffers *C.uintptr_t,
	sizes *C.size_t, partCounts *C.size_t, cfg *C.mooncake_replicate_config_t, results *C.int) (rc C.int) {
	defer catchInt(&rc, debug.SetPanicOnFault(true))
	if partCounts == nil {
		return C.int(fail(fmt.Errorf("%w: part_counts is NULL", base.ErrInvalidParams)))
	}
	return C.int(batchPut(h, keys, count, buffers, sizes, partCounts, cfg, results, false))
}

// putParts is put_parts and upsert_parts.
func putParts(h C.uintptr_t, key *C.char, parts *C.uintptr_t, sizes *C.size_t, count C.size_t,
	cfg *C.mooncake_replicate_config_t, upsert bool) int {
	s, cl, err := open(h)
	if err != nil {
		return fail(err)
	}
	k, err := goKey(key)
	if err != nil {
		return fail(err)
	}
	if count > maxParts {
		return fail(fmt.Errorf("%w: %d parts (at most %d)", base.ErrInvalidParams, uint64(count), maxParts))
	}
	bufs, err := array("parts", parts, int(count))
	if err != nil {
		return fail(err)
	}
	szs, err := array("sizes", sizes, int(count))
	if err != nil {
		return fail(err)
	}
	ps, err := partsOf(bufs, szs)
	if err != nil {
		return fail(err)
	}
	a, err := replicateArgs(cfg)
	if err != nil {
		return fail(err)
	}
	a.upsert = upsert
	rc, err := s.replicateConfig(cl, a)
	if err != nil {
		return fail(err)
	}
	return fail(okIfExists(cl.PutParts(bg, k, ps, rc), a))
}

//export mooncake_store_put_parts
func mooncake_store_put_parts(h C.uintptr_t, key *C.char, parts *C.uintptr_t, sizes *C.size_t, count C.size_t,
	cfg *C.mooncake_replicate_config_t) (rc C.int) {
	defer catchInt(&rc, debug.SetPanicOnFault(true))
	return C.int(putParts(h, key, parts, sizes, count, cfg, false))
}

//export mooncake_store_upsert_parts
func mooncake_store_upsert_parts(h C.uintptr_t, key *C.char, parts *C.uintptr_t, sizes *C.size_t, count C.size_t,
	cfg *C.mooncake_replicate_config_t) (rc C.int) {
	defer catchInt(&rc, debug.SetPanicOnFault(true))
	return C.int(putParts(h, key, parts, sizes, count, cfg, true))
}

// ---- Get ----

//export mooncake_store_get_into
func mooncake_store_get_into(h C.uintptr_t, key *C.char, buffer C.uintptr_t, size C.size_t) (rc C.int64_t) {
	defer catchInt64(&rc, debug.SetPanicOnFault(true))
	_, cl, err := open(h)
	if err != nil {
		return C.int64_t(fail(err))
	}
	k, err := goKey(key)
	if err != nil {
		return C.int64_t(fail(err))
	}
	b, err := bytesAt("buffer", uintptr(buffer), uint64(size))
	if err != nil {
		return C.int64_t(fail(err))
	}
	probeWrite(b)
	n, err := cl.GetInto(bg, k, b)
	if err != nil {
		return C.int64_t(fail(err))
	}
	return C.int64_t(n)
}

//export mooncake_store_batch_get_into
func mooncake_store_batch_get_into(h C.uintptr_t, keys *C.uintptr_t, buffers *C.uintptr_t, sizes *C.size_t, count C.size_t,
	results *C.int64_t) (rc C.int) {
	defer catchInt(&rc, debug.SetPanicOnFault(true))
	_, cl, err := open(h)
	if err != nil {
		return C.int(fail(err))
	}
	n, err := checkCount(count)
	if err != nil {
		return C.int(fail(err))
	}
	out, err := array("results_out", results, n)
	if err != nil {
		return C.int(fail(err))
	}
	ks, err := goKeys(keys, n)
	if err != nil {
		return C.int(fail(err))
	}
	bufs, err := array("buffers", buffers, n)
	if err != nil {
		return C.int(fail(err))
	}
	szs, err := array("sizes", sizes, n)
	if err != nil {
		return C.int(fail(err))
	}
	dsts := make([][]byte, n)
	for i := range dsts {
		if dsts[i], err = bytesAt(fmt.Sprintf("buffers[%d]", i), uintptr(bufs[i]), uint64(szs[i])); err != nil {
			return C.int(fail(err))
		}
		probeWrite(dsts[i])
	}
	got, errs := cl.BatchGetInto(bg, ks, dsts)
	setResults(out, got, errs)
	return 0
}

// setResults writes sizes or codes, recording the first failure as the last error.
func setResults(out []C.int64_t, sizes []int, errs []error) {
	recorded := false
	for i, err := range errs {
		if err == nil {
			out[i] = C.int64_t(sizes[i])
			continue
		}
		out[i] = C.int64_t(errorCode(err))
		if !recorded {
			setLastError(err)
			recorded = true
		}
	}
}

//export mooncake_store_batch_get_into_multi_buffers
func mooncake_store_batch_get_into_multi_buffers(h C.uintptr_t, keys *C.uintptr_t, count C.size_t, buffers *C.uintptr_t,
	sizes *C.size_t, partCounts *C.size_t, results *C.int64_t) (rc C.int) {
	defer catchInt(&rc, debug.SetPanicOnFault(true))
	_, cl, err := open(h)
	if err != nil {
		return C.int(fail(err))
	}
	n, err := checkCount(count)
	if err != nil {
		return C.int(fail(err))
	}
	out, err := array("results_out", results, n)
	if err != nil {
		return C.int(fail(err))
	}
	ks, err := goKeys(keys, n)
	if err != nil {
		return C.int(fail(err))
	}
	pc, err := array("part_counts", partCounts, n)
	if err != nil {
		return C.int(fail(err))
	}
	total := 0
	for _, c := range pc {
		if uint64(c) > maxParts || total+int(c) > maxParts {
			return C.int(fail(fmt.Errorf("%w: more than %d parts", base.ErrInvalidParams, maxParts)))
		}
		total += int(c)
	}
	bufs, err := array("buffers", buffers, total)
	if err != nil {
		return C.int(fail(err))
	}
	szs, err := array("sizes", sizes, total)
	if err != nil {
		return C.int(fail(err))
	}
	parts := make([][][]byte, n) // object i's destination parts
	at := 0
	for i, c := range pc {
		for j := 0; j < int(c); j++ {
			b, err := bytesAt(fmt.Sprintf("buffers[%d]", at), uintptr(bufs[at]), uint64(szs[at]))
			if err != nil {
				return C.int(fail(err))
			}
			probeWrite(b)
			parts[i] = append(parts[i], b)
			at++
		}
	}
	// An object is read whole into a scratch buffer (verified against its checksum), then
	// scattered over its parts: one copy, which a single part avoids.
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
		if errs[i] != nil || len(parts[i]) == 1 {
			continue
		}
		rest := scratch[i][:got[i]]
		for _, p := range parts[i] {
			rest = rest[copy(p, rest):]
		}
	}
	setResults(out, got, errs)
	return 0
}

//export mooncake_store_get_into_ranges
func mooncake_store_get_into_ranges(h C.uintptr_t, count C.size_t, keys *C.uintptr_t, dsts *C.uintptr_t, srcOffsets *C.uint64_t,
	sizes *C.size_t, results *C.int64_t) (rc C.int) {
	defer catchInt(&rc, debug.SetPanicOnFault(true))
	s, cl, err := open(h)
	if err != nil {
		return C.int(fail(err))
	}
	n, err := checkCount(count)
	if err != nil {
		return C.int(fail(err))
	}
	out, err := array("results_out", results, n)
	if err != nil {
		return C.int(fail(err))
	}
	ks, err := goKeys(keys, n)
	if err != nil {
		return C.int(fail(err))
	}
	ds, err := array("dsts", dsts, n)
	if err != nil {
		return C.int(fail(err))
	}
	offs, err := array("src_offsets", srcOffsets, n)
	if err != nil {
		return C.int(fail(err))
	}
	szs, err := array("sizes", sizes, n)
	if err != nil {
		return C.int(fail(err))
	}
	reads := make([]client.RangeRead, 0, n)
	idx := make([]int, 0, n) // reads -> fragment
	errs := make([]error, n)
	for i := range n {
		b, err := bytesAt(fmt.Sprintf("dsts[%d]", i), uintptr(ds[i]), uint64(szs[i]))
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
	for j, err := range cl.BatchGetRanges(bg, reads) {
		errs[idx[j]] = err
	}
	got := make([]int, n)
	for i := range got {
		got[i] = int(szs[i])
	}
	setResults(out, got, errs)
	return 0
}

// cBuffers allocates C memory for gets into library-owned buffers. An allocation made for an
// attempt that was retried (the object changed between lookup and read) is freed at once.
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

//export mooncake_store_get_buffer
func mooncake_store_get_buffer(h C.uintptr_t, key *C.char, bufferOut *C.uintptr_t) (rc C.int64_t) {
	defer catchInt64(&rc, debug.SetPanicOnFault(true))
	outs, err := array("buffer_out", bufferOut, 1)
	if err != nil {
		return C.int64_t(fail(err))
	}
	outs[0] = 0
	_, cl, err := open(h)
	if err != nil {
		return C.int64_t(fail(err))
	}
	k, err := goKey(key)
	if err != nil {
		return C.int64_t(fail(err))
	}
	var b cBuffer
	n, err := cl.GetWith(bg, k, b.alloc)
	if err != nil {
		b.free()
		return C.int64_t(fail(err))
	}
	outs[0] = C.uintptr_t(uintptr(b.p))
	return C.int64_t(n)
}

//export mooncake_store_batch_get_buffer
func mooncake_store_batch_get_buffer(h C.uintptr_t, keys *C.uintptr_t, count C.size_t, buffersOut *C.uintptr_t,
	results *C.int64_t) (rc C.int) {
	defer catchInt(&rc, debug.SetPanicOnFault(true))
	_, cl, err := open(h)
	if err != nil {
		return C.int(fail(err))
	}
	n, err := checkCount(count)
	if err != nil {
		return C.int(fail(err))
	}
	out, err := array("results_out", results, n)
	if err != nil {
		return C.int(fail(err))
	}
	bout, err := array("buffers_out", buffersOut, n)
	if err != nil {
		return C.int(fail(err))
	}
	ks, err := goKeys(keys, n)
	if err != nil {
		return C.int(fail(err))
	}
	bufs := make([]cBuffer, n)
	got, errs := cl.BatchGetWith(bg, ks, func(i int, size int64) ([]byte, error) { return bufs[i].alloc(size) })
	for i := range bufs {
		if errs[i] != nil {
			bufs[i].free()
		}
		bout[i] = C.uintptr_t(uintptr(bufs[i].p))
	}
	setResults(out, got, errs)
	return 0
}

//export mooncake_store_free_buffer
func mooncake_store_free_buffer(p C.uintptr_t) {
	if p != 0 {
		C.free(pointerOf(uintptr(p)))
	}
}

// ---- Existence, size, descriptors, hostname ----

//export mooncake_store_is_exist
func mooncake_store_is_exist(h C.uintptr_t, key *C.char) (rc C.int) {
	defer catchInt(&rc, debug.SetPanicOnFault(true))
	_, cl, err := open(h)
	if err != nil {
		return C.int(fail(err))
	}
	k, err := goKey(key)
	if err != nil {
		return C.int(fail(err))
	}
	ok, err := cl.Exists(bg, k)
	if err != nil {
		return C.int(fail(err))
	}
	if ok {
		return 1
	}
	return 0
}

//export mooncake_store_batch_is_exist
func mooncake_store_batch_is_exist(h C.uintptr_t, keys *C.uintptr_t, count C.size_t, results *C.int) (rc C.int) {
	defer catchInt(&rc, debug.SetPanicOnFault(true))
	_, cl, err := open(h)
	if err != nil {
		return C.int(fail(err))
	}
	n, err := checkCount(count)
	if err != nil {
		return C.int(fail(err))
	}
	out, err := array("results_out", results, n)
	if err != nil {
		return C.int(fail(err))
	}
	ks, err := goKeys(keys, n)
	if err != nil {
		return C.int(fail(err))
	}
	exists, err := cl.BatchExists(bg, ks)
	for i := range out {
		switch {
		case err != nil:
			out[i] = -1
		case exists[i]:
			out[i] = 1
		default:
			out[i] = 0
		}
	}
	if err != nil {
		setLastError(err)
	}
	return 0
}

//export mooncake_store_get_size
func mooncake_store_get_size(h C.uintptr_t, key *C.char) (rc C.int64_t) {
	defer catchInt64(&rc, debug.SetPanicOnFault(true))
	_, cl, err := open(h)
	if err != nil {
		return C.int64_t(fail(err))
	}
	k, err := goKey(key)
	if err != nil {
		return C.int64_t(fail(err))
	}
	n, err := cl.Size(bg, k)
	if err != nil {
		return C.int64_t(fail(err))
	}
	return C.int64_t(n)
}

// replicaDesc is the JSON of mooncake_store_get_replica_desc (the header shows it).
type replicaDesc struct {
	Key      string        `json:"key"`
	Size     int64         `json:"size"`
	Version  uint64        `json:"version"`
	Replicas []replicaJSON `json:"replicas"`
}

type replicaJSON struct {
	SegmentName string `json:"segment_name"`
	Address     string `json:"address"`
	Status      string `json:"status"`
	Type        string `json:"type"`
}

//export mooncake_store_get_replica_desc
func mooncake_store_get_replica_desc(h C.uintptr_t, key *C.char, jsonOut *C.uintptr_t) (rc C.int64_t) {
	defer catchInt64(&rc, debug.SetPanicOnFault(true))
	outs, err := array("json_out", jsonOut, 1)
	if err != nil {
		return C.int64_t(fail(err))
	}
	outs[0] = 0
	_, cl, err := open(h)
	if err != nil {
		return C.int64_t(fail(err))
	}
	k, err := goKey(key)
	if err != nil {
		return C.int64_t(fail(err))
	}
	info, err := cl.Describe(bg, k)
	if err != nil {
		return C.int64_t(fail(err))
	}
	d := replicaDesc{Key: info.Key, Size: info.Size, Version: uint64(info.Version), Replicas: []replicaJSON{}}
	for _, r := range info.Replicas {
		d.Replicas = append(d.Replicas, replicaJSON{SegmentName: string(r.WorkerID), Address: r.Address, Status: "COMPLETE", Type: "memory"})
	}
	text, err := json.Marshal(d)
	if err != nil {
		return C.int64_t(fail(fmt.Errorf("%w: %v", base.ErrInternal, err)))
	}
	outs[0] = C.uintptr_t(uintptr(unsafe.Pointer(C.CString(string(text)))))
	return C.int64_t(len(text))
}

//export mooncake_store_get_hostname
func mooncake_store_get_hostname(h C.uintptr_t, bufOut C.uintptr_t, bufLen C.size_t) (rc C.int) {
	defer catchInt(&rc, debug.SetPanicOnFault(true))
	s, err := lookupHandle(uintptr(h))
	if err != nil {
		return C.int(fail(err))
	}
	name := s.getHostname()
	b, err := bytesAt("buf_out", uintptr(bufOut), uint64(bufLen))
	if err == nil && len(b) < len(name)+1 {
		err = fmt.Errorf("%w: buf_out of %d bytes for a hostname of %d and its NUL", base.ErrInvalidParams, len(b), len(name))
	}
	if err != nil {
		return C.int(fail(err))
	}
	b[copy(b, name)] = 0
	return 0
}

// ---- Remove ----

//export mooncake_store_remove
func mooncake_store_remove(h C.uintptr_t, key *C.char, force C.int) (rc C.int) {
	defer catchInt(&rc, debug.SetPanicOnFault(true))
	_, cl, err := open(h)
	if err != nil {
		return C.int(fail(err))
	}
	k, err := goKey(key)
	if err != nil {
		return C.int(fail(err))
	}
	return C.int(fail(cl.Remove(bg, k)))
}

//export mooncake_store_remove_by_regex
func mooncake_store_remove_by_regex(h C.uintptr_t, pattern *C.char, force C.int) (rc C.int64_t) {
	defer catchInt64(&rc, debug.SetPanicOnFault(true))
	_, cl, err := open(h)
	if err != nil {
		return C.int64_t(fail(err))
	}
	re, err := goString("pattern", uintptr(unsafe.Pointer(pattern)), 1<<16)
	if err != nil {
		return C.int64_t(fail(err))
	}
	n, err := cl.RemoveByRegex(bg, re)
	if err != nil {
		return C.int64_t(fail(err))
	}
	return C.int64_t(n)
}

//export mooncake_store_remove_all
func mooncake_store_remove_all(h C.uintptr_t, force C.int) (rc C.int64_t) {
	defer catchInt64(&rc, debug.SetPanicOnFault(true))
	_, cl, err := open(h)
	if err != nil {
		return C.int64_t(fail(err))
	}
	n, err := cl.RemoveAll(bg)
	if err != nil {
		return C.int64_t(fail(err))
	}
	return C.int64_t(n)
}

//export mooncake_store_batch_remove
func mooncake_store_batch_remove(h C.uintptr_t, keys *C.uintptr_t, count C.size_t, force C.int, results *C.int) (rc C.int) {
	defer catchInt(&rc, debug.SetPanicOnFault(true))
	_, cl, err := open(h)
	if err != nil {
		return C.int(fail(err))
	}
	n, err := checkCount(count)
	if err != nil {
		return C.int(fail(err))
	}
	out, err := array("results_out", results, n)
	if err != nil {
		return C.int(fail(err))
	}
	ks, err := goKeys(keys, n)
	if err != nil {
		return C.int(fail(err))
	}
	recorded := false
	for i, err := range cl.BatchRemove(bg, ks) {
		out[i] = C.int(errorCode(err))
		if err != nil && !recorded {
			setLastError(err)
			recorded = true
		}
	}
	return 0
}

// ---- Buffer registration ----

//export mooncake_store_register_buffer
func mooncake_store_register_buffer(h C.uintptr_t, buffer C.uintptr_t, size C.size_t) (rc C.int) {
	defer catchInt(&rc, debug.SetPanicOnFault(true))
	s, err := lookupHandle(uintptr(h))
	if err == nil {
		err = checkRange("buffer", uintptr(buffer), uint64(size))
	}
	if err == nil {
		err = s.register(uintptr(buffer), uintptr(size))
	}
	return C.int(fail(err))
}

//export mooncake_store_unregister_buffer
func mooncake_store_unregister_buffer(h C.uintptr_t, buffer C.uintptr_t) (rc C.int) {
	defer catchInt(&rc, debug.SetPanicOnFault(true))
	s, err := lookupHandle(uintptr(h))
	if err == nil {
		err = s.unregister(uintptr(buffer))
	}
	return C.int(fail(err))
}

// ---- Errors ----

//export mooncake_store_last_error
func mooncake_store_last_error() *C.char { return lastError() }

// errorNames holds each code's name as static C text (allocated once, never freed).
var errorNames = func() map[int]*C.char {
	m := make(map[int]*C.char, len(codeNames)+1)
	for c, name := range codeNames {
		m[c] = C.CString(name)
	}
	m[1] = C.CString("UNKNOWN") // any code not listed
	return m
}()

//export mooncake_store_error_name
func mooncake_store_error_name(code C.int) *C.char {
	if p, ok := errorNames[int(code)]; ok {
		return p
	}
	return errorNames[1]
}
