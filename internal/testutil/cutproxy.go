package testutil

import (
	"encoding/binary"
	"io"
	"net"
	"sync"
	"testing"
)

// CutAnswers starts a TCP proxy in front of a mooncake-go server (target) and returns its
// address: a test of resends. It passes every byte on, except that it cuts the connection,
// in both directions, instead of passing on a response whose op cut returns true for (the
// server handled that call; its caller never hears the answer). It reads the server's side
// by the frames of docs/protocol.md: the server hello (10 bytes and its message), then
// 32-byte headers (op byte 0, flags byte 1, body length u32 at 4, payload length u64 at 16),
// each followed by its body and payload.
func CutAnswers(t testing.TB, target string, cut func(op uint8) bool) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	t.Cleanup(func() {
		ln.Close()
		wg.Wait()
	})
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			up, err := net.Dial("tcp", target)
			if err != nil {
				c.Close()
				continue
			}
			wg.Add(2)
			go func() {
				defer wg.Done()
				_, _ = io.Copy(up, c)
				up.Close()
			}()
			go func() {
				defer wg.Done()
				defer c.Close()
				defer up.Close()
				forwardAnswers(up, c, cut)
			}()
		}
	}()
	return ln.Addr().String()
}

// forwardAnswers copies the server's side from up to c frame by frame until an error or a
// response cut asks to drop.
func forwardAnswers(up, c net.Conn, cut func(op uint8) bool) {
	var hello [10]byte
	if _, err := io.ReadFull(up, hello[:]); err != nil {
		return
	}
	if _, err := c.Write(hello[:]); err != nil {
		return
	}
	if _, err := io.CopyN(c, up, int64(binary.LittleEndian.Uint16(hello[8:]))); err != nil {
		return
	}
	var h [32]byte
	for {
		if _, err := io.ReadFull(up, h[:]); err != nil {
			return
		}
		if h[1]&1 != 0 && cut(h[0]) { // a response (flag bit 0)
			return
		}
		rest := int64(binary.LittleEndian.Uint32(h[4:])) + int64(binary.LittleEndian.Uint64(h[16:]))
		if _, err := c.Write(h[:]); err != nil {
			return
		}
		if _, err := io.CopyN(c, up, rest); err != nil {
			return
		}
	}
}
