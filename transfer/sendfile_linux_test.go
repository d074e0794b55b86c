package transfer

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/mooncake-go/mooncake/internal/base"
)

// fileHandler serves one object from a memfd it maps, as a worker serves its arena: Data is
// the mapping's range and File the same range of the memfd. A pipe's read end in place of
// the memfd (refuse) is a file sendfile refuses, like a hugetlb memfd.
type fileHandler struct {
	UnimplementedHandler
	fd       int    // the memfd
	mem      []byte // its mapping
	size     int64  // the object: mem[:size]
	sum      uint64 // its checksum when served
	refuseFD int    // > 0: sent as File.FD instead of fd
	// sent receives once per read after the Server released it (the send returned).
	sent chan struct{}
}

func newFileHandler(t *testing.T, data []byte) *fileHandler {
	t.Helper()
	fd, err := unix.MemfdCreate("transfer-test", unix.MFD_CLOEXEC)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Close(fd) })
	if err := unix.Ftruncate(fd, int64(len(data))); err != nil {
		t.Fatal(err)
	}
	mem, err := unix.Mmap(fd, 0, len(data), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = unix.Munmap(mem) })
	copy(mem, data)
	return &fileHandler{fd: fd, mem: mem, size: int64(len(data)), sum: base.Checksum(data), sent: make(chan struct{}, 64)}
}

func (h *fileHandler) HandleRead(_ context.Context, req *ReadRequest) (ReadSource, error) {
	end := h.size
	if req.Length > 0 {
		end = req.Offset + req.Length
	}
	if req.Offset > h.size || end > h.size {
		return ReadSource{}, fmt.Errorf("%w: range beyond the object", base.ErrInvalidParams)
	}
	fd := h.fd
	if h.refuseFD > 0 {
		fd = h.refuseFD
	}
	return ReadSource{
		Resp:    ReadResponse{Version: 1, Size: h.size, Checksum: h.sum, Tier: base.TierDRAM},
		Data:    h.mem[req.Offset:end],
		File:    FileRange{Valid: true, FD: fd, Offset: req.Offset},
		Release: func() { h.sent <- struct{}{} },
	}, nil
}

// TestReadByReference: over real TCP, reads of a verifying client (ReadRequest.Verifies) of
// at least sendfileMin go by sendfile and arrive intact: whole, ranged, striped, and one too
// large for the socket buffers (EAGAIN and partial sends resumed at the right offset); reads
// without Verifies, and small ones, are copied.
func TestReadByReference(t *testing.T) {
	data := pattern(24<<20+12345, 5)
	h := newFileHandler(t, data)
	s := startServer(t, h, ServerOptions{SendfileReads: true})
	c := newClient(t, ClientOptions{Retries: -1, StripeThreshold: 8 << 20, StripeChunk: 4 << 20})
	ctx := context.Background()
	addr := s.Addr().String()
	sends := func() int64 { return s.Stats().SendfileSends }

	f := func(req ReadRequest, want []byte, byRef int64) {
		t.Helper()
		before := sends()
		dst := make([]byte, len(want))
		_, n, sum, err := c.ReadSum(ctx, addr, req, dst)
		if err != nil || n != len(want) || !bytes.Equal(dst, want) || sum != base.Checksum(want) {
			t.Fatalf("%+v: %d bytes, %v; equal %v", req, n, err, bytes.Equal(dst, want))
		}
		if got := sends() - before; got != byRef {
			t.Fatalf("%+v: %d sends by reference, want %d", req, got, byRef)
		}
	}
	// Whole object, striped: 6 chunks of 4 MiB, each by reference.
	f(ReadRequest{Key: "k", Verifies: true}, data, 6)
	f(ReadRequest{Key: "k"}, data, 0)
	// A 20 MiB range in one frame: far more than the socket buffers hold.
	f(ReadRequest{Key: "k", Offset: 4097, Length: 20 << 20, Verifies: true}, data[4097:4097+20<<20], 1)
	f(ReadRequest{Key: "k", Offset: 100, Length: 1 << 20, Verifies: true}, data[100:100+1<<20], 1)
	// Under sendfileMin: copied.
	f(ReadRequest{Key: "k", Offset: 7, Length: 1000, Verifies: true}, data[7:1007], 0)
	if st := s.Stats(); st.SendfileRefused != 0 {
		t.Fatalf("%d sends refused", st.SendfileRefused)
	}
	// A server without SendfileReads copies every payload.
	off := startServer(t, h, ServerOptions{})
	dst := make([]byte, 1<<20)
	if _, n, err := c.Read(ctx, off.Addr().String(), ReadRequest{Key: "k", Length: 1 << 20, Verifies: true}, dst); err != nil || n != len(dst) || !bytes.Equal(dst, data[:n]) {
		t.Fatalf("copy server: %d %v", n, err)
	}
	if st := off.Stats(); st.SendfileSends != 0 {
		t.Fatalf("a server without SendfileReads sent by reference: %+v", st)
	}
}

// TestReadByReferenceRefused: a File sendfile cannot read (a pipe here, a hugetlb memfd in a
// worker) is copied from Data instead, intact, and counted.
func TestReadByReferenceRefused(t *testing.T) {
	data := pattern(3<<20, 9)
	h := newFileHandler(t, data)
	var p [2]int
	if err := unix.Pipe2(p[:], unix.O_CLOEXEC); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Close(p[0]); unix.Close(p[1]) })
	h.refuseFD = p[0]
	s := startServer(t, h, ServerOptions{SendfileReads: true})
	c := newClient(t, ClientOptions{Retries: -1, StripeThreshold: 8 << 20})
	dst := make([]byte, len(data))
	if _, n, err := c.Read(context.Background(), s.Addr().String(), ReadRequest{Key: "k", Verifies: true}, dst); err != nil || n != len(data) || !bytes.Equal(dst, data) {
		t.Fatalf("refused file: %d %v", n, err)
	}
	if st := s.Stats(); st.SendfileRefused != 1 || st.SendfileSends != 0 {
		t.Fatalf("stats %+v, want one refused send", st)
	}
}

// TestReadByReferenceSeesLaterWrites shows the hazard the Verifies rule exists for, on a raw
// connection that does not read until told: a payload sent by reference still refers to the
// file's pages after the send returned (and the handler released the range), so bytes
// written there before the client reads arrive instead of the ones that were there at the
// send, and the object checksum no longer matches. Without Verifies the payload is copied at
// the send and arrives as it was.
func TestReadByReferenceSeesLaterWrites(t *testing.T) {
	old := sendfileMin
	sendfileMin = 0 // a payload that surely fits in the socket buffers
	t.Cleanup(func() { sendfileMin = old })
	const n = 16 << 10
	data := pattern(n, 3)
	h := newFileHandler(t, data)
	s := startServer(t, h, ServerOptions{SendfileReads: true})
	conn := rawConn(t, s.Addr().String(), base.DefaultClusterID)

	read := func(id uint64, verifies bool) []byte {
		t.Helper()
		if _, err := conn.Write(frame(id, &ReadRequest{Key: "k", Verifies: verifies}, nil)); err != nil {
			t.Fatal(err)
		}
		select {
		case <-h.sent: // the send returned and the range was released
		case <-time.After(10 * time.Second):
			t.Fatal("the read was not sent")
		}
		// The range is reused: a new put overwrites it.
		for i := range h.mem[:n] {
			h.mem[i]++
		}
		_, body, payload := readResponse(t, conn)
		rr := NewReadResponse(OpRead)
		if _, err := UnmarshalResponse(OpRead, body, rr); err != nil {
			t.Fatal(err)
		}
		if rr.Checksum != base.Checksum(data) {
			t.Fatalf("response checksum %x, want the object's", rr.Checksum)
		}
		return payload
	}
	got := read(1, true)
	if !bytes.Equal(got, h.mem[:n]) {
		t.Fatalf("by reference: the payload is not the rewritten bytes (it is the original: %v)", bytes.Equal(got, data))
	}
	if base.Checksum(got) == base.Checksum(data) {
		t.Fatal("the rewritten payload matches the object checksum")
	}
	// By copy: what was in the range at the send (after the first rewrite) arrives.
	atSend := append([]byte(nil), h.mem[:n]...)
	if got := read(2, false); !bytes.Equal(got, atSend) {
		t.Fatal("a copied payload changed after the send")
	}
	if st := s.Stats(); st.SendfileSends != 1 {
		t.Fatalf("%d sends by reference, want 1", st.SendfileSends)
	}
}

// TestReadByReferenceStalledPeer: a peer that stops reading a payload sent by reference is
// cut off by the frame timeout, as one sent by copy is (the write deadline holds inside the
// sendfile loop), and the range is released.
func TestReadByReferenceStalledPeer(t *testing.T) {
	data := pattern(32<<20, 1)
	h := newFileHandler(t, data)
	s := startServer(t, h, ServerOptions{FrameTimeout: 200 * time.Millisecond, SendfileReads: true})
	conn := rawConn(t, s.Addr().String(), base.DefaultClusterID)
	if _, err := conn.Write(frame(1, &ReadRequest{Key: "k", Verifies: true}, nil)); err != nil {
		t.Fatal(err)
	}
	select {
	case <-h.sent:
	case <-time.After(30 * time.Second):
		t.Fatal("a stalled by-reference send was never given up")
	}
	awaitStat(t, s, "one frame_timeout close", func(st ServerStats) bool { return st.Closed["frame_timeout"] == 1 })
	// The connection is closed: reading it ends (after whatever was sent).
	_ = conn.SetReadDeadline(time.Now().Add(30 * time.Second))
	var buf [64 << 10]byte
	for {
		if _, err := conn.Read(buf[:]); err != nil {
			if errors.Is(err, os.ErrDeadlineExceeded) {
				t.Fatal("the stalled connection stayed open")
			}
			break
		}
	}
}
