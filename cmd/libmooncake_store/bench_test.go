package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mooncake-go/mooncake/client"
	"github.com/mooncake-go/mooncake/internal/testutil"
)

// BenchmarkGoClient measures the Go client against a `mooncake standalone` process on this
// host: the baseline the C library and the Python package over it are held to (issue 10:
// Python get_into >= 0.9 of GetInto, put_from >= 0.9 of Put, batch_get_into >= 0.8 of
// BatchGet, and the added cost of a 4 KiB get). One operation at a time, as a Python caller
// makes them. The C/... sub-benchmarks run the same reads through the C library (the check
// program's bench mode, a separate process linked to libmooncake_store.so), right after
// their Go counterpart, so the two can be compared in one run: the C library's own cost is
// what the Python package starts from.
//
//	go test -run '^$' -bench GoClient -benchtime 2s ./cmd/libmooncake_store
func BenchmarkGoClient(b *testing.B) {
	dir := b.TempDir()
	prog, bin := buildCheck(b, dir)
	master, _ := testutil.StartStandalone(b, bin, filepath.Join(dir, "data"), "1GiB")
	ctx := context.Background()
	c, err := client.Connect(ctx, client.Config{MasterAddresses: []string{master}})
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	cb := startCBench(b, prog, master)

	for _, size := range []int{1 << 20, 16 << 20, 64 << 20} {
		key := fmt.Sprintf("get-%d", size)
		if err := c.Put(ctx, key, make([]byte, size), client.ReplicateConfig{Upsert: true}); err != nil {
			b.Fatal(err)
		}
		b.Run(fmt.Sprintf("GetInto/%dMiB", size>>20), func(b *testing.B) {
			buf := make([]byte, size)
			b.SetBytes(int64(size))
			for b.Loop() {
				if _, err := c.GetInto(ctx, key, buf); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(fmt.Sprintf("C/GetInto/%dMiB", size>>20), func(b *testing.B) {
			b.SetBytes(int64(size))
			cb.do(b, "get_into %s %d 1", key, size) // warm: connections, the lookup
			b.ResetTimer()
			cb.do(b, "get_into %s %d %d", key, size, b.N)
		})
		c.Remove(ctx, key)
	}
	for _, size := range []int{1 << 20, 16 << 20} {
		b.Run(fmt.Sprintf("Put/%dMiB", size>>20), func(b *testing.B) {
			val := make([]byte, size)
			b.SetBytes(int64(size))
			i := 0
			for b.Loop() {
				key := fmt.Sprintf("put-%d-%d", size, i)
				i++
				if err := c.Put(ctx, key, val, client.ReplicateConfig{}); err != nil {
					b.Fatal(err)
				}
				// Not timed: keeps the segment from filling over a long run.
				b.StopTimer()
				if err := c.Remove(ctx, key); err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
			}
		})
	}
	keys := make([]string, 64)
	vals, bufs := make([][]byte, 64), make([][]byte, 64)
	for i := range keys {
		keys[i] = fmt.Sprintf("batch-%d", i)
		vals[i], bufs[i] = make([]byte, 64<<10), make([]byte, 64<<10)
	}
	for _, err := range c.BatchPut(ctx, keys, vals, client.ReplicateConfig{Upsert: true}) {
		if err != nil {
			b.Fatal(err)
		}
	}
	b.Run("BatchGet/64x64KiB", func(b *testing.B) {
		b.SetBytes(64 * 64 << 10)
		for b.Loop() {
			if _, errs := c.BatchGet(ctx, keys); errs[0] != nil || errs[63] != nil {
				b.Fatal(errs[0], errs[63])
			}
		}
	})
	b.Run("BatchGetInto/64x64KiB", func(b *testing.B) {
		b.SetBytes(64 * 64 << 10)
		for b.Loop() {
			if _, errs := c.BatchGetInto(ctx, keys, bufs); errs[0] != nil || errs[63] != nil {
				b.Fatal(errs[0], errs[63])
			}
		}
	})
	b.Run("C/BatchGetInto/64x64KiB", func(b *testing.B) {
		b.SetBytes(64 * 64 << 10)
		cb.do(b, "batch batch- 64 %d 1", 64<<10)
		b.ResetTimer()
		cb.do(b, "batch batch- 64 %d %d", 64<<10, b.N)
	})
	if err := c.Put(ctx, "small", make([]byte, 4<<10), client.ReplicateConfig{Upsert: true}); err != nil {
		b.Fatal(err)
	}
	b.Run("Get/4KiB", func(b *testing.B) {
		start := time.Now()
		for b.Loop() {
			if _, err := c.Get(ctx, "small"); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(time.Since(start).Microseconds())/float64(b.N), "µs/get")
	})
	b.Run("C/GetBuffer/4KiB", func(b *testing.B) {
		cb.do(b, "get_buffer small 1")
		b.ResetTimer()
		start := time.Now()
		cb.do(b, "get_buffer small %d", b.N)
		b.ReportMetric(float64(time.Since(start).Microseconds())/float64(b.N), "µs/get")
	})
}

// cBench drives the check program's bench mode: one command per line, answered "ok".
type cBench struct {
	in  io.Writer
	out *bufio.Scanner
}

func startCBench(b *testing.B, prog, master string) *cBench {
	cmd := exec.Command(prog, master, "bench")
	in, err := cmd.StdinPipe()
	if err != nil {
		b.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		in.Close()
		cmd.Wait()
	})
	return &cBench{in: in, out: bufio.NewScanner(out)}
}

func (cb *cBench) do(b *testing.B, format string, args ...any) {
	b.Helper()
	fmt.Fprintf(cb.in, format+"\n", args...)
	if !cb.out.Scan() || cb.out.Text() != "ok" {
		b.Fatalf("C bench %q: %q %v", strings.TrimSpace(fmt.Sprintf(format, args...)), cb.out.Text(), cb.out.Err())
	}
}
