package tier_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"testing"

	"github.com/mooncake-go/mooncake/dram"
	"github.com/mooncake-go/mooncake/internal/base"
	"github.com/mooncake-go/mooncake/nvme"
	"github.com/mooncake-go/mooncake/tier"
)

const benchObj = 1 << 20

func benchStore(b *testing.B, dir string) *nvme.Store {
	b.Helper()
	s, err := nvme.Open(nvme.Options{Dir: dir, Capacity: 64 << 30, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		b.Fatal(err)
	}
	return s
}

// BenchmarkSpillNVMe measures spilling through the engine onto the real nvme store: each
// iteration puts one 1 MiB object into an 8 MiB arena, so every put past the first few
// evicts (spills) an older one; the timer includes SpillAll at the end, so every byte is on
// disk (synced) when it stops. Baseline in the same run, same directory: a plain sequential
// write of the same bytes to one file, synced at the end; and the nvme store's Put alone.
func BenchmarkSpillNVMe(b *testing.B) {
	src := pattern("src", 1, benchObj)
	b.Run("file-write", func(b *testing.B) {
		f, err := os.Create(filepath.Join(b.TempDir(), "plain"))
		if err != nil {
			b.Fatal(err)
		}
		defer f.Close()
		b.SetBytes(benchObj)
		b.ReportAllocs()
		for b.Loop() {
			if _, err := f.Write(src); err != nil {
				b.Fatal(err)
			}
		}
		if err := f.Sync(); err != nil {
			b.Fatal(err)
		}
	})
	b.Run("store-put", func(b *testing.B) {
		// The nvme store alone (what the spiller calls), to separate its cost from tier's.
		s := benchStore(b, b.TempDir())
		defer s.Close()
		b.SetBytes(benchObj)
		b.ReportAllocs()
		i := 0
		for b.Loop() {
			i++
			if err := s.Put(fmt.Sprint("k", i), 1, src, false); err != nil {
				b.Fatal(err)
			}
		}
		if err := s.Put("last", 1, src, true); err != nil {
			b.Fatal(err)
		}
	})
	b.Run("tier-spill", func(b *testing.B) {
		s := benchStore(b, b.TempDir())
		defer s.Close()
		a, err := dram.NewArena(dram.Options{Size: 8 * benchObj})
		if err != nil {
			b.Fatal(err)
		}
		defer a.Close()
		e, err := tier.Open(tier.Options{Arena: a, Lower: s, SpillQueueBytes: 4 * benchObj})
		if err != nil {
			b.Fatal(err)
		}
		defer e.Close()
		b.SetBytes(benchObj)
		b.ReportAllocs()
		i := 0
		for b.Loop() {
			i++
			key := fmt.Sprint("k", i)
			w, err := e.Put(key, 1, benchObj, tier.PutOptions{})
			if err != nil {
				b.Fatal(err)
			}
			copy(w.Bytes(), src)
			if err := w.CommitTrusted(1); err != nil {
				b.Fatal(err)
			}
		}
		if err := e.SpillAll(context.Background()); err != nil {
			b.Fatal(err)
		}
		b.ReportMetric(float64(e.Metrics().Spills), "spills")
	})
}

// BenchmarkNVMeHit measures Gets served from the nvme store (first hits: read into a DRAM
// range, not promoted) of 1 MiB objects, beside a plain sequential read of a file holding the
// same bytes, in the same run and directory. Both may be served from the page cache.
func BenchmarkNVMeHit(b *testing.B) {
	const n = 256 // objects (256 MiB)
	src := pattern("src", 1, benchObj)
	dir := b.TempDir()
	plain := filepath.Join(dir, "plain")
	f, err := os.Create(plain)
	if err != nil {
		b.Fatal(err)
	}
	for range n {
		if _, err := f.Write(src); err != nil {
			b.Fatal(err)
		}
	}
	if err := f.Close(); err != nil {
		b.Fatal(err)
	}
	s := benchStore(b, filepath.Join(dir, "store"))
	defer s.Close()
	for i := range n {
		if err := s.Put(fmt.Sprint("k", i), 1, src, false); err != nil {
			b.Fatal(err)
		}
	}
	b.Run("file-read", func(b *testing.B) {
		f, err := os.Open(plain)
		if err != nil {
			b.Fatal(err)
		}
		defer f.Close()
		buf := make([]byte, benchObj)
		b.SetBytes(benchObj)
		b.ReportAllocs()
		i := 0
		for b.Loop() {
			if _, err := f.ReadAt(buf, int64(i%n)*benchObj); err != nil && err != io.EOF {
				b.Fatal(err)
			}
			i++
		}
	})
	b.Run("tier-get", func(b *testing.B) {
		a, err := dram.NewArena(dram.Options{Size: 16 * benchObj})
		if err != nil {
			b.Fatal(err)
		}
		defer a.Close()
		// PromoteOnHit is set out of reach: every Get is a lower-tier hit.
		e, err := tier.Open(tier.Options{Arena: a, Lower: s, PromoteOnHit: 1 << 30})
		if err != nil {
			b.Fatal(err)
		}
		defer e.Close()
		b.SetBytes(benchObj)
		b.ReportAllocs()
		i := 0
		for b.Loop() {
			r, err := e.Get(fmt.Sprint("k", i%n), 0)
			if err != nil {
				b.Fatal(err)
			}
			if r.Tier() != base.TierNVMe {
				b.Fatal("not an nvme hit")
			}
			Sink += uint64(r.Bytes()[benchObj-1])
			r.Release()
			i++
		}
	})
}

// BenchmarkOpenScan measures a restart: tier.Open over an nvme store holding n objects (the
// store is reopened each iteration so its own recovery is included). Reported per object and
// per GiB of objects.
func BenchmarkOpenScan(b *testing.B) {
	for _, c := range []struct{ n, size int }{{20000, 4 << 10}, {256, 1 << 20}} {
		b.Run(fmt.Sprintf("%dx%dKiB", c.n, c.size>>10), func(b *testing.B) {
			dir := b.TempDir()
			s := benchStore(b, dir)
			src := pattern("src", 1, c.size)
			for i := range c.n {
				if err := s.Put(fmt.Sprint("k", i), 1, src, false); err != nil {
					b.Fatal(err)
				}
			}
			if err := s.Close(); err != nil {
				b.Fatal(err)
			}
			a, err := dram.NewArena(dram.Options{Size: 1 << 20})
			if err != nil {
				b.Fatal(err)
			}
			defer a.Close()
			for _, withTier := range []bool{false, true} {
				name := "store-open" // baseline: the nvme store's own recovery alone
				if withTier {
					name = "store+tier-open"
				}
				b.Run(name, func(b *testing.B) {
					b.ReportAllocs()
					for b.Loop() {
						s := benchStore(b, dir)
						if withTier {
							e, err := tier.Open(tier.Options{Arena: a, Lower: s})
							if err != nil {
								b.Fatal(err)
							}
							if len(e.Inventory()) != c.n {
								b.Fatal("objects missing")
							}
							e.Close()
						}
						s.Close()
					}
					perOp := float64(b.Elapsed().Nanoseconds()) / float64(b.N)
					b.ReportMetric(perOp/float64(c.n), "ns/object")
					b.ReportMetric(perOp/1e9*float64(1<<30)/float64(c.n*c.size), "s/GiB")
				})
			}
		})
	}
}
