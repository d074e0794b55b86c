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
	"unsafe"

	"github.com/mooncake-go/mooncake/client"
	"github.com/mooncake-go/mooncake/internal/base"
	"github.com/mooncake-go/mooncake/transfer"
)

// Copy and move tasks for the Python package (create_copy_task, create_move_task,
// query_task over client/tasks.go). Mooncake's C API has none, so these are not in
// mooncake_store.h: they are the library's internal exports, declared once in
// python/mooncake/_lib.py, and may change with it.

// mcpy_create_copy_task copies key to each of the count target segments (worker ids or
// addresses) and writes the task id to id_out[0] (hi) and id_out[1] (lo). 0 or a negative
// code.
//
//export mcpy_create_copy_task
func mcpy_create_copy_task(h C.uintptr_t, key *C.char, targets *C.uintptr_t, count C.size_t, idOut *C.uint64_t) (rc C.int) {
	defer catchInt(&rc, debug.SetPanicOnFault(true))
	return C.int(fail(createCopyTask(h, key, targets, count, idOut)))
}

// openTask is openKey and the id_out argument: what both task creations start with.
func openTask(h C.uintptr_t, key *C.char, idOut *C.uint64_t) (*client.Client, string, []C.uint64_t, error) {
	_, cl, k, err := openKey(h, key)
	if err != nil {
		return nil, "", nil, err
	}
	out, err := array("id_out", idOut, 2)
	return cl, k, out, err
}

func createCopyTask(h C.uintptr_t, key *C.char, targets *C.uintptr_t, count C.size_t, idOut *C.uint64_t) error {
	cl, k, out, err := openTask(h, key, idOut)
	if err != nil {
		return err
	}
	if count > transfer.MaxTaskTargets {
		return fmt.Errorf("%w: %d targets, at most %d", base.ErrInvalidParams, uint64(count), transfer.MaxTaskTargets)
	}
	ptrs, err := array("targets", targets, int(count))
	if err != nil {
		return err
	}
	names := make([]string, len(ptrs))
	for i, u := range ptrs {
		if names[i], err = goString(fmt.Sprintf("targets[%d]", i), uintptr(u), transfer.MaxAddrLen); err != nil {
			return err
		}
	}
	id, err := cl.CreateCopyTask(bg, k, names)
	if err != nil {
		return err
	}
	out[0], out[1] = C.uint64_t(id.Hi), C.uint64_t(id.Lo)
	return nil
}

// mcpy_create_move_task moves key's replica on segment source to segment target and writes
// the task id to id_out[0..1]. 0 or a negative code.
//
//export mcpy_create_move_task
func mcpy_create_move_task(h C.uintptr_t, key, source, target *C.char, idOut *C.uint64_t) (rc C.int) {
	defer catchInt(&rc, debug.SetPanicOnFault(true))
	return C.int(fail(createMoveTask(h, key, source, target, idOut)))
}

func createMoveTask(h C.uintptr_t, key, source, target *C.char, idOut *C.uint64_t) error {
	cl, k, out, err := openTask(h, key, idOut)
	if err != nil {
		return err
	}
	src, err := goString("source", uintptr(unsafe.Pointer(source)), transfer.MaxAddrLen)
	if err != nil {
		return err
	}
	dst, err := goString("target", uintptr(unsafe.Pointer(target)), transfer.MaxAddrLen)
	if err != nil {
		return err
	}
	id, err := cl.CreateMoveTask(bg, k, src, dst)
	if err != nil {
		return err
	}
	out[0], out[1] = C.uint64_t(id.Hi), C.uint64_t(id.Lo)
	return nil
}

// mcpy_query_task reports task (hi, lo): out[0..3] get its type, status, creation and last
// update (unix milliseconds); client_out and message_out get the assigned worker and the
// failure's reason, NUL-terminated (cut to fit). 0 or a negative code (OBJECT_NOT_FOUND for
// a task the leader does not know).
//
//export mcpy_query_task
func mcpy_query_task(h C.uintptr_t, hi, lo C.uint64_t, out *C.int64_t, clientOut C.uintptr_t, clientLen C.size_t,
	msgOut C.uintptr_t, msgLen C.size_t) (rc C.int) {
	defer catchInt(&rc, debug.SetPanicOnFault(true))
	return C.int(fail(queryTask(h, hi, lo, out, clientOut, clientLen, msgOut, msgLen)))
}

func queryTask(h C.uintptr_t, hi, lo C.uint64_t, out *C.int64_t, clientOut C.uintptr_t, clientLen C.size_t,
	msgOut C.uintptr_t, msgLen C.size_t) error {
	_, cl, err := open(h)
	if err != nil {
		return err
	}
	vals, err := array("out", out, 4)
	if err != nil {
		return err
	}
	cbuf, err := bytesAt("client_out", uintptr(clientOut), uint64(clientLen))
	if err != nil {
		return err
	}
	mbuf, err := bytesAt("message_out", uintptr(msgOut), uint64(msgLen))
	if err != nil {
		return err
	}
	if len(cbuf) == 0 || len(mbuf) == 0 {
		return fmt.Errorf("%w: client_out and message_out need room for a NUL", base.ErrInvalidParams)
	}
	t, err := cl.QueryTask(bg, base.TaskID{Hi: uint64(hi), Lo: uint64(lo)})
	if err != nil {
		return err
	}
	vals[0], vals[1] = C.int64_t(t.Type), C.int64_t(t.Status)
	vals[2], vals[3] = C.int64_t(t.Created.UnixMilli()), C.int64_t(t.Updated.UnixMilli())
	cbuf[copy(cbuf[:len(cbuf)-1], t.AssignedClient)] = 0
	mbuf[copy(mbuf[:len(mbuf)-1], t.Message)] = 0
	return nil
}
