//go:build cgo

package main

/*
#include <stdlib.h>
#include <string.h>

// The last error text of the calling thread, in C memory (errno-like: each thread its own).
// A cgo callback runs Go on the calling C thread, so Go sets it for the thread that called.
static __thread char *mc_last_error_text;

static void mc_set_last_error(const char *p, size_t n) {
	char *t = realloc(mc_last_error_text, n + 1);
	if (t == NULL) return;
	memcpy(t, p, n);
	t[n] = 0;
	mc_last_error_text = t;
}

static const char *mc_get_last_error(void) {
	return mc_last_error_text ? mc_last_error_text : "";
}
*/
import "C"

import (
	"strings"
	"unsafe"
)

// setLastError records err's text as the calling thread's last error (one line).
func setLastError(err error) {
	msg := strings.ReplaceAll(err.Error(), "\n", "; ")
	if len(msg) > 4096 {
		msg = msg[:4096]
	}
	if msg == "" {
		msg = "error"
	}
	// The Go string is passed for the length of the call only and holds no Go pointers.
	C.mc_set_last_error((*C.char)(unsafe.Pointer(unsafe.StringData(msg))), C.size_t(len(msg)))
}

func lastError() *C.char { return C.mc_get_last_error() }
