//go:build cgo

package main

/*
#include <stdint.h>
#include <stddef.h>
*/
import "C"

import (
	"runtime/debug"

	"github.com/mooncake-go/mooncake/client"
)

// Prefetch on exist for the Python package: is_exist and batch_is_exist with Mooncake's
// ExistOptions(prefetch_to_memory=True). Mooncake's C API (store_c.h) has no form that takes
// ExistOptions, so these are internal exports, declared in python/mooncake/_lib.py, not in
// mooncake_store.h. They answer as mooncake_store_is_exist and mooncake_store_batch_is_exist
// do, and have the workers holding the objects found promote them to DRAM in the background
// (docs/protocol.md, "Prefetch on exist").

var prefetchOptions = client.ExistOptions{PrefetchToMemory: true}

// mcpy_is_exist_prefetch is mooncake_store_is_exist with prefetch_to_memory: 1, 0 or a
// negative code.
//
//export mcpy_is_exist_prefetch
func mcpy_is_exist_prefetch(h C.uintptr_t, key *C.char) (rc C.int) {
	defer catchInt(&rc, debug.SetPanicOnFault(true))
	return C.int(result64(isExist(h, key, prefetchOptions)))
}

// mcpy_batch_is_exist_prefetch is mooncake_store_batch_is_exist with prefetch_to_memory.
//
//export mcpy_batch_is_exist_prefetch
func mcpy_batch_is_exist_prefetch(h C.uintptr_t, keys *C.uintptr_t, count C.size_t, results *C.int) (rc C.int) {
	defer catchInt(&rc, debug.SetPanicOnFault(true))
	return C.int(fail(batchIsExist(h, keys, count, results, prefetchOptions)))
}
