package tier_test

import (
	"fmt"
	"sync"
	"testing"

	"github.com/mooncake-go/mooncake/dram"
	"github.com/mooncake-go/mooncake/internal/base"
	"github.com/mooncake-go/mooncake/tier"
)

// BenchmarkStripedPut measures a put whose bytes arrive in stripes filled by several
// goroutines at once (as the worker's connections fill them from the sockets), then commits
// it verified, then removes it. Modes, all in the same run:
//
//	trusted      fill, CommitTrusted: no hash at all (the floor)
//	second-pass  fill, Commit(sum): the hash in one pass after the last stripe (before Landed)
//	landed       fill and Landed per stripe, Commit(sum): the hash runs as stripes land
//
// Compare MB/s of landed and second-pass against trusted.
func BenchmarkStripedPut(b *testing.B) {
	const size = 16 << 20
	src := pattern("src", 1, size)
	sum := base.Checksum(src)
	for _, stripe := range []int{4 << 20, 1 << 20} {
		for _, mode := range []string{"trusted", "second-pass", "landed"} {
			b.Run(fmt.Sprintf("stripe%dMiB/%s", stripe>>20, mode), func(b *testing.B) {
				a, err := dram.NewArena(dram.Options{Size: 4 * size, Prefault: true})
				if err != nil {
					b.Fatal(err)
				}
				defer a.Close()
				e, err := tier.Open(tier.Options{Arena: a})
				if err != nil {
					b.Fatal(err)
				}
				defer e.Close()
				b.SetBytes(size)
				b.ReportAllocs()
				var v base.Version
				for b.Loop() {
					v++
					w, err := e.Put("bench", v, size, tier.PutOptions{})
					if err != nil {
						b.Fatal(err)
					}
					var wg sync.WaitGroup
					for off := 0; off < size; off += stripe {
						wg.Add(1)
						go func() {
							defer wg.Done()
							copy(w.Bytes()[off:off+stripe], src[off:])
							if mode == "landed" {
								w.Landed(int64(off), int64(stripe))
							}
						}()
					}
					wg.Wait()
					if mode == "trusted" {
						err = w.CommitTrusted(sum)
					} else {
						err = w.Commit(sum)
					}
					if err != nil {
						b.Fatal(err)
					}
					if err := e.Remove("bench", v); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}
