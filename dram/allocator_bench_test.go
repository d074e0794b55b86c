package dram

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"sync/atomic"
	"testing"
	"time"
)

// Sink keeps benchmark results alive.
var Sink any

// sizeMix draws object sizes for benchmarks.
type sizeMix struct {
	name string
	draw func(rng *rand.Rand) int64
}

var (
	// KV-cache blocks of one model: nearly equal sizes (3.12 MB +/- 17 B).
	mixKV = sizeMix{"kv3.12MB±17B", func(rng *rand.Rand) int64 { return 3_120_000 - 17 + rng.Int64N(35) }}
	// Mixed object sizes, uniform in [64 KiB, 16 MiB].
	mixWide = sizeMix{"mix64KiB-16MiB", func(rng *rand.Rand) int64 { return 64<<10 + rng.Int64N(16<<20-64<<10+1) }}
)

func fixed(n int64) sizeMix {
	return sizeMix{fmt.Sprintf("%dKiB", n>>10), func(*rand.Rand) int64 { return n }}
}

const benchCapacity = 4 << 30 // a 4 GiB virtual allocator: the allocator alone needs no memory

// pairTimer records the time of batches of alloc+free pairs so the benchmark can report a
// median and a p99 per pair next to the mean ns/op (a mean hides GC pauses and outliers).
type pairTimer struct {
	batch   int
	n       int
	start   time.Time
	samples []float64 // ns per pair of each batch
}

func newPairTimer() *pairTimer { return &pairTimer{batch: 256, start: time.Now()} }

func (p *pairTimer) tick() {
	p.n++
	if p.n == p.batch {
		now := time.Now()
		p.samples = append(p.samples, float64(now.Sub(p.start).Nanoseconds())/float64(p.batch))
		p.n, p.start = 0, now
	}
}

func (p *pairTimer) report(b *testing.B) (median float64) {
	if len(p.samples) == 0 {
		return 0
	}
	slices.Sort(p.samples)
	median = p.samples[len(p.samples)/2]
	b.ReportMetric(median, "ns/pair-p50")
	b.ReportMetric(p.samples[len(p.samples)*99/100], "ns/pair-p99")
	return median
}

// populate fills a to about half its capacity with mixed sizes (1 KiB-16 MiB) and frees a
// random third of them, so benchmarks run against a realistic, fragmented population.
func populate(rng *rand.Rand, alloc func(int64) bool, free func(i int), live func() int, capacity int64) {
	var used int64
	for used < capacity/2 {
		sz := 1<<10 + rng.Int64N(16<<20)
		if !alloc(sz) {
			break
		}
		used += sz
	}
	for range live() / 3 {
		free(rng.IntN(live()))
	}
	for used = 0; used < capacity/6; {
		sz := 1<<10 + rng.Int64N(16<<20)
		if !alloc(sz) {
			break
		}
		used += sz
	}
}

// workingSet is the number of objects of the benchmark's size mix that the timed loop
// cycles through, on top of the background population.
const workingSet = 32

// BenchmarkAllocFree measures one allocate+free pair: the free of a random object of a
// working set of 32, then the allocation of its replacement, drawn from the sub-benchmark's
// sizes. Beneath it the allocator holds a background population of mixed sizes
// (1 KiB-16 MiB, ~50% of 4 GiB, with holes: see populate), so searches run against a
// realistic, fragmented free list, not an empty one. Target: <= 150 ns median per pair
// ("ns/pair-p50"). The baseline is the Go heap doing the same (make of the same sizes, the
// GC freeing them), in the same run.
func BenchmarkAllocFree(b *testing.B) {
	for _, mix := range []sizeMix{fixed(64 << 10), fixed(2 << 20), fixed(16 << 20), mixWide, mixKV} {
		b.Run("allocator/"+mix.name, func(b *testing.B) {
			rng := rand.New(rand.NewPCG(1, 2))
			a := newAllocator(benchCapacity, DefaultAlignment)
			var live []allocation
			populate(rng,
				func(sz int64) bool {
					al, ok := a.alloc(sz)
					if ok {
						live = append(live, al)
					}
					return ok
				},
				func(i int) {
					_ = a.free(live[i])
					live[i] = live[len(live)-1]
					live = live[:len(live)-1]
				},
				func() int { return len(live) }, benchCapacity)
			sizes, idx := benchDraws(rng, mix, workingSet)
			ws := make([]allocation, workingSet)
			for i := range ws {
				ws[i], _ = a.alloc(sizes[i])
			}
			fill := float64(a.used) / benchCapacity
			b.ReportAllocs()
			b.ResetTimer()
			pt := newPairTimer()
			for i := 0; b.Loop(); i++ {
				j := idx[i&(len(idx)-1)]
				if err := a.free(ws[j]); err != nil {
					b.Fatal(err)
				}
				al, ok := a.alloc(sizes[i&(len(sizes)-1)])
				if !ok {
					b.Fatalf("allocator full at %d used", a.used)
				}
				ws[j] = al
				pt.tick()
			}
			b.StopTimer()
			pt.report(b)
			b.ReportMetric(fill, "fill")
		})
		b.Run("arena/"+mix.name, func(b *testing.B) {
			ar, err := NewArena(Options{Size: benchCapacity, HugePages: HugePagesOff})
			if err != nil {
				b.Fatal(err)
			}
			rng := rand.New(rand.NewPCG(1, 2))
			var live []*Handle
			populate(rng,
				func(sz int64) bool {
					h, err := ar.Alloc(sz)
					if err == nil {
						live = append(live, h)
					}
					return err == nil
				},
				func(i int) {
					_ = live[i].Release()
					live[i] = live[len(live)-1]
					live = live[:len(live)-1]
				},
				func() int { return len(live) }, benchCapacity)
			sizes, idx := benchDraws(rng, mix, workingSet)
			ws := make([]*Handle, workingSet)
			for i := range ws {
				if ws[i], err = ar.Alloc(sizes[i]); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportAllocs()
			b.ResetTimer()
			pt := newPairTimer()
			for i := 0; b.Loop(); i++ {
				j := idx[i&(len(idx)-1)]
				if err := ws[j].Release(); err != nil {
					b.Fatal(err)
				}
				h, err := ar.Alloc(sizes[i&(len(sizes)-1)])
				if err != nil {
					b.Fatal(err)
				}
				ws[j] = h
				pt.tick()
			}
			b.StopTimer()
			pt.report(b)
			for _, h := range append(live, ws...) {
				_ = h.Release()
			}
			if err := ar.Close(); err != nil {
				b.Fatal(err)
			}
		})
		b.Run("baseline-goheap/"+mix.name, func(b *testing.B) {
			rng := rand.New(rand.NewPCG(1, 2))
			sizes, idx := benchDraws(rng, mix, workingSet)
			ws := make([][]byte, workingSet)
			b.ReportAllocs()
			b.ResetTimer()
			pt := newPairTimer()
			for i := 0; b.Loop(); i++ {
				ws[idx[i&(len(idx)-1)]] = make([]byte, sizes[i&(len(sizes)-1)])
				pt.tick()
			}
			b.StopTimer()
			pt.report(b)
			Sink = ws
		})
	}
}

// benchDraws precomputes 4096 sizes and 4096 indexes in [0, n) so the timed loop draws no
// random numbers.
func benchDraws(rng *rand.Rand, mix sizeMix, n int) (sizes []int64, idx []int) {
	sizes, idx = make([]int64, 4096), make([]int, 4096)
	for i := range sizes {
		sizes[i] = mix.draw(rng)
		idx[i] = rng.IntN(n)
	}
	return sizes, idx
}

// utilisation runs Mooncake's allocator_bench experiment on a 4 GiB virtual allocator:
// allocate objects of the mix until the first failure (the fill), then keep allocating,
// evicting one random live object at each failure and retrying, for churn allocations.
// It returns the utilisation (requested bytes / capacity) at the first failure and the
// mean and minimum utilisation over every failure of the churn phase.
func utilisation(mix sizeMix, scan, quantumBits int, seed uint64, churn int) (first, mean, minU float64) {
	rng := rand.New(rand.NewPCG(seed, 99))
	a := newAllocator(benchCapacity, DefaultAlignment)
	a.scan, a.quantumBits = scan, quantumBits
	type obj struct {
		al  allocation
		req int64
	}
	var live []obj
	var requested int64
	for {
		sz := mix.draw(rng)
		al, ok := a.alloc(sz)
		if !ok {
			break
		}
		live = append(live, obj{al, sz})
		requested += sz
	}
	first = float64(requested) / benchCapacity
	var sum float64
	var fails int
	minU = 1
	for range churn {
		sz := mix.draw(rng)
		for {
			al, ok := a.alloc(sz)
			if ok {
				live = append(live, obj{al, sz})
				requested += sz
				break
			}
			u := float64(requested) / benchCapacity
			sum += u
			fails++
			minU = min(minU, u)
			i := rng.IntN(len(live))
			_ = a.free(live[i].al)
			requested -= live[i].req
			live[i] = live[len(live)-1]
			live = live[:len(live)-1]
		}
	}
	return first, sum / float64(max(fails, 1)), minU
}

// BenchmarkUtilisation reports the utilisation until the first failed allocation (metric
// "util", target >= 0.97) for the KV-cache mix and the wide mix, and, after 20,000 churn
// allocations with random eviction, the mean and minimum utilisation at failures
// ("util-churn", "util-churn-min"). The baseline is the same allocator with the good-fit
// search and the size quantum off (plain TLSF, the search of Mooncake's OffsetAllocator),
// same seeds, same run; the two middle variants show what each change buys.
func BenchmarkUtilisation(b *testing.B) {
	for _, mix := range []sizeMix{mixKV, mixWide} {
		for _, v := range []struct {
			name              string
			scan, quantumBits int
		}{
			{"default", defaultGoodFitScan, defaultQuantumBits},
			{"goodfit-only", defaultGoodFitScan, 0},
			{"quantum-only", 0, defaultQuantumBits},
			{"baseline-tlsf", 0, 0},
		} {
			b.Run(mix.name+"/"+v.name, func(b *testing.B) {
				var first, mean, minU float64
				var n int
				minU = 1
				for i := 0; b.Loop(); i++ {
					f, m, mn := utilisation(mix, v.scan, v.quantumBits, uint64(i), 20_000)
					first += f
					mean += m
					minU = min(minU, mn)
					n++
				}
				b.ReportMetric(first/float64(n), "util")
				b.ReportMetric(mean/float64(n), "util-churn")
				b.ReportMetric(minU, "util-churn-min")
			})
		}
	}
}

// BenchmarkArenaParallel is BenchmarkAllocFree's arena case with every P allocating and
// releasing at once (b.RunParallel): the cost of sharing the arena's one mutex. Each
// goroutine cycles its own working set of 32 objects of the 64 KiB-16 MiB mix.
func BenchmarkArenaParallel(b *testing.B) {
	ar, err := NewArena(Options{Size: benchCapacity, HugePages: HugePagesOff})
	if err != nil {
		b.Fatal(err)
	}
	var seed atomic.Uint64
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		rng := rand.New(rand.NewPCG(seed.Add(1), 3))
		sizes, idx := benchDraws(rng, mixWide, workingSet)
		ws := make([]*Handle, workingSet)
		for i := 0; pb.Next(); i++ {
			j := idx[i&(len(idx)-1)]
			if ws[j] != nil {
				if err := ws[j].Release(); err != nil {
					b.Error(err)
					return
				}
			}
			h, err := ar.Alloc(sizes[i&(len(sizes)-1)])
			if err != nil {
				b.Error(err)
				return
			}
			ws[j] = h
		}
		for _, h := range ws {
			if h != nil {
				_ = h.Release()
			}
		}
	})
	if err := ar.Close(); err != nil {
		b.Fatal(err)
	}
}
