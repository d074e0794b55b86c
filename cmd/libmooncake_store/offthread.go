//go:build cgo

package main

/*
#include <stdlib.h>
#include <string.h>
#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>
#include "mooncake_store.h"
#include "offthread.h"

// The C halves of the exports that run off the calling thread (see the Go comment below).
// This file has no //export, so its preamble may define functions; the Go halves are
// declared here by hand with the types cgo gives them.

#define MC_HIDDEN __attribute__((visibility("hidden")))

MC_HIDDEN void mc_set_last_error(const char *p, size_t n);

MC_HIDDEN void mc_call_done(mc_call *call) {
	__atomic_store_n(&call->done, 1, __ATOMIC_RELEASE);
	syscall(SYS_futex, &call->done, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0);
}

// mc_call_wait blocks the calling thread until the goroutine is done with call, records its
// error text as this thread's last error, and returns its code.
static int64_t mc_call_wait(mc_call *call) {
	while (__atomic_load_n(&call->done, __ATOMIC_ACQUIRE) == 0)
		syscall(SYS_futex, &call->done, FUTEX_WAIT_PRIVATE, 0, NULL, NULL, 0);
	if (call->err != NULL) {
		mc_set_last_error(call->err, strlen(call->err));
		free(call->err);
	}
	return call->rc;
}

extern void mcgo_batch_put_from(mc_call *, uintptr_t, uintptr_t *, uintptr_t *, size_t *, size_t, mooncake_replicate_config_t *, int *);
extern void mcgo_batch_upsert_from(mc_call *, uintptr_t, uintptr_t *, uintptr_t *, size_t *, size_t, mooncake_replicate_config_t *, int *);
extern void mcgo_batch_put_from_multi_buffers(mc_call *, uintptr_t, uintptr_t *, size_t, uintptr_t *, size_t *, size_t *, mooncake_replicate_config_t *, int *);
extern void mcgo_batch_get_into(mc_call *, uintptr_t, uintptr_t *, uintptr_t *, size_t *, size_t, int64_t *, int);
extern int64_t mcgo_batch_get_into_nowait(uintptr_t, uintptr_t *, uintptr_t *, size_t *, size_t, int64_t *);
extern void mcgo_batch_get_into_multi_buffers(mc_call *, uintptr_t, uintptr_t *, size_t, uintptr_t *, size_t *, size_t *, int64_t *);
extern void mcgo_get_into_ranges(mc_call *, uintptr_t, size_t, uintptr_t *, uintptr_t *, uint64_t *, size_t *, int64_t *);
extern void mcgo_put_one(mc_call *, uintptr_t, char *, uintptr_t, size_t, mooncake_replicate_config_t *, int);
extern void mcgo_batch_get_buffer(mc_call *, uintptr_t, uintptr_t *, size_t, uintptr_t *, int64_t *);

static int mc_put_one(mooncake_store_t store, const char *key, const void *value, size_t size,
		const mooncake_replicate_config_t *config, int upsert) {
	mc_call c = {0};
	mcgo_put_one(&c, (uintptr_t)store, (char *)key, (uintptr_t)value, size, (mooncake_replicate_config_t *)config, upsert);
	return (int)mc_call_wait(&c);
}

int mooncake_store_put(mooncake_store_t store, const char *key, const void *value, size_t size,
		const mooncake_replicate_config_t *config) {
	return mc_put_one(store, key, value, size, config, 0);
}

int mooncake_store_put_from(mooncake_store_t store, const char *key, void *buffer, size_t size,
		const mooncake_replicate_config_t *config) {
	return mc_put_one(store, key, buffer, size, config, 0);
}

int mooncake_store_upsert(mooncake_store_t store, const char *key, const void *value, size_t size,
		const mooncake_replicate_config_t *config) {
	return mc_put_one(store, key, value, size, config, 1);
}

int mooncake_store_upsert_from(mooncake_store_t store, const char *key, void *buffer, size_t size,
		const mooncake_replicate_config_t *config) {
	return mc_put_one(store, key, buffer, size, config, 1);
}

int mooncake_store_batch_put_from(mooncake_store_t store, const char **keys, void **buffers, const size_t *sizes,
		size_t count, const mooncake_replicate_config_t *config, int *results_out) {
	mc_call c = {0};
	mcgo_batch_put_from(&c, (uintptr_t)store, (uintptr_t *)keys, (uintptr_t *)buffers, (size_t *)sizes, count,
		(mooncake_replicate_config_t *)config, results_out);
	return (int)mc_call_wait(&c);
}

int mooncake_store_batch_upsert_from(mooncake_store_t store, const char **keys, void **buffers, const size_t *sizes,
		size_t count, const mooncake_replicate_config_t *config, int *results_out) {
	mc_call c = {0};
	mcgo_batch_upsert_from(&c, (uintptr_t)store, (uintptr_t *)keys, (uintptr_t *)buffers, (size_t *)sizes, count,
		(mooncake_replicate_config_t *)config, results_out);
	return (int)mc_call_wait(&c);
}

int mooncake_store_batch_put_from_multi_buffers(mooncake_store_t store, const char **keys, size_t count,
		void *const *buffers, const size_t *sizes, const size_t *part_counts,
		const mooncake_replicate_config_t *config, int *results_out) {
	mc_call c = {0};
	mcgo_batch_put_from_multi_buffers(&c, (uintptr_t)store, (uintptr_t *)keys, count, (uintptr_t *)buffers,
		(size_t *)sizes, (size_t *)part_counts, (mooncake_replicate_config_t *)config, results_out);
	return (int)mc_call_wait(&c);
}

// Two passes: the objects that can be read with no network wait (cached, in shared memory)
// are read on this thread; only a batch with others left goes off-thread, for those.
int mooncake_store_batch_get_into(mooncake_store_t store, const char **keys, void **buffers, const size_t *sizes,
		size_t count, int64_t *results_out) {
	int64_t left = mcgo_batch_get_into_nowait((uintptr_t)store, (uintptr_t *)keys, (uintptr_t *)buffers, (size_t *)sizes,
		count, results_out);
	if (left == 0)
		return 0;
	mc_call c = {0};
	mcgo_batch_get_into(&c, (uintptr_t)store, (uintptr_t *)keys, (uintptr_t *)buffers, (size_t *)sizes, count, results_out,
		left > 0);
	return (int)mc_call_wait(&c);
}

int mooncake_store_batch_get_into_multi_buffers(mooncake_store_t store, const char **keys, size_t count,
		void *const *buffers, const size_t *sizes, const size_t *part_counts, int64_t *results_out) {
	mc_call c = {0};
	mcgo_batch_get_into_multi_buffers(&c, (uintptr_t)store, (uintptr_t *)keys, count, (uintptr_t *)buffers,
		(size_t *)sizes, (size_t *)part_counts, results_out);
	return (int)mc_call_wait(&c);
}

int mooncake_store_get_into_ranges(mooncake_store_t store, size_t count, const char **keys, void *const *dsts,
		const uint64_t *src_offsets, const size_t *sizes, int64_t *results_out) {
	mc_call c = {0};
	mcgo_get_into_ranges(&c, (uintptr_t)store, count, (uintptr_t *)keys, (uintptr_t *)dsts, (uint64_t *)src_offsets,
		(size_t *)sizes, results_out);
	return (int)mc_call_wait(&c);
}

int mooncake_store_batch_get_buffer(mooncake_store_t store, const char **keys, size_t count, void **buffers_out,
		int64_t *results_out) {
	mc_call c = {0};
	mcgo_batch_get_buffer(&c, (uintptr_t)store, (uintptr_t *)keys, count, (uintptr_t *)buffers_out, results_out);
	return (int)mc_call_wait(&c);
}
*/
import "C"

import (
	"runtime/debug"
)

// Off-thread calls: why and how.
//
// An exported Go function called from a C thread runs on that thread's M, locked to it.
// Each time the call blocks (an RPC reply, a worker's bytes, a WaitGroup of a batch's
// fan-out), waking it costs the scheduler a hand-off: the M that finds the goroutine ready
// must pass its P to the locked M and park itself, an extra thread switch per blocking
// point. So calls that block several times run on an ordinary goroutine instead: the public
// C function (above) calls the Go half, which starts the goroutine and returns at once; the
// C thread then waits on a futex in plain C; the goroutine writes the code and the error
// text into the mc_call and wakes it through a cgo call (mc_call_done). The calling thread
// is woken once per call, whatever the number of blocking points, at the price of two
// wake-ups (a thread for the new goroutine, then the caller).
//
// Which calls (docs/clib.md "Cost of a call" has the figures):
//   - The data batch calls block many times (measured 0.63-0.67 of the Go client's
//     BatchGetInto on the calling thread, 0.92-1.13 off it).
//   - put, put_from, upsert and upsert_from block at least three times (PutStart, the
//     transfer, PutEnd): testdata/offthreadbench with 3 round trips measured 55 µs off the
//     thread against 62 on it.
//   - batch_get_into first reads, on the calling thread, every object it can with no
//     network wait at all (client.GetIntoNoWait: a cached lookup and an unpinned
//     shared-memory copy); only a batch with objects left goes off-thread, for those.
//   - Single gets stay plain exports: a cached get on this host does not block at all
//     (an unpinned copy, client/shm.go), and a cold one blocks twice (lookup, pin), where
//     going off-thread costs as much as it saves. Single metadata calls (is_exist,
//     remove, get_size...) block once: off-thread would only add a wake-up.
//
// The last error is thread-local to the C caller: the goroutine never sets it (it runs on
// another thread), it hands the text back in the mc_call and mc_call_wait records it.

// offThread starts f on a new goroutine and returns: the C half waits for call. f's error
// becomes the call's code and last-error text as fail would make them; a panic (a bad caller
// pointer under SetPanicOnFault, or a bug) is recovered as the plain exports recover it.
func offThread(call *C.mc_call, f func() error) {
	go func() {
		code, last := outcome(runCaught(f))
		call.rc = C.int64_t(code)
		if last != nil {
			call.err = C.CString(lastErrorText(last)) // freed by mc_call_wait
		}
		C.mc_call_done(call) // call belongs to the waiting C thread from here on
	}()
}

// runCaught runs f with faults as panics, and a panic as its error.
func runCaught(f func() error) (err error) {
	defer func(old bool) {
		debug.SetPanicOnFault(old)
		if r := recover(); r != nil {
			err = panicError(r)
		}
	}(debug.SetPanicOnFault(true))
	return f()
}
