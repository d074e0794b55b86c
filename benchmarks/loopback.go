package benchmarks

import (
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"sync"
)

// LoopbackTCP measures the physical baseline of a workload: the same number of operations of
// the same size and concurrency as plain request/response exchanges over loopback TCP, with no
// store behind them. A get is an 8-byte request answered by Size bytes read into the caller's
// buffer; a put is Size bytes answered by an 8-byte acknowledgement. Each goroutine has its own
// connection, as a client with a connection per in-flight call would. The ratio of a mooncake
// run to this run (measured in the same process, on the same machine, at the same time) says
// how much of the loopback bandwidth the store delivers.
func LoopbackTCP(ctx context.Context, w Workload) (Result, error) {
	if err := w.Validate(); err != nil {
		return Result{}, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return Result{}, fmt.Errorf("benchmarks: loopback listen: %w", err)
	}
	var srvWG sync.WaitGroup
	defer srvWG.Wait()
	defer ln.Close()

	// The server side: one goroutine per connection, closed when the client side closes.
	srvWG.Add(1)
	go func() {
		defer srvWG.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			srvWG.Add(1)
			go func() {
				defer srvWG.Done()
				defer c.Close()
				serveLoopback(c, w.Op, w.Size)
			}()
		}
	}()

	conns := make(chan net.Conn, w.Concurrency)
	defer func() {
		close(conns)
		for c := range conns {
			c.Close()
		}
	}()
	var d net.Dialer
	for range w.Concurrency {
		c, err := d.DialContext(ctx, "tcp", ln.Addr().String())
		if err != nil {
			return Result{}, fmt.Errorf("benchmarks: loopback dial: %w", err)
		}
		conns <- c
	}
	keys := make([]string, w.Count)
	r, err := runOps(ctx, w.Concurrency, w.Size, keys, func(ctx context.Context, _ string, buf []byte) error {
		c := <-conns
		defer func() { conns <- c }()
		return loopbackOp(c, w.Op, buf)
	})
	r.Name = "loopback " + string(w.Op)
	return r, err
}

func loopbackOp(c net.Conn, op Op, buf []byte) error {
	var hdr [8]byte
	if op == OpGet {
		binary.LittleEndian.PutUint64(hdr[:], uint64(len(buf)))
		if _, err := c.Write(hdr[:]); err != nil {
			return err
		}
		_, err := io.ReadFull(c, buf)
		return err
	}
	if _, err := c.Write(buf); err != nil {
		return err
	}
	_, err := io.ReadFull(c, hdr[:])
	return err
}

// serveLoopback answers one connection until it closes.
func serveLoopback(c net.Conn, op Op, size int64) {
	buf := make([]byte, size)
	Fill(buf, 7)
	var hdr [8]byte
	for {
		if op == OpGet {
			if _, err := io.ReadFull(c, hdr[:]); err != nil {
				return
			}
			if _, err := c.Write(buf); err != nil {
				return
			}
			continue
		}
		if _, err := io.ReadFull(c, buf); err != nil {
			return // the client closed the connection (EOF) or broke it
		}
		if _, err := c.Write(hdr[:]); err != nil {
			return
		}
	}
}
