//go:build cgo

package main

/*
#include <stdlib.h>
#include <string.h>

// The last error text of the calling thread, in C memory (errno-like: each thread its own).
// A cgo callback runs Go on the calling C thread, so Go sets it for the thread that called;
// a call run off the thread (offthread.go) has its text set by the C side after the wait.
static __thread char *mc_last_error_text;

__attribute__((visibility("hidden"))) void mc_set_last_error(const char *p, size_t n) {
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

// setLastError records err's text as the calling thread's last error.
func setLastError(err error) {
	msg := lastErrorText(err)
	// The Go string is passed for the length of the call only and holds no Go pointers.
	C.mc_set_last_error((*C.char)(unsafe.Pointer(unsafe.StringData(msg))), C.size_t(len(msg)))
}

// lastErrorText is err's text as the last error keeps it: one line, at most 4 KiB, never empty.
func lastErrorText(err error) string {
	msg := strings.ReplaceAll(err.Error(), "\n", "; ")
	if len(msg) > 4096 {
		msg = msg[:4096]
	}
	if msg == "" {
		msg = "error"
	}
	return msg
}

func lastError() *C.char { return C.mc_get_last_error() }
