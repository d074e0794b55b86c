package server

import (
	"context"
	"fmt"
	"io"
	"net"
	"sync/atomic"
	"testing"

	"github.com/mooncake-go/mooncake/dram"
	"github.com/mooncake-go/mooncake/internal/base"
	"github.com/mooncake-go/mooncake/transfer"
)

// BenchmarkStandalone measures one put (PutStart, Write, PutEnd) and one get (Lookup, Read)
// of a 1 MiB value through a standalone master + worker over loopback TCP, one client
// goroutine. BenchmarkLoopbackTCP is the baseline measured in the same run: the same bytes
// over one raw loopback connection (write, read back fully). Compare the MB/s columns.
// NB: the machine is shared; figures are noisy.
func BenchmarkStandalone(b *testing.B) {
	const size = 1 << 20
	s, err := NewStandalone(StandaloneConfig{DataDir: b.TempDir(), RPCAddress: "127.0.0.1:0",
		GlobalSegmentSize: 256 << 20, HugePages: dram.HugePagesOff, Logger: testLogger()})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Shutdown(context.Background())
	cli, err := transfer.NewClient(transfer.ClientOptions{Logger: testLogger()})
	if err != nil {
		b.Fatal(err)
	}
	defer cli.Close()
	ctx := context.Background()
	val := make([]byte, size)
	for i := range val {
		val[i] = byte(i)
	}
	sum := base.Checksum(val)
	put := func(key string) {
		ps := &transfer.PutStartResponse{}
		if err := cli.Call(ctx, s.Addr(),
			&transfer.PutStartRequest{Object: base.Object{ObjectMeta: base.ObjectMeta{Key: key, Size: size}},
				Config: base.PutConfig{Upsert: true}}, ps); err != nil {
			b.Fatal(err)
		}
		if err := cli.Write(ctx, ps.Replicas[0].Address, transfer.WriteRequest{Key: key, Version: ps.Version, Checksum: sum}, val); err != nil {
			b.Fatal(err)
		}
		if err := cli.Call(ctx, s.Addr(),
			&transfer.PutEndRequest{Object: base.Object{ObjectMeta: base.ObjectMeta{Key: key, Version: ps.Version,
				Size: size, Checksum: sum}}, Config: base.PutConfig{Upsert: true}}, nil); err != nil {
			b.Fatal(err)
		}
	}
	b.Run("put/1MiB", func(b *testing.B) {
		b.ReportAllocs()
		b.SetBytes(size)
		for i := 0; b.Loop(); i++ {
			put(fmt.Sprintf("k%d", i%64))
		}
	})
	b.Run("put/1MiB/parallel16", func(b *testing.B) {
		// Concurrent puts share raft commits (one log fsync per batch of PutEnds).
		b.ReportAllocs()
		b.SetBytes(size)
		b.SetParallelism(8) // x GOMAXPROCS(2) = 16 clients
		var n atomic.Int64
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				put(fmt.Sprintf("p%d", n.Add(1)%128))
			}
		})
	})
	put("get")
	buf := make([]byte, size)
	b.Run("get/1MiB", func(b *testing.B) {
		b.ReportAllocs()
		b.SetBytes(size)
		for b.Loop() {
			lr := &transfer.LookupResponse{}
			if err := cli.Call(ctx, s.Addr(), &transfer.LookupRequest{Key: "get"}, lr); err != nil {
				b.Fatal(err)
			}
			if _, _, err := cli.Read(ctx, lr.Replicas[0].Address, transfer.ReadRequest{Key: "get", Version: lr.Version}, buf); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkLoopbackTCP is the raw baseline of BenchmarkStandalone: 1 MiB written to a
// loopback TCP connection and read back fully by a goroutine that echoes a 1-byte ack.
func BenchmarkLoopbackTCP(b *testing.B) {
	const size = 1 << 20
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	defer ln.Close()
	done := make(chan struct{})
	go func() {
		defer close(done)
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		buf := make([]byte, size)
		for {
			if _, err := io.ReadFull(c, buf); err != nil {
				return
			}
			if _, err := c.Write([]byte{1}); err != nil {
				return
			}
		}
	}()
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		b.Fatal(err)
	}
	val := make([]byte, size)
	ack := make([]byte, 1)
	b.Run("1MiB", func(b *testing.B) {
		b.ReportAllocs()
		b.SetBytes(size)
		for b.Loop() {
			if _, err := c.Write(val); err != nil {
				b.Fatal(err)
			}
			if _, err := io.ReadFull(c, ack); err != nil {
				b.Fatal(err)
			}
		}
	})
	c.Close()
	<-done
}
