package transfer

import (
	"errors"
	"fmt"
	"io"
	"net"
	"syscall"
)

// sendfileConn returns c's raw connection when c is a TCP socket (sendfile(2) can write to
// it), else nil: payloads then always go by copy.
func sendfileConn(c net.Conn) syscall.RawConn {
	tc, ok := c.(*net.TCPConn)
	if !ok {
		return nil
	}
	rc, err := tc.SyscallConn()
	if err != nil {
		return nil
	}
	return rc
}

// maxSendfileChunk bounds the count of one sendfile call (Linux moves at most 0x7ffff000
// bytes per call anyway); the loop in step sends the rest.
const maxSendfileChunk = 1 << 30

// fileSend is the state of one by-reference frame: what is left of the header and of the
// payload. step runs inside RawConn.Write, which calls it again once the socket is writable
// when it returned false (EAGAIN), and returns early on the write deadline.
type fileSend struct {
	hdr  []byte // header+body bytes not yet sent
	fd   int    // the file
	off  int64  // its offset of the next payload byte (sendfile's offset argument: pread-style, the fd's own offset is neither used nor moved, so concurrent sends from one fd do not race)
	left int64  // payload bytes not yet sent
	sent int64  // bytes (header and payload) sent by the current rc.Write
	err  error  // the error other than EAGAIN/EINTR that ended step, if any
}

func (s *fileSend) step(sock uintptr) bool {
	for len(s.hdr) > 0 {
		// MSG_MORE: the header waits for the payload's first bytes instead of leaving as a
		// segment of its own.
		n, err := syscall.SendmsgN(int(sock), s.hdr, nil, nil, syscall.MSG_MORE|syscall.MSG_NOSIGNAL)
		if n > 0 {
			s.hdr = s.hdr[n:]
			s.sent += int64(n)
		}
		if ret, done := s.after(err); done {
			return ret
		}
	}
	for s.left > 0 {
		// Sendfile advances s.off by what it sent.
		n, err := syscall.Sendfile(int(sock), s.fd, &s.off, int(min(s.left, maxSendfileChunk)))
		if n > 0 {
			s.left -= int64(n)
			s.sent += int64(n)
		}
		if err == nil && n == 0 {
			// The file ended before the range did: the handler's FileRange is wrong.
			err = fmt.Errorf("file ends before offset %d: %w", s.off, io.ErrUnexpectedEOF)
		}
		if ret, done := s.after(err); done {
			return ret
		}
	}
	return true
}

// after sorts the error of one syscall of step: nil and EINTR go on (done false); EAGAIN
// returns false to RawConn.Write (wait until writable); anything else ends the send with
// s.err set.
func (s *fileSend) after(err error) (ret, done bool) {
	switch {
	case err == nil || err == syscall.EINTR:
		return false, false
	case err == syscall.EAGAIN:
		return false, true
	}
	s.err = err
	return true, true
}

// sendfileRefused reports whether err means sendfile cannot read this file (EINVAL: a
// hugetlbfs memfd, a file system without splice; ESPIPE: a pipe), as opposed to a broken socket: the payload can
// then be copied instead.
func sendfileRefused(err error) bool {
	return errors.Is(err, syscall.EINVAL) || errors.Is(err, syscall.ENOSYS) || errors.Is(err, syscall.ESPIPE) ||
		errors.Is(err, syscall.EOPNOTSUPP) || errors.Is(err, io.ErrUnexpectedEOF)
}

// writeFileLocked writes one frame: hdrBody, then the len(data) payload bytes by reference
// from f with sendfile(2) through rc (f holds data's bytes at f.Offset; ReadSource.File).
// The kernel puts references to the file's pages into the socket instead of copying them,
// and partial sends and EAGAIN are resumed at the exact offset, with the netpoller. When
// sendfile refuses the file (sendfileRefused), the rest of the frame is copied from data and
// refused is true. The write deadline and progress rules are writeLocked's (progressWriter):
// every frameProgressChunk taken by the peer earns a new deadline.
// REQUIRES: w.mu (via lock).
func (w *frameWriter) writeFileLocked(rc syscall.RawConn, hdrBody, data []byte, f FileRange) (refused bool, err error) {
	if w.bw.Buffered() > 0 {
		if err := w.bw.Flush(); err != nil {
			return false, err
		}
	}
	s := fileSend{hdr: hdrBody, fd: f.FD, off: f.Offset, left: int64(len(data))}
	for {
		if w.pw != nil {
			w.pw.arm()
		}
		s.sent = 0
		werr := rc.Write(s.step)
		if werr == nil {
			if w.pw != nil {
				w.pw.sinceArm += s.sent
			}
			switch {
			case s.err == nil:
				return false, nil
			case sendfileRefused(s.err):
				return true, w.writeLocked(s.hdr, data[int64(len(data))-s.left:])
			}
			return false, fmt.Errorf("transfer: sendfile: %w", s.err)
		}
		if w.pw == nil {
			return false, werr
		}
		again, err := w.pw.goOn(s.sent, werr)
		if !again {
			return false, err
		}
	}
}
