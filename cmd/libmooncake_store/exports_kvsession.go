//go:build cgo

package main

/*
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#define MOONCAKE_STORE_TYPES_ONLY
#include "mooncake_store.h"
*/
import "C"

import (
	"fmt"
	"runtime/debug"
	"unsafe"

	"github.com/mooncake-go/mooncake/client"
	"github.com/mooncake-go/mooncake/internal/base"
	"github.com/mooncake-go/mooncake/transfer"
)

// The KV-session exports (mooncake_store.h "KV sessions") over client/kvsession.go:
// Mooncake's pin_kv_session ... attach_kv_session, which Mooncake has in Python only.

// openSession is open and the session id argument. An id is checked by the client (1 to
// 4096 bytes); the scan stops one byte past the limit.
func openSession(h C.uintptr_t, id *C.char) (*client.Client, string, error) {
	_, cl, err := open(h)
	if err != nil {
		return nil, "", err
	}
	s, err := goString("session_id", uintptr(unsafe.Pointer(id)), base.MaxKVSessionIDLen+1)
	if err != nil {
		return nil, "", fmt.Errorf("%w: %v", base.ErrInvalidParams, err)
	}
	return cl, s, base.ValidateKVSessionID(s)
}

func kvSessionPin(h C.uintptr_t, id *C.char, pin bool) error {
	cl, s, err := openSession(h, id)
	if err != nil {
		return err
	}
	if pin {
		return cl.PinKVSession(bg, s)
	}
	return cl.UnpinKVSession(bg, s)
}

//export mooncake_store_pin_kv_session
func mooncake_store_pin_kv_session(h C.uintptr_t, id *C.char) (rc C.int) {
	defer catchInt(&rc, debug.SetPanicOnFault(true))
	return C.int(fail(kvSessionPin(h, id, true)))
}

//export mooncake_store_unpin_kv_session
func mooncake_store_unpin_kv_session(h C.uintptr_t, id *C.char) (rc C.int) {
	defer catchInt(&rc, debug.SetPanicOnFault(true))
	return C.int(fail(kvSessionPin(h, id, false)))
}

func kvSessionUpdate(h C.uintptr_t, id *C.char, keep *C.uintptr_t, count C.size_t) error {
	cl, s, err := openSession(h, id)
	if err != nil {
		return err
	}
	// One complete keep set: never cut into batches (successive intersections would drop
	// members), so the bound is the registry's, not maxBatchItems.
	if uint64(count) > transfer.MaxKVSessionKeys {
		return fmt.Errorf("%w: keep set of %d keys, the limit is %d", base.ErrSessionLimitExceeded, uint64(count), transfer.MaxKVSessionKeys)
	}
	ks, err := goKeys(keep, int(count))
	if err != nil {
		return err
	}
	return cl.UpdateKVSession(bg, s, ks)
}

//export mooncake_store_update_kv_session
func mooncake_store_update_kv_session(h C.uintptr_t, id *C.char, keep *C.uintptr_t, count C.size_t) (rc C.int) {
	defer catchInt(&rc, debug.SetPanicOnFault(true))
	return C.int(fail(kvSessionUpdate(h, id, keep, count)))
}

func kvSessionClose(h C.uintptr_t, id *C.char) error {
	cl, s, err := openSession(h, id)
	if err != nil {
		return err
	}
	return cl.CloseKVSession(bg, s)
}

//export mooncake_store_close_kv_session
func mooncake_store_close_kv_session(h C.uintptr_t, id *C.char) (rc C.int) {
	defer catchInt(&rc, debug.SetPanicOnFault(true))
	return C.int(fail(kvSessionClose(h, id)))
}

func kvSessionGet(h C.uintptr_t, id *C.char, pinned *C.int, members *C.uint64_t) error {
	p, err := array("pinned_out", pinned, 1)
	if err != nil {
		return err
	}
	m, err := array("member_count_out", members, 1)
	if err != nil {
		return err
	}
	cl, s, err := openSession(h, id)
	if err != nil {
		return err
	}
	info, err := cl.KVSession(bg, s)
	if err != nil {
		return err
	}
	p[0], m[0] = 0, C.uint64_t(info.MemberCount)
	if info.Pinned {
		p[0] = 1
	}
	return nil
}

//export mooncake_store_get_kv_session
func mooncake_store_get_kv_session(h C.uintptr_t, id *C.char, pinned *C.int, members *C.uint64_t) (rc C.int) {
	defer catchInt(&rc, debug.SetPanicOnFault(true))
	return C.int(fail(kvSessionGet(h, id, pinned, members)))
}

func kvSessionList(h C.uintptr_t, id, cursor *C.char, limit C.size_t, out *C.uintptr_t) (int64, error) {
	outs, err := array("keys_out", out, 1)
	if err != nil {
		return 0, err
	}
	outs[0] = 0
	cl, s, err := openSession(h, id)
	if err != nil {
		return 0, err
	}
	cur := ""
	if cursor != nil {
		if cur, err = goString("cursor", uintptr(unsafe.Pointer(cursor)), base.MaxKeyLen); err != nil {
			return 0, err
		}
	}
	if uint64(limit) > 1<<31 {
		return 0, fmt.Errorf("%w: limit %d", base.ErrInvalidParams, uint64(limit))
	}
	page, err := cl.ListKVSessionKeys(bg, s, cur, int(limit))
	if err != nil {
		return 0, err
	}
	// Every key, then the next cursor, each NUL-terminated: keys hold no NUL (C strings).
	n := len(page.NextCursor) + 1
	for _, k := range page.Keys {
		n += len(k) + 1
	}
	buf := C.malloc(C.size_t(n))
	b := unsafe.Slice((*byte)(buf), n)
	at := 0
	for _, k := range append(page.Keys, page.NextCursor) {
		at += copy(b[at:], k)
		b[at] = 0
		at++
	}
	outs[0] = C.uintptr_t(uintptr(buf))
	return int64(n), nil
}

//export mooncake_store_list_kv_session_keys
func mooncake_store_list_kv_session_keys(h C.uintptr_t, id, cursor *C.char, limit C.size_t, out *C.uintptr_t) (rc C.int64_t) {
	defer catchInt64(&rc, debug.SetPanicOnFault(true))
	return result64(kvSessionList(h, id, cursor, limit, out))
}

func kvSessionAttach(h C.uintptr_t, id *C.char, keys *C.uintptr_t, count C.size_t, results *C.int) error {
	n, err := checkCount(count)
	if err != nil {
		return err
	}
	out, err := array("results_out", results, n)
	if err != nil {
		return err
	}
	cl, s, err := openSession(h, id)
	if err != nil {
		return err
	}
	ks, err := goKeys(keys, n)
	if err != nil {
		return err
	}
	errs, err := cl.AttachKVSession(bg, s, ks)
	if err != nil {
		return err
	}
	return setResults(out, nil, errs)
}

//export mooncake_store_attach_kv_session
func mooncake_store_attach_kv_session(h C.uintptr_t, id *C.char, keys *C.uintptr_t, count C.size_t, results *C.int) (rc C.int) {
	defer catchInt(&rc, debug.SetPanicOnFault(true))
	return C.int(fail(kvSessionAttach(h, id, keys, count, results)))
}
