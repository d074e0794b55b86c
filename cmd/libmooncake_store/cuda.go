//go:build cgo

package main

/*
#cgo LDFLAGS: -ldl
#include <stdlib.h>
#include "cuda.h"
*/
import "C"

import (
	"fmt"
	"runtime"
	"runtime/debug"
	"unsafe"

	"github.com/mooncake-go/mooncake/internal/base"
)

// GPU memory (docs/clib.md "GPU memory"): cuda.c loads the CUDA driver API at run time, only
// once the process has loaded it itself, and answers whether a caller's range is device
// memory; device ranges are staged through host memory (callerMem in memory.go).

// isDevice classifies [u, u+n), a range that passed checkRange: false for host memory (and
// always without a driver), true for device memory of a context of this process, an error
// for a device range the library cannot serve.
func isDevice(what string, u uintptr, n uint64) (bool, error) {
	// The error text is thread-local in cuda.c: stay on this thread until it is read.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	switch r := C.mc_cuda_classify(C.uintptr_t(u), C.size_t(n)); r {
	case C.MC_MEM_HOST:
		return false, nil
	case C.MC_MEM_DEVICE:
		return true, nil
	case C.MC_MEM_CROSSES, C.MC_MEM_NO_CONTEXT:
		return false, fmt.Errorf("%w: %s: %s", base.ErrInvalidParams, what, cudaError())
	default:
		return false, fmt.Errorf("%w: %s: %s", base.ErrInternal, what, cudaError())
	}
}

// cudaCopy copies len(host) bytes between the device range at dev and host (toDevice: host
// to device), on the library's stream of dev's context, and waits for the copy.
func cudaCopy(what string, dev uintptr, host []byte, toDevice bool) error {
	if len(host) == 0 {
		return nil
	}
	runtime.LockOSThread() // as isDevice
	defer runtime.UnlockOSThread()
	dir := C.int(0)
	if toDevice {
		dir = 1
	}
	if C.mc_cuda_copy(C.uintptr_t(dev), unsafe.Pointer(&host[0]), C.size_t(len(host)), dir) != 0 {
		return fmt.Errorf("%w: %s: %s", base.ErrInternal, what, cudaError())
	}
	return nil
}

// devCopy is one staged copy: the device range at dev and its host stage (pinned: memory of
// the driver's pinned pool, not Go memory).
type devCopy struct {
	dev    uintptr
	host   []byte
	pinned bool
}

// copyMany runs copies (toDevice: host to device), waiting once per stream: stages in pinned
// memory go to the driver in one call; stages in Go memory (no pinned memory to be had) one
// by one, since cgo must not be handed Go pointers inside an array.
func copyMany(what string, cs []devCopy, toDevice bool) error {
	var devs, hosts []C.uintptr_t
	var ns []C.size_t
	for _, c := range cs {
		switch {
		case len(c.host) == 0:
		case c.pinned:
			devs = append(devs, C.uintptr_t(c.dev))
			hosts = append(hosts, C.uintptr_t(uintptr(unsafe.Pointer(unsafe.SliceData(c.host)))))
			ns = append(ns, C.size_t(len(c.host)))
		default:
			if err := cudaCopy(what, c.dev, c.host, toDevice); err != nil {
				return err
			}
		}
	}
	if len(devs) == 0 {
		return nil
	}
	runtime.LockOSThread() // as isDevice
	defer runtime.UnlockOSThread()
	dir := C.int(0)
	if toDevice {
		dir = 1
	}
	if C.mc_cuda_copy_many(&devs[0], &hosts[0], &ns[0], C.size_t(len(devs)), dir) != 0 {
		return fmt.Errorf("%w: %s: %s", base.ErrInternal, what, cudaError())
	}
	return nil
}

func cudaError() string {
	var buf [256]C.char
	C.mc_cuda_error(&buf[0], C.size_t(len(buf)))
	return C.GoString(&buf[0])
}

// cudaLoads is how many CUDA drivers the library has loaded (0 or 1).
func cudaLoads() int { return int(C.mc_cuda_loads()) }

// mcpy_is_device_memory says what the Python package's tensor helpers must know before they
// touch a caller's buffer themselves (read a tensor header, make a tensor over it): 1 when
// [buffer, buffer+size) is device memory of this process, 0 when it is host memory (always
// without a CUDA driver), or a negative code (INVALID_PARAMS: a bad range, one crossing its
// device allocation, or another process's device address), with last_error set. Not in the
// header: Mooncake's C API has no such call.
//
//export mcpy_is_device_memory
func mcpy_is_device_memory(buffer C.uintptr_t, size C.size_t) (rc C.int) {
	defer catchInt(&rc, debug.SetPanicOnFault(true))
	_, dev, err := callerBytes("buffer", uintptr(buffer), uint64(size))
	if err != nil {
		return C.int(fail(err))
	}
	if dev {
		return 1
	}
	return 0
}
