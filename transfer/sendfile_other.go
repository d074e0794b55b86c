//go:build !linux

package transfer

import (
	"net"
	"syscall"
)

// sendfileConn returns nil: by-reference sends are implemented on Linux only, so payloads
// always go by copy.
func sendfileConn(net.Conn) syscall.RawConn { return nil }

// writeFileLocked copies (never called: sendfileConn is nil). REQUIRES: w.mu (via lock).
func (w *frameWriter) writeFileLocked(_ syscall.RawConn, hdrBody, data []byte, _ FileRange) (bool, error) {
	return false, w.writeLocked(hdrBody, data)
}
