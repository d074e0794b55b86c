package main

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"path/filepath"
	"testing"
	"time"

	"github.com/mooncake-go/mooncake/client"
	"github.com/mooncake-go/mooncake/internal/base"
	"github.com/mooncake-go/mooncake/internal/testutil"
)

// helloConn dials addr and completes the handshake as docs/protocol.md section 1 says, the
// way a client in another language would.
func helloConn(t *testing.T, addr string) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	hello := []byte("MCGO")
	hello = binary.LittleEndian.AppendUint16(hello, 1) // version
	hello = binary.LittleEndian.AppendUint16(hello, 0) // flags
	hello = binary.LittleEndian.AppendUint16(hello, uint16(len(base.DefaultClusterID)))
	hello = append(hello, base.DefaultClusterID...)
	if _, err := c.Write(hello); err != nil {
		t.Fatal(err)
	}
	var reply [10]byte
	if _, err := io.ReadFull(c, reply[:]); err != nil {
		t.Fatalf("server hello: %v", err)
	}
	if string(reply[:4]) != "MCGO" || binary.LittleEndian.Uint16(reply[6:]) != 0 {
		t.Fatalf("server hello %x refuses the connection", reply)
	}
	return c
}

// closedWithin reads from c until the server closes it; it fails the test after limit.
func closedWithin(t *testing.T, c net.Conn, limit time.Duration) time.Duration {
	t.Helper()
	start := time.Now()
	_ = c.SetReadDeadline(start.Add(limit))
	var b [64]byte
	for {
		if _, err := c.Read(b[:]); err != nil {
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				t.Fatalf("the server kept the connection open for %v", limit)
			}
			return time.Since(start)
		}
	}
}

// TestWorkerConnectionLimits is issue 11's connection check with the binary: a standalone run
// with --conn_idle_timeout 500ms --conn_frame_timeout 1s closes a connection idle after its
// hello (on the worker's port and on the master's) and one trickling a frame, while clients
// carry on: a client whose pooled connections the
// worker closed as idle puts and gets again, and 64 MiB objects go through. (The 64 MiB
// transfer over a paced link is transfer.TestSlowTransferCompletes.)
func TestWorkerConnectionLimits(t *testing.T) {
	bin := buildBinary(t)
	dir := t.TempDir()
	const idle, frame = 500 * time.Millisecond, time.Second
	_, master := startStandalone(t, bin, filepath.Join(dir, "data"), "--global_segment_size", "512MiB",
		"--conn_idle_timeout", idle.String(), "--conn_frame_timeout", frame.String())
	cl := connectClient(t, master)
	ctx := context.Background()
	st, err := cl.Status(ctx)
	if err != nil || len(st.Workers) != 1 {
		t.Fatalf("status: %+v %v", st, err)
	}
	worker := st.Workers[0].Address

	big := objectValue(21, 0, 64<<20)
	if err := cl.Put(ctx, "big/1", big, client.ReplicateConfig{}); err != nil {
		t.Fatalf("put 64 MiB: %v", err)
	}

	idleConn := helloConn(t, worker)
	took := closedWithin(t, idleConn, 20*idle)
	t.Logf("a connection idle after its hello was closed after %v (--conn_idle_timeout %v)", took, idle)

	// Standalone's master takes the same limits on its RPC port.
	took = closedWithin(t, helloConn(t, master), 20*idle)
	t.Logf("a connection to the master idle after its hello was closed after %v", took)

	trickler := helloConn(t, worker)
	go testutil.Trickle(trickler, bytes.Repeat([]byte{1}, 32), 200*time.Millisecond) // a frame header
	took = closedWithin(t, trickler, 20*frame)
	t.Logf("a connection trickling a frame was closed after %v (--conn_frame_timeout %v)", took, frame)

	// The client's pooled connection to the worker has been idle for longer than the
	// worker's idle timeout by now: its next calls redial.
	got, err := cl.Get(ctx, "big/1")
	if err != nil || base.Checksum(got) != base.Checksum(big) {
		t.Fatalf("get 64 MiB after the worker closed idle connections: %v", err)
	}
	if err := cl.Put(ctx, "big/2", big, client.ReplicateConfig{}); err != nil {
		t.Fatalf("put after the worker closed idle connections: %v", err)
	}
	if got, err := cl.Get(ctx, "big/2"); err != nil || base.Checksum(got) != base.Checksum(big) {
		t.Fatalf("get big/2: %v", err)
	}
}
