package tier_test

import (
	"fmt"
	"testing"

	"github.com/mooncake-go/mooncake/dram"
	"github.com/mooncake-go/mooncake/internal/base"
	"github.com/mooncake-go/mooncake/tier"
)

// Sink keeps benchmark results alive (VictoriaMetrics style).
var Sink uint64

// BenchmarkPutGet measures one object's trip through the engine in one process: Put (an arena
// range), fill it from a source buffer (the copy the transfer layer does from the socket),
// Commit, Get (a pinned Reader, zero copy), Release and Remove: one object's whole life, so
// the working set is the source and one arena range, like memcpy's source and destination.
// Beside it, in the same run, the baselines: memcpy (copy of the same size between two
// buffers) and the HighwayHash pass alone. Sub-benchmarks:
//
//	memcpy        copy(dst, src)                          the target's denominator
//	checksum      base.Checksum(src)                      the cost Commit adds
//	trusted       Put+copy+CommitTrusted+Get+Release+Remove  no checksum pass
//	verified      Put+copy+Commit(sum)+Get+Release+Remove    with the checksum pass
//
// Compare GB/s: target trusted >= 0.9 x memcpy.
func BenchmarkPutGet(b *testing.B) {
	for _, size := range []int{64 << 10, 1 << 20, 16 << 20} {
		src := pattern("src", 1, size)
		sum := base.Checksum(src)
		name := fmt.Sprintf("%dKiB", size>>10)
		b.Run(name+"/memcpy", func(b *testing.B) {
			dst := make([]byte, size)
			b.SetBytes(int64(size))
			b.ReportAllocs()
			for b.Loop() {
				copy(dst, src)
			}
			Sink += uint64(dst[size-1])
		})
		b.Run(name+"/checksum", func(b *testing.B) {
			b.SetBytes(int64(size))
			b.ReportAllocs()
			for b.Loop() {
				Sink += base.Checksum(src)
			}
		})
		for _, verify := range []bool{false, true} {
			mode := "trusted"
			if verify {
				mode = "verified"
			}
			b.Run(name+"/"+mode, func(b *testing.B) {
				a, err := dram.NewArena(dram.Options{Size: int64(8 * size)})
				if err != nil {
					b.Fatal(err)
				}
				defer a.Close()
				e, err := tier.Open(tier.Options{Arena: a})
				if err != nil {
					b.Fatal(err)
				}
				defer e.Close()
				b.SetBytes(int64(size))
				b.ReportAllocs()
				var v base.Version
				for b.Loop() {
					v++
					w, err := e.Put("bench", v, int64(size), tier.PutOptions{})
					if err != nil {
						b.Fatal(err)
					}
					copy(w.Bytes(), src)
					if verify {
						err = w.Commit(sum)
					} else {
						err = w.CommitTrusted(sum)
					}
					if err != nil {
						b.Fatal(err)
					}
					r, err := e.Get("bench", v)
					if err != nil {
						b.Fatal(err)
					}
					Sink += uint64(r.Bytes()[size-1])
					r.Release()
					if err := e.Remove("bench", v); err != nil {
						b.Fatal(err)
					}
				}
				b.ReportMetric(float64(a.Stats().LiveAllocs), "live-ranges")
			})
		}
	}
}
