package policy

import (
	"testing"

	"github.com/mooncake-go/mooncake/internal/base"
)

// BenchmarkEvictWhileSpilling is what a writer waiting for room pays each time it asks the
// policy again while spills are in flight (the engine's allocate, under its lock), and what the
// evictor pays each time a Put kicks it: with 100,000 objects in DRAM it must not walk them
// (it did, to count objects in use nobody read, and starved the worker's heartbeat:
// docs/benchmarks.md "Side by side on a quiet 16-core machine").
//
//	go test -run '^$' -bench EvictWhileSpilling ./tier/policy
//
// On the 2-core VM: pressure 17 ns an ask, background 5 ns; with the walk put back, pressure
// took 186,107 ns, and a thousand waiting writers each asking after every spill hold the lock
// for most of a second each round.
func BenchmarkEvictWhileSpilling(b *testing.B) {
	const n = 100_000
	p, err := New(Config{Capacity: n * 64 << 10, HasLower: true})
	if err != nil {
		b.Fatal(err)
	}
	for i := range n {
		p.AddDRAM(Object{ID: ID(i + 1), Size: 64 << 10, Persistence: base.PersistenceSpill})
	}
	if plan := p.Evict(n*64<<10*15/100, 0); len(plan.Victims) == 0 { // down to the low watermark: spilling
		b.Fatal("nothing to spill")
	}
	b.Run("pressure", func(b *testing.B) {
		for b.Loop() {
			if plan := p.Evict(64<<10, 0); plan.NoSpace.Reason != ReasonSpilling {
				b.Fatal(plan.NoSpace)
			}
		}
	})
	b.Run("background", func(b *testing.B) {
		for b.Loop() {
			if plan := p.EvictToLow(0); len(plan.Victims) != 0 {
				b.Fatal("victims")
			}
		}
	})
}
