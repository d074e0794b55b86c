//go:build cgo

package main

/*
#include <stdint.h>
#define MOONCAKE_STORE_TYPES_ONLY
#include "mooncake_store.h"
*/
import "C"

import (
	"fmt"
	"runtime/debug"

	"github.com/mooncake-go/mooncake/client"
	"github.com/mooncake-go/mooncake/internal/base"
)

// The session exports (mooncake_store.h "Put and get sessions") over client/session.go:
// Mooncake's layer-wise ranged calls. Ranges are flattened as the multi-buffer calls flatten
// parts: key i owns range_counts[i] consecutive entries of buffers, sizes and offsets.

// maxRanges bounds the ranges of one call (all keys together).
const maxRanges = 1 << 20

// rangeGroups checks range_counts and returns it with the total number of ranges.
func rangeGroups(rangeCounts *C.size_t, n int) ([]int, int, error) {
	rc, err := array("range_counts", rangeCounts, n)
	if err != nil {
		return nil, 0, err
	}
	counts := make([]int, n)
	total := 0
	for i, c := range rc {
		if uint64(c) > maxRanges || total+int(c) > maxRanges {
			return nil, 0, fmt.Errorf("%w: more than %d ranges in one call", base.ErrInvalidParams, maxRanges)
		}
		counts[i] = int(c)
		total += int(c)
	}
	return counts, total, nil
}

// sessionRanges reads the flattened range arrays of a ranged call.
func sessionRanges(n int, buffers *C.uintptr_t, sizes *C.size_t, offsets *C.uint64_t, rangeCounts *C.size_t) (
	counts []int, bufs []C.uintptr_t, szs []C.size_t, offs []C.uint64_t, err error) {
	counts, total, err := rangeGroups(rangeCounts, n)
	if err != nil {
		return nil, nil, nil, nil, err
	}
	if bufs, err = array("buffers", buffers, total); err != nil {
		return nil, nil, nil, nil, err
	}
	if szs, err = array("sizes", sizes, total); err != nil {
		return nil, nil, nil, nil, err
	}
	if offs, err = array("offsets", offsets, total); err != nil {
		return nil, nil, nil, nil, err
	}
	for i, o := range offs {
		if uint64(o) > 1<<62 {
			return nil, nil, nil, nil, fmt.Errorf("%w: range %d: offset %d", base.ErrInvalidParams, i, uint64(o))
		}
	}
	return counts, bufs, szs, offs, nil
}

func putSessionStart(h C.uintptr_t, keys *C.uintptr_t, sizes *C.size_t, count C.size_t,
	cfg *C.mooncake_replicate_config_t, results *C.int) error {
	s, cl, ks, err := openBatch(h, keys, count)
	if err != nil {
		return err
	}
	out, err := array("results_out", results, len(ks))
	if err != nil {
		return err
	}
	szs, err := array("sizes", sizes, len(ks))
	if err != nil {
		return err
	}
	rc, _, err := s.replicateConfigC(cl, cfg, false)
	if err != nil {
		return err
	}
	objSizes := make([]int64, len(ks))
	for i, z := range szs {
		if uint64(z) > 1<<62 {
			return fmt.Errorf("%w: sizes[%d] is %d", base.ErrInvalidParams, i, uint64(z))
		}
		objSizes[i] = int64(z)
	}
	return setResults(out, nil, cl.PutSessionStart(bg, ks, objSizes, rc))
}

//export mooncake_store_batch_put_session_start
func mooncake_store_batch_put_session_start(h C.uintptr_t, keys *C.uintptr_t, sizes *C.size_t, count C.size_t,
	cfg *C.mooncake_replicate_config_t, results *C.int) (rc C.int) {
	defer catchInt(&rc, debug.SetPanicOnFault(true))
	return C.int(fail(putSessionStart(h, keys, sizes, count, cfg, results)))
}

func putSessionRanges(h C.uintptr_t, keys *C.uintptr_t, count C.size_t, buffers *C.uintptr_t, sizes *C.size_t,
	offsets *C.uint64_t, rangeCounts *C.size_t, results *C.int64_t) error {
	_, cl, ks, err := openBatch(h, keys, count)
	if err != nil {
		return err
	}
	out, err := array("results_out", results, len(ks))
	if err != nil {
		return err
	}
	counts, bufs, szs, offs, err := sessionRanges(len(ks), buffers, sizes, offsets, rangeCounts)
	if err != nil {
		return err
	}
	var m callerMem
	defer m.release()
	ranges := make([][]client.PutRange, len(ks))
	at := 0
	for i, c := range counts {
		for j := at; j < at+c; j++ {
			b, err := m.input(fmt.Sprintf("buffers[%d]", j), uintptr(bufs[j]), uint64(szs[j]))
			if err != nil {
				return err
			}
			probeRead(b)
			ranges[i] = append(ranges[i], client.PutRange{Offset: int64(offs[j]), Src: b})
		}
		at += c
	}
	if err := m.fetch("buffers"); err != nil {
		return err
	}
	n, errs := cl.PutSessionWrite(bg, ks, ranges)
	got := make([]int, len(n))
	for i := range n {
		got[i] = int(n[i])
	}
	return setResults(out, got, errs)
}

//export mooncake_store_batch_put_from_multi_buffer_ranges
func mooncake_store_batch_put_from_multi_buffer_ranges(h C.uintptr_t, keys *C.uintptr_t, count C.size_t,
	buffers *C.uintptr_t, sizes *C.size_t, dstOffsets *C.uint64_t, rangeCounts *C.size_t, results *C.int64_t) (rc C.int) {
	defer catchInt(&rc, debug.SetPanicOnFault(true))
	return C.int(fail(putSessionRanges(h, keys, count, buffers, sizes, dstOffsets, rangeCounts, results)))
}

// sessionKeys is the body of the session calls that take keys and give one code each.
func sessionKeys(h C.uintptr_t, keys *C.uintptr_t, count C.size_t, results *C.int,
	call func(cl *client.Client, ks []string) []error) error {
	_, cl, ks, err := openBatch(h, keys, count)
	if err != nil {
		return err
	}
	out, err := array("results_out", results, len(ks))
	if err != nil {
		return err
	}
	return setResults(out, nil, call(cl, ks))
}

//export mooncake_store_batch_put_session_end
func mooncake_store_batch_put_session_end(h C.uintptr_t, keys *C.uintptr_t, count C.size_t, results *C.int) (rc C.int) {
	defer catchInt(&rc, debug.SetPanicOnFault(true))
	return C.int(fail(sessionKeys(h, keys, count, results, func(cl *client.Client, ks []string) []error {
		return cl.PutSessionEnd(bg, ks)
	})))
}

//export mooncake_store_batch_put_session_revoke
func mooncake_store_batch_put_session_revoke(h C.uintptr_t, keys *C.uintptr_t, count C.size_t, results *C.int) (rc C.int) {
	defer catchInt(&rc, debug.SetPanicOnFault(true))
	return C.int(fail(sessionKeys(h, keys, count, results, func(cl *client.Client, ks []string) []error {
		return cl.PutSessionRevoke(bg, ks)
	})))
}

//export mooncake_store_batch_get_session_start
func mooncake_store_batch_get_session_start(h C.uintptr_t, keys *C.uintptr_t, count C.size_t, results *C.int) (rc C.int) {
	defer catchInt(&rc, debug.SetPanicOnFault(true))
	return C.int(fail(sessionKeys(h, keys, count, results, func(cl *client.Client, ks []string) []error {
		return cl.GetSessionStart(bg, ks)
	})))
}

func getSessionRanges(h C.uintptr_t, keys *C.uintptr_t, count C.size_t, buffers *C.uintptr_t, sizes *C.size_t,
	offsets *C.uint64_t, rangeCounts *C.size_t, results *C.int64_t) error {
	_, cl, ks, err := openBatch(h, keys, count)
	if err != nil {
		return err
	}
	out, err := array("results_out", results, len(ks))
	if err != nil {
		return err
	}
	counts, bufs, szs, offs, err := sessionRanges(len(ks), buffers, sizes, offsets, rangeCounts)
	if err != nil {
		return err
	}
	var m callerMem
	defer m.release()
	ranges := make([][]client.GetRange, len(ks))
	at := 0
	for i, c := range counts {
		for j := at; j < at+c; j++ {
			b, err := m.output(fmt.Sprintf("buffers[%d]", j), uintptr(bufs[j]), uint64(szs[j]))
			if err != nil {
				return err
			}
			probeWrite(b)
			ranges[i] = append(ranges[i], client.GetRange{Offset: int64(offs[j]), Dst: b})
		}
		at += c
	}
	n, errs := cl.GetSessionRead(bg, ks, ranges)
	got := make([]int, len(n))
	for i := range n {
		got[i] = int(n[i])
		if errs[i] == nil {
			dsts, total := make([][]byte, len(ranges[i])), 0
			for j, r := range ranges[i] {
				dsts[j], total = r.Dst, total+len(r.Dst)
			}
			errs[i] = m.deliverParts(fmt.Sprintf("buffers of %q", ks[i]), dsts, total)
		}
	}
	return setResults(out, got, errs)
}

//export mooncake_store_batch_get_into_multi_buffer_ranges
func mooncake_store_batch_get_into_multi_buffer_ranges(h C.uintptr_t, keys *C.uintptr_t, count C.size_t,
	buffers *C.uintptr_t, sizes *C.size_t, srcOffsets *C.uint64_t, rangeCounts *C.size_t, results *C.int64_t) (rc C.int) {
	defer catchInt(&rc, debug.SetPanicOnFault(true))
	return C.int(fail(getSessionRanges(h, keys, count, buffers, sizes, srcOffsets, rangeCounts, results)))
}

//export mooncake_store_batch_get_session_end
func mooncake_store_batch_get_session_end(h C.uintptr_t, keys *C.uintptr_t, count C.size_t) (rc C.int) {
	defer catchInt(&rc, debug.SetPanicOnFault(true))
	_, cl, ks, err := openBatch(h, keys, count)
	if err != nil {
		return C.int(fail(err))
	}
	cl.GetSessionEnd(ks)
	return 0
}
