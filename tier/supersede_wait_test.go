package tier_test

import (
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mooncake-go/mooncake/internal/base"
	"github.com/mooncake-go/mooncake/tier"
	"github.com/mooncake-go/mooncake/tier/policy"
	"github.com/mooncake-go/mooncake/tier/tiertest"
)

// TestWaitForSupersededDecision: a Put that found nothing to evict waits for the master's
// drops only when superseded versions hold bytes whose release (with the free bytes) could
// make room, and while its wait has time left.
func TestWaitForSupersededDecision(t *testing.T) {
	f := func(reason policy.Reason, held, free, size int64, left time.Duration, want bool) {
		t.Helper()
		if got := tier.WaitForSuperseded(reason, held, free, size, left); got != want {
			t.Fatalf("WaitForSuperseded(%s, held %d, free %d, size %d, left %v) = %v, want %v", reason, held, free, size, left, got, want)
		}
	}
	f(policy.ReasonAllInUse, 100, 0, 100, time.Second, true)   // one drop makes room
	f(policy.ReasonAllInUse, 60, 40, 100, time.Second, true)   // a drop and the free bytes do
	f(policy.ReasonAllInUse, 60, 39, 100, time.Second, false)  // even every drop cannot
	f(policy.ReasonAllInUse, 0, 0, 100, time.Second, false)    // nothing is owed a drop
	f(policy.ReasonAllInUse, 100, 0, 100, 0, false)            // the wait is over
	f(policy.ReasonAllInUse, 100, 0, 100, -time.Second, false) // long over
	f(policy.ReasonAllPinned, 100, 0, 100, time.Second, false) // not what holds the bytes
	f(policy.ReasonEmpty, 100, 0, 100, time.Second, false)
}

// TestSupersededWait: superseded versions fill the arena; a Put that finds nothing to evict
// tells the worker (SupersededHeld) and waits for the drops instead of failing: a Remove of a
// superseded version (the master's drop) lets it allocate. Without anyone dropping, it fails
// after SupersededWait with a NoSpace that names the superseded bytes apart from readers and
// writers; with no wait it fails at once, saying the same. With a lower tier the old version
// may be on the lower tier only: the commit that keeps it needs DRAM for it and waits too.
func TestSupersededWait(t *testing.T) {
	const size = 256 << 10
	const arena = 4 * size
	for _, name := range []string{"dram", "lower-only"} {
		t.Run(name, func(t *testing.T) {
			var lower tier.Lower
			if name == "lower-only" {
				lower = tiertest.NewMemLower()
			}
			var held atomic.Int64 // the last SupersededHeld figure
			var calls atomic.Int64
			drop := make(chan struct{}, 16)
			e := open(t, tier.Options{Arena: newArena(t, arena), Lower: lower, KeepSuperseded: true,
				HighWatermark: 1, LowWatermark: 0.9, // no background eviction
				SupersededWait: time.Minute, SupersededFetchBytes: 2 * size,
				Events: tier.EventListener{SupersededHeld: func(n int64) {
					held.Store(n)
					calls.Add(1)
					select {
					case drop <- struct{}{}:
					default:
					}
				}}})
			// k at v1..v4: v1..v3 superseded, v4 current: the arena is full.
			for v := base.Version(1); v <= 4; v++ {
				// Pinned in DRAM, durable with a lower tier: the current version is not
				// evictable (or only its DRAM copy is).
				o := tier.PutOptions{HardPin: lower == nil}
				if lower != nil {
					o.Persistence = base.PersistenceDurable
				}
				mustPut(t, e, "k", v, size, o)
			}
			if m := e.Metrics(); m.Superseded.Bytes != 3*size {
				t.Fatalf("superseded %+v, want 3 versions", m.Superseded)
			}
			// Commits past SupersededFetchBytes told the worker.
			if calls.Load() < 2 || held.Load() != 3*size {
				t.Fatalf("SupersededHeld called %d times, last with %d bytes; want >= 2, %d", calls.Load(), held.Load(), 3*size)
			}
			// Make the arena hold only superseded versions and hard-pinned objects: nothing
			// can be evicted. With a lower tier k's current v4 is pushed to the lower tier
			// only, so the commit of v5 needs DRAM to keep it.
			if err := e.Remove("k", 1); err != nil {
				t.Fatal(err)
			}
			mustPut(t, e, "x", 1, size, tier.PutOptions{HardPin: true})
			wantWaits := int64(1)
			if lower != nil {
				mustPut(t, e, "y", 1, size, tier.PutOptions{HardPin: true}) // evicts v4's DRAM copy
				if info := e.List("k"); len(info) != 1 || info[0].Tier != base.TierNVMe {
					t.Fatalf("v4 not on the lower tier only: %+v", info)
				}
				wantWaits = 2 // the Put, then the commit keeping v4
			}
			for len(drop) > 0 {
				<-drop
			}

			// The master's drops of the superseded versions arrive once asked for, one per
			// request, as many as the waits need (the commit of v5 asks too: it is not
			// answered).
			stop := make(chan struct{})
			var dropped atomic.Int64
			go func() {
				for _, v := range []base.Version{2, 3}[:wantWaits] {
					select {
					case <-drop:
					case <-stop:
						return
					}
					if err := e.Remove("k", v); err != nil {
						t.Errorf("drop of v%d: %v", v, err)
					}
					dropped.Add(1)
				}
			}()
			before := e.Metrics().SupersededWaits
			mustPut(t, e, "k", 5, size, tier.PutOptions{})
			close(stop)
			if m := e.Metrics(); m.SupersededWaits != before+wantWaits || dropped.Load() != wantWaits {
				t.Fatalf("SupersededWaits %d, drops %d; want %d more waits, as many drops", m.SupersededWaits, dropped.Load(), wantWaits)
			}
			mustGet(t, e, "k", 5, size)
			mustGet(t, e, "k", 4, size) // kept until its drop
			if lower == nil {
				mustGet(t, e, "k", 3, size) // not dropped yet
			}

			// Nobody drops: the wait ends and the Put fails, naming what holds the bytes.
			e2 := open(t, tier.Options{Arena: newArena(t, arena), KeepSuperseded: true, SupersededWait: 20 * time.Millisecond,
				HighWatermark: 1, LowWatermark: 0.9})
			for v := base.Version(1); v <= 4; v++ {
				mustPut(t, e2, "k", v, size, tier.PutOptions{HardPin: true})
			}
			_, err := e2.Put("k", 5, size, tier.PutOptions{})
			if !errors.Is(err, base.ErrNoSpace) || !strings.Contains(err.Error(), "superseded versions awaiting the master's drop: 786432 bytes") ||
				!strings.Contains(err.Error(), "held by writers and readers of removed objects: 0 bytes") || !strings.Contains(err.Error(), "waited") {
				t.Fatalf("put with the arena full of superseded versions: %v", err)
			}
			// No wait: at once, saying the same.
			e3 := open(t, tier.Options{Arena: newArena(t, arena), KeepSuperseded: true, SupersededWait: -1,
				HighWatermark: 1, LowWatermark: 0.9})
			for v := base.Version(1); v <= 4; v++ {
				mustPut(t, e3, "k", v, size, tier.PutOptions{HardPin: true})
			}
			_, err = e3.Put("k", 5, size, tier.PutOptions{})
			if !errors.Is(err, base.ErrNoSpace) || !strings.Contains(err.Error(), "superseded versions awaiting the master's drop") ||
				strings.Contains(err.Error(), "waited") {
				t.Fatalf("put without a wait: %v", err)
			}
			if m := e3.Metrics(); m.SupersededWaits != 0 || m.NoSpaceAllInUse != 1 {
				t.Fatalf("no-wait metrics: waits %d, all in use %d", m.SupersededWaits, m.NoSpaceAllInUse)
			}
		})
	}
}
