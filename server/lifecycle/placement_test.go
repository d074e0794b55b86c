package lifecycle

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/mooncake-go/mooncake/internal/base"
)

func TestPlace(t *testing.T) {
	ws := []PlacementCandidate{
		{ID: "a", Capacity: 100, Free: 100},
		{ID: "b", Capacity: 100, Free: 50},
		{ID: "c", Capacity: 1000, Free: 0},
	}
	ok := func(n int, size int64, pref base.WorkerID) []base.WorkerID {
		t.Helper()
		got, err := Place(append([]PlacementCandidate(nil), ws...), n, size, pref, rand.New(rand.NewPCG(1, 2)))
		if err != nil {
			t.Fatalf("Place(%d, %d, %q): %v", n, size, pref, err)
		}
		if len(got) != n {
			t.Fatalf("Place(%d, %d, %q) = %v: want %d workers", n, size, pref, got, n)
		}
		seen := map[base.WorkerID]bool{}
		for _, id := range got {
			if seen[id] {
				t.Fatalf("Place(%d, %d, %q) = %v: duplicate worker", n, size, pref, got)
			}
			seen[id] = true
		}
		return got
	}
	bad := func(n int, size int64, target error, msg string) {
		t.Helper()
		_, err := Place(append([]PlacementCandidate(nil), ws...), n, size, "", rand.New(rand.NewPCG(1, 2)))
		if !errors.Is(err, target) || !strings.Contains(err.Error(), msg) {
			t.Fatalf("Place(%d, %d) err = %v, want %v containing %q", n, size, err, target, msg)
		}
	}
	ok(1, 10, "")
	ok(3, 10, "")
	if got := ok(2, 10, "c"); got[0] != "c" {
		t.Fatalf("preferred worker not first: %v", got)
	}
	if got := ok(1, 10, "b"); got[0] != "b" {
		t.Fatalf("preferred worker not first: %v", got)
	}
	// A value only c can hold goes to c whatever the preference.
	if got := ok(1, 500, "a"); got[0] != "c" {
		t.Fatalf("big value on %v", got)
	}
	ok(2, 10, "unknown") // a preference for an unknown worker is a hint, not an error
	bad(4, 10, base.ErrNoSpace, "asked for 4 replicas, only 3 workers")
	bad(2, 500, base.ErrNoSpace, "asked for 2 replicas, only 1 workers")
	bad(1, 5000, base.ErrNoSpace, "larger than every worker segment")
	bad(0, 10, base.ErrInvalidParams, "at least 1")
	bad(1, -1, base.ErrInvalidParams, "negative")
	if _, err := Place(nil, 1, 1, "", rand.New(rand.NewPCG(1, 2))); !errors.Is(err, base.ErrUnavailable) {
		t.Fatalf("no workers: %v", err)
	}
}

// TestPlaceWeighted checks the draw against a dumb expectation: over many draws the share of
// each worker follows max(Free, Capacity/16).
func TestPlaceWeighted(t *testing.T) {
	ws := []PlacementCandidate{
		{ID: "empty", Capacity: 1600, Free: 1600},
		{ID: "half", Capacity: 1600, Free: 800},
		{ID: "full", Capacity: 1600, Free: -5}, // over-reserved: floor weight 100
	}
	rng := rand.New(rand.NewPCG(7, 7))
	counts := map[base.WorkerID]int{}
	const draws = 25000
	for range draws {
		got, err := Place(append([]PlacementCandidate(nil), ws...), 1, 1, "", rng)
		if err != nil {
			t.Fatal(err)
		}
		counts[got[0]]++
	}
	want := map[base.WorkerID]float64{"empty": 1600.0 / 2500, "half": 800.0 / 2500, "full": 100.0 / 2500}
	for id, p := range want {
		got := float64(counts[id]) / draws
		if got < p-0.02 || got > p+0.02 {
			t.Fatalf("%s chosen %.3f of the time, want about %.3f (counts %v)", id, got, p, counts)
		}
	}
}

func newTestRand() *rand.Rand { return rand.New(rand.NewPCG(11, 13)) }

// BenchmarkPlace measures one placement of 2 replicas among 64 workers.
func BenchmarkPlace(b *testing.B) {
	ws := make([]PlacementCandidate, 64)
	for i := range ws {
		ws[i] = PlacementCandidate{ID: base.WorkerID(fmt.Sprintf("w%d", i)), Capacity: 1 << 30, Free: int64(i) << 24}
	}
	rng := newTestRand()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Place(ws, 2, 1<<20, "", rng); err != nil {
			b.Fatal(err)
		}
	}
}
