package dram

import (
	"math/rand/v2"
	"testing"
)

// Benchmarks of a shared (memfd) arena against an anonymous one, for the choice of
// Options.Shared as a worker's default. Each runs with HugePagesAuto (what a worker maps:
// on a machine without reserved huge pages, THP for anon when
// transparent_hugepage/enabled allows, shmem THP for shared when shmem_enabled allows) and
// with HugePagesOff (4 KiB pages for both: the effect of sharing alone). The mode each got
// is logged (go test -v).

const (
	copyArenaSize = 256 << 20 // the working set: far beyond the last-level cache
	copySize      = 1 << 20
)

type arenaBenchCase struct {
	name   string
	shared bool
	hp     HugePages
}

var arenaBenchCases = []arenaBenchCase{
	{"anon", false, HugePagesAuto},
	{"shared", true, HugePagesAuto},
	{"anon-4k", false, HugePagesOff},
	{"shared-4k", true, HugePagesOff},
}

// BenchmarkArenaCopy copies 1 MiB out of a cold arena: a 256 MiB working set, every page
// touched beforehand (no faults are measured), at random 64-byte aligned offsets, into a Go
// buffer: the copy a same-host client does, or a worker serving from DRAM. The "-peer" cases
// copy from a second, read-only mapping of the shared arena's memfd opened through
// /proc/self/fd, as a client maps it (its page tables warmed by one pass first).
func BenchmarkArenaCopy(b *testing.B) {
	cases := arenaBenchCases
	cases = append(cases[:len(cases):len(cases)], arenaBenchCase{"shared-peer", true, HugePagesAuto}, arenaBenchCase{"shared-4k-peer", true, HugePagesOff})
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			a, err := NewArena(Options{Size: copyArenaSize, HugePages: c.hp, Shared: c.shared})
			if err != nil {
				b.Fatal(err)
			}
			defer a.Close()
			h, err := a.Alloc(a.Capacity())
			if err != nil {
				b.Fatal(err)
			}
			defer h.Release()
			src := h.Bytes()
			fill(src, 0x42)
			if len(c.name) > 5 && c.name[len(c.name)-5:] == "-peer" {
				si, _ := a.Share()
				src = peerMap(b, si)
				var sum byte
				for off := 0; off < len(src); off += 4096 {
					sum += src[off]
				}
				Sink = sum
			}
			if b.N == 1 { // the first of the runs: log once
				r, err := a.Residency()
				b.Logf("mode %v, residency %+v %v", a.Mode(), r, err)
			}
			dst := make([]byte, copySize)
			rng := rand.New(rand.NewPCG(1, 2))
			const slots = (copyArenaSize - copySize) / DefaultAlignment
			b.SetBytes(copySize)
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				off := rng.Int64N(slots) * DefaultAlignment
				copy(dst, src[off:off+copySize])
			}
			b.StopTimer()
			Sink = dst[0]
		})
	}
}

// BenchmarkArenaFirstTouch writes a fresh (never touched) 1 MiB range of an arena per op:
// the page faults of the first put into each page (allocate and zero a page, map it). The
// "-warm" cases write ranges already touched once: the baseline of the same write without
// faults. The "shared-peer-read" cases copy 1 MiB out of a client's fresh read-only mapping
// of a populated shared arena: the faults a client takes the first time it reads a range
// (mapping existing pages, no zeroing), against its warm mapping. Arenas of 64 MiB are
// mapped and unmapped outside the timer as they are used up.
func BenchmarkArenaFirstTouch(b *testing.B) {
	const arenaSize = 64 << 20
	src := make([]byte, copySize)
	fill(src, 0x24)
	type tcase struct {
		arenaBenchCase
		warm, peer bool
	}
	var cases []tcase
	for _, c := range arenaBenchCases {
		cases = append(cases, tcase{c, false, false}, tcase{c, true, false})
	}
	for _, hp := range []HugePages{HugePagesAuto, HugePagesOff} {
		name := "shared-peer-read"
		if hp == HugePagesOff {
			name = "shared-4k-peer-read"
		}
		c := arenaBenchCase{name, true, hp}
		cases = append(cases, tcase{c, false, true}, tcase{c, true, true})
	}
	for _, c := range cases {
		name := c.name
		if c.warm {
			name += "-warm"
		}
		b.Run(name, func(b *testing.B) {
			var a *Arena
			var h *Handle
			var mem []byte // where the op writes, or reads from with peer
			var unmapPeer func()
			var next int64
			closeArena := func() {
				if unmapPeer != nil {
					unmapPeer()
					unmapPeer = nil
				}
				if a != nil {
					_ = h.Release()
					if err := a.Close(); err != nil {
						b.Fatal(err)
					}
					a = nil
				}
			}
			defer closeArena()
			dst := make([]byte, copySize)
			b.SetBytes(copySize)
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				if a == nil || next+copySize > a.Capacity() {
					b.StopTimer()
					if !c.warm || a == nil {
						closeArena()
						var err error
						if a, err = NewArena(Options{Size: arenaSize, HugePages: c.hp, Shared: c.shared}); err != nil {
							b.Fatal(err)
						}
						if h, err = a.Alloc(a.Capacity()); err != nil {
							b.Fatal(err)
						}
						mem = h.Bytes()
						if c.warm || c.peer {
							fill(mem, 1)
						}
						if c.peer {
							si, _ := a.Share()
							mem, unmapPeer = mapPeer(b, si)
							if c.warm {
								copy(dst, mem) // one read of every page
								for off := 0; off < len(mem); off += 4096 {
									dst[0] += mem[off]
								}
							}
						}
						if b.N == 1 {
							b.Logf("mode %v", a.Mode())
						}
					}
					next = 0
					b.StartTimer()
				}
				if c.peer {
					copy(dst, mem[next:next+copySize])
				} else {
					copy(mem[next:next+copySize], src)
				}
				next += copySize
			}
			b.StopTimer()
			Sink = dst[0]
		})
	}
}

// BenchmarkArenaPrefault measures what Options.Prefault costs at start: mapping (and
// unmapping) a 256 MiB arena with every page faulted in, against the same without
// pre-faulting (the baseline, "-lazy"). SetBytes makes the MB/s figure the rate at which
// start-up pre-faults the arena.
func BenchmarkArenaPrefault(b *testing.B) {
	const size = 256 << 20
	for _, c := range arenaBenchCases {
		for _, prefault := range []bool{true, false} {
			name := c.name + "-prefault"
			if !prefault {
				name = c.name + "-lazy"
			}
			b.Run(name, func(b *testing.B) {
				b.SetBytes(size)
				for range b.N {
					a, err := NewArena(Options{Size: size, HugePages: c.hp, Shared: c.shared, Prefault: prefault})
					if err != nil {
						b.Fatal(err)
					}
					if err := a.Close(); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}
