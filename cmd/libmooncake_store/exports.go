//go:build cgo

// cgo's generated names for C.malloc (_cgo_cmalloc, ...) are reported at this file.
//
//lint:file-ignore ST1003 cgo's generated names are not ours to choose.

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
	"errors"
	"fmt"
	"runtime/debug"
	"unsafe"

	"github.com/mooncake-go/mooncake/client"
	"github.com/mooncake-go/mooncake/client/mooncakestore"
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

// openKey is open and the key argument: what every single-key call starts with.
func openKey(h C.uintptr_t, key *C.char) (*store, *client.Client, string, error) {
	s, cl, err := open(h)
	if err != nil {
		return nil, nil, "", err
	}
	k, err := goKey(key)
	return s, cl, k, err
}

// openBatch is open, the bound on count and the keys: what every batch call starts with.
func openBatch(h C.uintptr_t, keys *C.uintptr_t, count C.size_t) (*store, *client.Client, []string, error) {
	s, cl, err := open(h)
	if err != nil {
		return nil, nil, nil, err
	}
	n, err := checkCount(count)
	if err != nil {
		return nil, nil, nil, err
	}
	ks, err := goKeys(keys, n)
	return s, cl, ks, err
}

// result64 returns n, or the code of err (recorded as the last error).
func result64(n int64, err error) C.int64_t {
	if err != nil {
		return C.int64_t(fail(err))
	}
	return C.int64_t(n)
}

// setResults writes one result per item: sizes[i] (0 when sizes is nil) or item i's code. It
// returns the first failure as an itemError (nil when every item succeeded): the batch call
// returns it, so the call's code stays 0 and the text becomes the last error (outcome).
func setResults[T ~int32 | ~int64](out []T, sizes []int, errs []error) error {
	var first error
	for i, err := range errs {
		switch {
		case err == nil && sizes != nil:
			out[i] = T(sizes[i])
		case err == nil:
			out[i] = 0
		default:
			out[i] = T(errorCode(err))
			if first == nil {
				first = itemError{err}
			}
		}
	}
	return first
}

// itemError is the first failed item of a batch whose call itself succeeded: the call
// returns 0 and the item's text becomes the last error.
type itemError struct{ error }

func (e itemError) Unwrap() error { return e.error }

// outcome splits what an export's Go side returned into the call's code and the error
// whose text becomes the calling thread's last error (nil: leave the last error alone).
func outcome(err error) (code int, last error) {
	var ie itemError
	switch {
	case err == nil:
		return 0, nil
	case errors.As(err, &ie):
		return 0, ie.error
	default:
		return errorCode(err), err
	}
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

//export mooncake_store_set_etcd_tls_config
func mooncake_store_set_etcd_tls_config(h C.uintptr_t, caFile, certFile, keyFile *C.char) {
	// Accepted and ignored: there is no etcd here (the masters' raft holds the metadata), so
	// there is no etcd connection to secure. Mooncake's is a no-op too in builds without etcd.
}

//export mooncake_store_set_tenant_id
func mooncake_store_set_tenant_id(h C.uintptr_t, tenantID *C.char) (rc C.int) {
	defer catchInt(&rc, debug.SetPanicOnFault(true))
	s, err := lookupHandle(uintptr(h))
	if err != nil {
		return C.int(fail(err))
	}
	return C.int(fail(s.setTenant(optString(tenantID))))
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

// ---- Existence, size, descriptors, hostname ----

// isExist is is_exist with Mooncake's ExistOptions (exports_prefetch.go).
func isExist(h C.uintptr_t, key *C.char, o client.ExistOptions) (int64, error) {
	_, cl, k, err := openKey(h, key)
	if err != nil {
		return 0, err
	}
	ok, err := cl.ExistsWith(bg, k, o)
	if ok {
		return 1, err
	}
	return 0, err
}

//export mooncake_store_is_exist
func mooncake_store_is_exist(h C.uintptr_t, key *C.char) (rc C.int) {
	defer catchInt(&rc, debug.SetPanicOnFault(true))
	return C.int(result64(isExist(h, key, client.ExistOptions{})))
}

func batchIsExist(h C.uintptr_t, keys *C.uintptr_t, count C.size_t, results *C.int, o client.ExistOptions) error {
	_, cl, ks, err := openBatch(h, keys, count)
	if err != nil {
		return err
	}
	out, err := array("results_out", results, len(ks))
	if err != nil {
		return err
	}
	exists, err := cl.BatchExistsWith(bg, ks, o)
	for i := range out {
		switch {
		case err != nil:
			out[i] = -1 // as Mooncake: the call succeeds, every item says "error"
		case exists[i]:
			out[i] = 1
		default:
			out[i] = 0
		}
	}
	if err != nil {
		setLastError(err)
	}
	return nil
}

//export mooncake_store_batch_is_exist
func mooncake_store_batch_is_exist(h C.uintptr_t, keys *C.uintptr_t, count C.size_t, results *C.int) (rc C.int) {
	defer catchInt(&rc, debug.SetPanicOnFault(true))
	return C.int(fail(batchIsExist(h, keys, count, results, client.ExistOptions{})))
}

func getSize(h C.uintptr_t, key *C.char) (int64, error) {
	_, cl, k, err := openKey(h, key)
	if err != nil {
		return 0, err
	}
	return cl.Size(bg, k)
}

//export mooncake_store_get_size
func mooncake_store_get_size(h C.uintptr_t, key *C.char) (rc C.int64_t) {
	defer catchInt64(&rc, debug.SetPanicOnFault(true))
	return result64(getSize(h, key))
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

func getReplicaDesc(h C.uintptr_t, key *C.char, jsonOut *C.uintptr_t) (int64, error) {
	outs, err := array("json_out", jsonOut, 1)
	if err != nil {
		return 0, err
	}
	outs[0] = 0
	_, cl, k, err := openKey(h, key)
	if err != nil {
		return 0, err
	}
	info, err := cl.Describe(bg, k)
	if err != nil {
		return 0, err
	}
	d := replicaDesc{Key: info.Key, Size: info.Size, Version: uint64(info.Version), Replicas: []replicaJSON{}}
	for _, r := range info.Replicas {
		d.Replicas = append(d.Replicas, replicaJSON{SegmentName: string(r.WorkerID), Address: r.Address, Status: "COMPLETE", Type: "memory"})
	}
	text, err := json.Marshal(d)
	if err != nil {
		return 0, fmt.Errorf("%w: %v", base.ErrInternal, err)
	}
	outs[0] = C.uintptr_t(uintptr(unsafe.Pointer(C.CString(string(text)))))
	return int64(len(text)), nil
}

//export mooncake_store_get_replica_desc
func mooncake_store_get_replica_desc(h C.uintptr_t, key *C.char, jsonOut *C.uintptr_t) (rc C.int64_t) {
	defer catchInt64(&rc, debug.SetPanicOnFault(true))
	return result64(getReplicaDesc(h, key, jsonOut))
}

func getHostname(h C.uintptr_t, bufOut C.uintptr_t, bufLen C.size_t) error {
	s, err := lookupHandle(uintptr(h))
	if err != nil {
		return err
	}
	name := s.getHostname()
	b, err := bytesAt("buf_out", uintptr(bufOut), uint64(bufLen))
	if err != nil {
		return err
	}
	if len(b) < len(name)+1 {
		return fmt.Errorf("%w: buf_out of %d bytes for a hostname of %d and its NUL", base.ErrInvalidParams, len(b), len(name))
	}
	b[copy(b, name)] = 0
	return nil
}

//export mooncake_store_get_hostname
func mooncake_store_get_hostname(h C.uintptr_t, bufOut C.uintptr_t, bufLen C.size_t) (rc C.int) {
	defer catchInt(&rc, debug.SetPanicOnFault(true))
	return C.int(fail(getHostname(h, bufOut, bufLen)))
}

// ---- Remove (force is accepted and ignored: see the header) ----

func remove(h C.uintptr_t, key *C.char) error {
	_, cl, k, err := openKey(h, key)
	if err != nil {
		return err
	}
	return cl.Remove(bg, k)
}

//export mooncake_store_remove
func mooncake_store_remove(h C.uintptr_t, key *C.char, force C.int) (rc C.int) {
	defer catchInt(&rc, debug.SetPanicOnFault(true))
	return C.int(fail(remove(h, key)))
}

func removeByRegex(h C.uintptr_t, pattern *C.char) (int64, error) {
	_, cl, err := open(h)
	if err != nil {
		return 0, err
	}
	re, err := goString("pattern", uintptr(unsafe.Pointer(pattern)), 1<<16)
	if err != nil {
		return 0, err
	}
	return cl.RemoveByRegex(bg, re)
}

//export mooncake_store_remove_by_regex
func mooncake_store_remove_by_regex(h C.uintptr_t, pattern *C.char, force C.int) (rc C.int64_t) {
	defer catchInt64(&rc, debug.SetPanicOnFault(true))
	return result64(removeByRegex(h, pattern))
}

func removeAll(h C.uintptr_t) (int64, error) {
	_, cl, err := open(h)
	if err != nil {
		return 0, err
	}
	return cl.RemoveAll(bg)
}

//export mooncake_store_remove_all
func mooncake_store_remove_all(h C.uintptr_t, force C.int) (rc C.int64_t) {
	defer catchInt64(&rc, debug.SetPanicOnFault(true))
	return result64(removeAll(h))
}

func batchRemove(h C.uintptr_t, keys *C.uintptr_t, count C.size_t, results *C.int) error {
	_, cl, ks, err := openBatch(h, keys, count)
	if err != nil {
		return err
	}
	out, err := array("results_out", results, len(ks))
	if err != nil {
		return err
	}
	return setResults(out, nil, cl.BatchRemove(bg, ks))
}

//export mooncake_store_batch_remove
func mooncake_store_batch_remove(h C.uintptr_t, keys *C.uintptr_t, count C.size_t, force C.int, results *C.int) (rc C.int) {
	defer catchInt(&rc, debug.SetPanicOnFault(true))
	return C.int(fail(batchRemove(h, keys, count, results)))
}

// ---- Buffer registration ----

//export mooncake_store_register_buffer
func mooncake_store_register_buffer(h C.uintptr_t, buffer C.uintptr_t, size C.size_t) (rc C.int) {
	defer catchInt(&rc, debug.SetPanicOnFault(true))
	s, err := lookupHandle(uintptr(h))
	if err == nil {
		err = checkBuffer("buffer", uintptr(buffer), uint64(size))
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
	m := map[int]*C.char{}
	for _, c := range mooncakestore.Codes() {
		m[c] = C.CString(mooncakestore.CodeName(c))
	}
	return m
}()

var unknownName = C.CString("UNKNOWN")

//export mooncake_store_error_name
func mooncake_store_error_name(code C.int) *C.char {
	if p, ok := errorNames[int(code)]; ok {
		return p
	}
	return unknownName
}
