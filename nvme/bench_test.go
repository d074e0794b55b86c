package nvme

import (
	"encoding/binary"
	"flag"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mooncake-go/mooncake/internal/base"
	"golang.org/x/sys/unix"
)

// Benchmarks. Each figure is reported beside a raw baseline measured in the same run on the
// same directory, and as a ratio:
//
//	go test -run XXX -bench . -benchtime 2s ./nvme/ [-nvme.dir /mnt/nvme/tmp]
//
// Page cache: O_DIRECT writes leave nothing in the page cache; before every timed read pass
// both the store's files and the baseline file are dropped from it with
// posix_fadvise(POSIX_FADV_DONTNEED), so both read from the device.

var benchDir = flag.String("nvme.dir", "", "directory for benchmark files (default: a temp dir)")

func benchTempDir(b *testing.B) string {
	if *benchDir == "" {
		return b.TempDir()
	}
	d, err := os.MkdirTemp(*benchDir, "nvme-bench-")
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { os.RemoveAll(d) })
	return d
}

// fp16Normal returns n bytes of fp16 values drawn from N(0, 1), like K/V activations;
// zeroFrac of them are exact zeros.
func fp16Normal(seed uint64, n int, zeroFrac float64) []byte {
	r := rand.New(rand.NewPCG(seed, 3))
	b := make([]byte, n)
	for i := 0; i+1 < n; i += 2 {
		var h uint16
		if r.Float64() >= zeroFrac {
			h = toFP16(float32(r.NormFloat64()))
		}
		binary.LittleEndian.PutUint16(b[i:], h)
	}
	return b
}

// toFP16 converts a float32 to IEEE half precision (round toward zero; enough for test data).
func toFP16(f float32) uint16 {
	bits := math.Float32bits(f)
	sign := uint16(bits>>16) & 0x8000
	exp := int((bits>>23)&0xff) - 127 + 15
	mant := bits & 0x7fffff
	switch {
	case exp <= 0:
		return sign // flush subnormals to zero
	case exp >= 31:
		return sign | 0x7c00
	}
	return sign | uint16(exp)<<10 | uint16(mant>>13)
}

var benchSizes = []int{1 << 20, 4 << 20, 16 << 20}

func sizeName(n int) string { return base.Bytes(n).String() }

// rawFile opens a plain file for the baseline, with O_DIRECT when the store uses it.
func rawFile(b *testing.B, path string, direct bool) *os.File {
	flags := os.O_RDWR | os.O_CREATE | os.O_TRUNC
	if direct {
		flags |= unix.O_DIRECT
	}
	f, err := os.OpenFile(path, flags, 0o644)
	if err != nil {
		b.Fatal(err)
	}
	return f
}

// rawWrite writes count copies of data (padded to 4 KiB, as O_DIRECT needs) sequentially,
// with fdatasync after each (durable) or whenever DefaultGroupCommitInterval has passed since
// the last one, and at the end (spill: the store's SyncGroup durability), and returns the
// bytes written and the time it took.
func rawWrite(b *testing.B, dir string, data []byte, count int, direct, syncEach bool) (int64, time.Duration) {
	f := rawFile(b, filepath.Join(dir, "raw-write"), direct)
	defer os.Remove(f.Name())
	defer f.Close()
	buf := getBuf(int(alignUp(int64(len(data)))))
	defer putBuf(buf)
	copy(buf, data)
	start := time.Now()
	lastSync := start
	off := int64(0)
	for i := 0; i < count; i++ {
		if _, err := f.WriteAt(buf, off); err != nil {
			b.Fatal(err)
		}
		off += int64(len(buf))
		if syncEach || time.Since(lastSync) >= DefaultGroupCommitInterval {
			lastSync = time.Now()
			if err := unix.Fdatasync(int(f.Fd())); err != nil {
				b.Fatal(err)
			}
		}
	}
	if err := unix.Fdatasync(int(f.Fd())); err != nil {
		b.Fatal(err)
	}
	return int64(len(data) * count), time.Since(start)
}

func benchOpen(b *testing.B, dir string) *Store {
	return mustOpen(b, Options{Dir: dir, Logger: quietLogger, GCInterval: -1})
}

// BenchmarkSpillWrite: Put of fp16 K/V-like objects with the default policy (SyncGroup).
// spill: sync=false, the group tick syncs; the timer stops after the final sync of Close.
// Baseline (before and after the store): the same bytes written sequentially to one file
// (O_DIRECT when the store uses it), fdatasync every 5 ms and at the end.
// spill-4writers: the same from 4 goroutines (the baseline stays one sequential stream).
// durable: sync=true; baseline: fdatasync after every object.
func BenchmarkSpillWrite(b *testing.B) {
	for _, mode := range []string{"spill", "spill-4writers", "durable"} {
		for _, size := range benchSizes {
			b.Run(fmt.Sprintf("%s/%s", mode, sizeName(size)), func(b *testing.B) {
				dir := benchTempDir(b)
				data := fp16Normal(1, size, 0)
				s := benchOpen(b, filepath.Join(dir, "store"))
				direct := s.Metrics().DirectIO
				// The baseline runs before and after the store (its figure is the total
				// bytes over the total time of both), so a change of the machine's load
				// during the run weighs on both sides alike.
				b.StopTimer()
				rawBytes, rawDur := rawWrite(b, dir, data, b.N, direct, mode == "durable")
				b.StartTimer()
				b.ReportAllocs()
				b.SetBytes(int64(size))
				b.ResetTimer()
				start := time.Now()
				writers := 1
				if mode == "spill-4writers" {
					writers = 4 // as a spiller with 4 goroutines would
				}
				var wg sync.WaitGroup
				var failed atomic.Value
				for w := 0; w < writers; w++ {
					wg.Add(1)
					go func(w int) {
						defer wg.Done()
						for i := w; i < b.N; i += writers {
							if err := s.Put(fmt.Sprint("obj", i), 1, data, mode == "durable"); err != nil {
								failed.Store(err)
								return
							}
						}
					}(w)
				}
				wg.Wait()
				if err, _ := failed.Load().(error); err != nil {
					b.Fatal(err)
				}
				if err := s.Close(); err != nil {
					b.Fatal(err)
				}
				store := float64(size*b.N) / time.Since(start).Seconds()
				b.StopTimer()
				os.RemoveAll(filepath.Join(dir, "store"))
				n2, d2 := rawWrite(b, dir, data, b.N, direct, mode == "durable")
				raw := float64(rawBytes+n2) / (rawDur + d2).Seconds()
				b.ReportMetric(store/1e9, "GB/s")
				b.ReportMetric(raw/1e9, "raw-GB/s")
				b.ReportMetric(store/raw, "ratio")
			})
		}
	}
}

func dropCache(b *testing.B, paths ...string) {
	for _, p := range paths {
		f, err := os.Open(p)
		if err != nil {
			b.Fatal(err)
		}
		if err := unix.Fadvise(int(f.Fd()), 0, 0, unix.FADV_DONTNEED); err != nil {
			b.Fatal(err)
		}
		f.Close()
	}
}

func dropDirCache(b *testing.B, dir string) {
	var paths []string
	filepath.Walk(dir, func(p string, fi os.FileInfo, err error) error {
		if err == nil && fi.Mode().IsRegular() {
			paths = append(paths, p)
		}
		return nil
	})
	dropCache(b, paths...)
}

// BenchmarkNVMeHitRead: ReadInto of objects written by Put, from the device (cache dropped),
// in write order. Baseline (before and after the store): pread of the same bytes, object by
// object, from one sequential file with its cache dropped; both read through the page cache. 256 MiB of objects; the cache is dropped again (timer stopped)
// whenever the loop wraps around.
func BenchmarkNVMeHitRead(b *testing.B) {
	for _, size := range benchSizes {
		b.Run(sizeName(size), func(b *testing.B) {
			dir := benchTempDir(b)
			count := (256 << 20) / size
			data := fp16Normal(2, size, 0)
			s := benchOpen(b, filepath.Join(dir, "store"))
			defer s.Close()
			for i := 0; i < count; i++ {
				if err := s.Put(fmt.Sprint("obj", i), 1, data, true); err != nil {
					b.Fatal(err)
				}
			}
			raw := rawFile(b, filepath.Join(dir, "raw-read"), false)
			defer raw.Close()
			for i := 0; i < count; i++ {
				if _, err := raw.WriteAt(data, int64(i*size)); err != nil {
					b.Fatal(err)
				}
			}
			if err := raw.Sync(); err != nil {
				b.Fatal(err)
			}
			extDir := filepath.Join(dir, "store", "extents")
			dst := make([]byte, size)

			// The baseline before and after the store, for as many objects as the store
			// reads each time (its figure is the total bytes over the total time of both
			// passes, so a change of the machine's load weighs on both sides alike).
			n := b.N
			var rawDur time.Duration
			rawPass := func() {
				dropCache(b, raw.Name())
				t0 := time.Now()
				for i := 0; i < n; i++ {
					if i > 0 && i%count == 0 {
						rawDur += time.Since(t0)
						dropCache(b, raw.Name())
						t0 = time.Now()
					}
					if _, err := raw.ReadAt(dst, int64((i%count)*size)); err != nil {
						b.Fatal(err)
					}
				}
				rawDur += time.Since(t0)
			}
			rawPass()

			dropDirCache(b, extDir)
			b.ReportAllocs()
			b.SetBytes(int64(size))
			b.ResetTimer()
			for i := 0; i < n; i++ {
				if i > 0 && i%count == 0 {
					b.StopTimer()
					dropDirCache(b, extDir)
					b.StartTimer()
				}
				if err := s.ReadInto(fmt.Sprint("obj", i%count), 1, dst); err != nil {
					b.Fatal(err)
				}
			}
			b.StopTimer()
			store := float64(size*n) / b.Elapsed().Seconds()
			rawPass()
			rawBps := float64(2*size*n) / rawDur.Seconds()
			b.ReportMetric(store/1e9, "GB/s")
			b.ReportMetric(rawBps/1e9, "raw-GB/s")
			b.ReportMetric(store/rawBps, "ratio")
		})
	}
}

// BenchmarkRestore: Open + Scan of a store, cold cache. extents: 512 MiB of 1 MiB objects
// (reported per GiB); inline: 200k objects of 1 KiB (reported per million objects).
func BenchmarkRestore(b *testing.B) {
	cases := []struct {
		name  string
		count int
		size  int
	}{
		{"extents-1MiB", 512, 1 << 20},
		{"inline-1KiB", 200_000, 1 << 10},
	}
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			dir := filepath.Join(benchTempDir(b), "store")
			s := benchOpen(b, dir)
			for i := 0; i < c.count; i++ {
				if err := s.Put(fmt.Sprintf("model/layer/%08d", i), 1, fp16Normal(uint64(i), c.size, 0), false); err != nil {
					b.Fatal(err)
				}
			}
			if err := s.Close(); err != nil {
				b.Fatal(err)
			}
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				b.StopTimer()
				dropDirCache(b, dir)
				b.StartTimer()
				s := benchOpen(b, dir)
				n := 0
				if err := s.Scan(func(base.ObjectMeta) error { n++; return nil }); err != nil {
					b.Fatal(err)
				}
				if n != c.count {
					b.Fatalf("restored %d objects, want %d", n, c.count)
				}
				if err := s.Close(); err != nil {
					b.Fatal(err)
				}
			}
			per := b.Elapsed().Seconds() / float64(b.N)
			b.ReportMetric(per*float64(1<<30)/float64(c.count*c.size), "s/GiB")
			b.ReportMetric(per*1e6/float64(c.count), "s/Mobjects")
		})
	}
}

// BenchmarkLZ4 reports what lz4 saves and costs per sample, and what Put's sampling costs on
// data it will not compress.
func BenchmarkLZ4(b *testing.B) {
	samples := []struct {
		name string
		data []byte
	}{
		{"fp16-normal", fp16Normal(3, 4<<20, 0)},
		{"fp16-60pct-zeros", fp16Normal(4, 4<<20, 0.6)},
		{"fp16-95pct-zeros", fp16Normal(5, 4<<20, 0.95)},
	}
	for _, smp := range samples {
		dst := make([]byte, len(smp.data)+len(smp.data)/200+64)
		n := lz4Compress(smp.data, dst)
		b.Run("compress/"+smp.name, func(b *testing.B) {
			b.SetBytes(int64(len(smp.data)))
			b.ReportAllocs()
			for i := 0; i < b.N; i++ {
				lz4Compress(smp.data, dst)
			}
			b.ReportMetric(100*(1-float64(n)/float64(len(smp.data))), "%saved")
		})
		b.Run("decompress/"+smp.name, func(b *testing.B) {
			out := make([]byte, len(smp.data))
			b.SetBytes(int64(len(smp.data)))
			for i := 0; i < b.N; i++ {
				if err := lz4Decompress(dst[:n], out); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run("sample-check/"+smp.name, func(b *testing.B) {
			limit := func(n int) int { return n * 9 / 10 }
			b.SetBytes(int64(len(smp.data)))
			for i := 0; i < b.N; i++ {
				lz4Promising(smp.data, limit)
			}
		})
	}
	b.Run("checksum", func(b *testing.B) {
		data := samples[0].data
		b.SetBytes(int64(len(data)))
		for i := 0; i < b.N; i++ {
			base.Checksum(data)
		}
	})
}

// BenchmarkSpillChurn is a full tier taking spills: each op puts a new object (sync=false,
// as the spiller does) and deletes the oldest, as the tier's eviction of its least recently
// used object does, over a window of 4,096 objects. Inline sizes (64 KiB, the threshold, and
// 4 KiB) and an extent size for comparison. The figure is ns per put+delete pair.
func BenchmarkSpillChurn(b *testing.B) {
	const window = 4096
	for _, size := range []int{4 << 10, 64 << 10, 256 << 10} {
		b.Run(sizeName(size), func(b *testing.B) {
			s := benchOpen(b, filepath.Join(benchTempDir(b), "store"))
			defer s.Close()
			data := fp16Normal(1, size, 0)
			key := func(i int) string { return fmt.Sprintf("model/layer/%08d", i) }
			for i := range window {
				if err := s.Put(key(i), 1, data, false); err != nil {
					b.Fatal(err)
				}
			}
			b.SetBytes(int64(size))
			b.ResetTimer()
			for i := range b.N {
				if err := s.Put(key(window+i), 1, data, false); err != nil {
					b.Fatal(err)
				}
				if err := s.Delete(key(i), 0); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
