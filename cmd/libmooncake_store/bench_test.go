package main

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/mooncake-go/mooncake/client"
	"github.com/mooncake-go/mooncake/internal/testutil"
)

// BenchmarkGoClient measures the Go client against a `mooncake standalone` process on this
// host: the baseline the C library and the Python package over it are held to (issue 10:
// Python get_into >= 0.9 of GetInto, put_from >= 0.9 of Put, batch_get_into >= 0.8 of
// BatchGet, and the added cost of a 4 KiB get). One operation at a time, as a Python caller
// makes them.
//
//	go test -run '^$' -bench GoClient -benchtime 2s ./cmd/libmooncake_store
func BenchmarkGoClient(b *testing.B) {
	dir := b.TempDir()
	bin := testutil.BuildMooncake(b, dir)
	master, _ := testutil.StartStandalone(b, bin, filepath.Join(dir, "data"), "1GiB")
	ctx := context.Background()
	c, err := client.Connect(ctx, client.Config{MasterAddresses: []string{master}})
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()

	for _, size := range []int{1 << 20, 16 << 20, 64 << 20} {
		b.Run(fmt.Sprintf("GetInto/%dMiB", size>>20), func(b *testing.B) {
			key := fmt.Sprintf("get-%d", size)
			if err := c.Put(ctx, key, make([]byte, size), client.ReplicateConfig{Upsert: true}); err != nil {
				b.Fatal(err)
			}
			defer c.Remove(ctx, key)
			buf := make([]byte, size)
			b.SetBytes(int64(size))
			b.ResetTimer()
			for b.Loop() {
				if _, err := c.GetInto(ctx, key, buf); err != nil {
					b.Fatal(err)
				}
			}
		})
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
	b.Run("Get/4KiB", func(b *testing.B) {
		if err := c.Put(ctx, "small", make([]byte, 4<<10), client.ReplicateConfig{Upsert: true}); err != nil {
			b.Fatal(err)
		}
		start := time.Now()
		for b.Loop() {
			if _, err := c.Get(ctx, "small"); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(time.Since(start).Microseconds())/float64(b.N), "µs/get")
	})
}
