//go:build cgo

package main

/*
#include <stdint.h>
#define MOONCAKE_STORE_TYPES_ONLY
#include "mooncake_store.h"
#include "offthread.h"
*/
import "C"

import (
	"fmt"
	"runtime/debug"

	"github.com/mooncake-go/mooncake/client"
	"github.com/mooncake-go/mooncake/internal/base"
)

// The put exports (mooncake_store.h "Put"). Each export is a one-line call of an inner
// function that returns an error; fail maps it.

// replicateConfig converts the C config and applies the call's upsert flag.
func (s *store) replicateConfigC(cl *client.Client, cfg *C.mooncake_replicate_config_t, upsert bool) (client.ReplicateConfig, rcArgs, error) {
	a, err := replicateArgs(cfg)
	if err != nil {
		return client.ReplicateConfig{}, a, err
	}
	a.upsert = upsert
	rc, err := s.replicateConfig(cl, a)
	return rc, a, err
}

// putOne is put, put_from, upsert and upsert_from.
func putOne(h C.uintptr_t, key *C.char, value C.uintptr_t, size C.size_t, cfg *C.mooncake_replicate_config_t, upsert bool) error {
	s, cl, k, err := openKey(h, key)
	if err != nil {
		return err
	}
	var m callerMem
	defer m.release()
	b, err := m.input("value", uintptr(value), uint64(size))
	if err == nil {
		err = m.fetch("value")
	}
	if err != nil {
		return err
	}
	rc, a, err := s.replicateConfigC(cl, cfg, upsert)
	if err != nil {
		return err
	}
	// Put hashes the value in this goroutine before anything is sent: a bad pointer faults here.
	return okIfExists(cl.Put(bg, k, b, rc), a)
}

// mcgo_put_one is the Go half of mooncake_store_put, _put_from, _upsert and _upsert_from
// (offthread.go): a put blocks on three round trips (PutStart, the transfer, PutEnd), each a
// wake-up of the locked calling thread if run on it.
//
//export mcgo_put_one
func mcgo_put_one(call *C.mc_call, h C.uintptr_t, key *C.char, value C.uintptr_t, size C.size_t, cfg *C.mooncake_replicate_config_t, upsert C.int) {
	offThread(call, func() error { return putOne(h, key, value, size, cfg, upsert != 0) })
}

// partsOf returns the caller's parts, each checked and read-probed in this goroutine (a
// device part as a host copy).
func partsOf(m *callerMem, bufs []C.uintptr_t, sizes []C.size_t) ([][]byte, error) {
	parts := make([][]byte, len(bufs))
	for i := range bufs {
		b, err := m.input(fmt.Sprintf("buffers[%d]", i), uintptr(bufs[i]), uint64(sizes[i]))
		if err != nil {
			return nil, err
		}
		probeRead(b)
		parts[i] = b
	}
	if err := m.fetch("buffers"); err != nil {
		return nil, err
	}
	return parts, nil
}

// partGroups reads part_counts (n entries) and returns them with their sum, bounded by maxParts.
func partGroups(partCounts *C.size_t, n int) ([]int, int, error) {
	pc, err := array("part_counts", partCounts, n)
	if err != nil {
		return nil, 0, err
	}
	counts, total := make([]int, n), 0
	for i, c := range pc {
		if uint64(c) > maxParts || total+int(c) > maxParts {
			return nil, 0, fmt.Errorf("%w: more than %d parts", base.ErrInvalidParams, maxParts)
		}
		counts[i] = int(c)
		total += int(c)
	}
	return counts, total, nil
}

// batchPut is batch_put_from, batch_upsert_from and batch_put_from_multi_buffers (partCounts
// nil: one part per object).
func batchPut(h C.uintptr_t, keys *C.uintptr_t, count C.size_t, buffers *C.uintptr_t, sizes *C.size_t, partCounts *C.size_t,
	cfg *C.mooncake_replicate_config_t, results *C.int, upsert bool) error {
	s, cl, ks, err := openBatch(h, keys, count)
	if err != nil {
		return err
	}
	n := len(ks)
	out, err := array("results_out", results, n)
	if err != nil {
		return err
	}
	counts, total := []int(nil), n
	if partCounts != nil {
		if counts, total, err = partGroups(partCounts, n); err != nil {
			return err
		}
	}
	bufs, err := array("buffers", buffers, total)
	if err != nil {
		return err
	}
	szs, err := array("sizes", sizes, total)
	if err != nil {
		return err
	}
	var m callerMem
	defer m.release()
	parts, err := partsOf(&m, bufs, szs)
	if err != nil {
		return err
	}
	rc, a, err := s.replicateConfigC(cl, cfg, upsert)
	if err != nil {
		return err
	}
	var errs []error
	if counts == nil {
		errs = cl.BatchPut(bg, ks, parts, rc)
	} else {
		objs := make([][][]byte, n)
		at := 0
		for i, c := range counts {
			objs[i], at = parts[at:at+c], at+c
		}
		errs = cl.BatchPutParts(bg, ks, objs, rc)
	}
	for i := range errs {
		errs[i] = okIfExists(errs[i], a)
	}
	return setResults(out, nil, errs)
}

// The Go halves of the batch puts, run off the calling thread (offthread.go).

//export mcgo_batch_put_from
func mcgo_batch_put_from(call *C.mc_call, h C.uintptr_t, keys *C.uintptr_t, buffers *C.uintptr_t, sizes *C.size_t,
	count C.size_t, cfg *C.mooncake_replicate_config_t, results *C.int) {
	offThread(call, func() error { return batchPut(h, keys, count, buffers, sizes, nil, cfg, results, false) })
}

//export mcgo_batch_upsert_from
func mcgo_batch_upsert_from(call *C.mc_call, h C.uintptr_t, keys *C.uintptr_t, buffers *C.uintptr_t, sizes *C.size_t,
	count C.size_t, cfg *C.mooncake_replicate_config_t, results *C.int) {
	offThread(call, func() error { return batchPut(h, keys, count, buffers, sizes, nil, cfg, results, true) })
}

//export mcgo_batch_put_from_multi_buffers
func mcgo_batch_put_from_multi_buffers(call *C.mc_call, h C.uintptr_t, keys *C.uintptr_t, count C.size_t,
	buffers *C.uintptr_t, sizes *C.size_t, partCounts *C.size_t, cfg *C.mooncake_replicate_config_t, results *C.int) {
	offThread(call, func() error {
		if partCounts == nil {
			return fmt.Errorf("%w: part_counts is NULL", base.ErrInvalidParams)
		}
		return batchPut(h, keys, count, buffers, sizes, partCounts, cfg, results, false)
	})
}

// putParts is put_parts and upsert_parts.
func putParts(h C.uintptr_t, key *C.char, parts *C.uintptr_t, sizes *C.size_t, count C.size_t,
	cfg *C.mooncake_replicate_config_t, upsert bool) error {
	s, cl, k, err := openKey(h, key)
	if err != nil {
		return err
	}
	if count > maxParts {
		return fmt.Errorf("%w: %d parts (at most %d)", base.ErrInvalidParams, uint64(count), maxParts)
	}
	bufs, err := array("parts", parts, int(count))
	if err != nil {
		return err
	}
	szs, err := array("sizes", sizes, int(count))
	if err != nil {
		return err
	}
	var m callerMem
	defer m.release()
	ps, err := partsOf(&m, bufs, szs)
	if err != nil {
		return err
	}
	rc, a, err := s.replicateConfigC(cl, cfg, upsert)
	if err != nil {
		return err
	}
	return okIfExists(cl.PutParts(bg, k, ps, rc), a)
}

//export mooncake_store_put_parts
func mooncake_store_put_parts(h C.uintptr_t, key *C.char, parts *C.uintptr_t, sizes *C.size_t, count C.size_t,
	cfg *C.mooncake_replicate_config_t) (rc C.int) {
	defer catchInt(&rc, debug.SetPanicOnFault(true))
	return C.int(fail(putParts(h, key, parts, sizes, count, cfg, false)))
}

//export mooncake_store_upsert_parts
func mooncake_store_upsert_parts(h C.uintptr_t, key *C.char, parts *C.uintptr_t, sizes *C.size_t, count C.size_t,
	cfg *C.mooncake_replicate_config_t) (rc C.int) {
	defer catchInt(&rc, debug.SetPanicOnFault(true))
	return C.int(fail(putParts(h, key, parts, sizes, count, cfg, true)))
}
