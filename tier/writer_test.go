package tier_test

import (
	"errors"
	"math/rand/v2"
	"sync"
	"testing"

	"github.com/mooncake-go/mooncake/internal/base"
	"github.com/mooncake-go/mooncake/tier"
)

// TestWriterLanded: ranges reported filled in any order, from several goroutines, are hashed
// as they land, and Commit takes that checksum without a second pass over the bytes (shown
// by changing a byte after every range landed: Commit still sees the bytes as they were).
// Overlapping or missing reports fall back to one pass at Commit.
func TestWriterLanded(t *testing.T) {
	e := open(t, tier.Options{Arena: newArena(t, 8<<20)})
	const size, stripe = 1 << 20, 128 << 10
	data := pattern("k", 1, size)
	sum := base.Checksum(data)

	land := func(w *tier.Writer, ranges [][2]int64) {
		var wg sync.WaitGroup
		for _, r := range ranges {
			wg.Add(1)
			go func() {
				defer wg.Done()
				copy(w.Bytes()[r[0]:r[0]+r[1]], data[r[0]:])
				w.Landed(r[0], r[1])
			}()
		}
		wg.Wait()
	}
	stripes := func() [][2]int64 {
		var rs [][2]int64
		for off := int64(0); off < size; off += stripe {
			rs = append(rs, [2]int64{off, stripe})
		}
		rand.Shuffle(len(rs), func(i, j int) { rs[i], rs[j] = rs[j], rs[i] })
		return rs
	}

	// Every byte reported: the streamed checksum is the object's.
	w, err := e.Put("k", 1, size, tier.PutOptions{})
	if err != nil {
		t.Fatal(err)
	}
	land(w, stripes())
	w.Bytes()[7] ^= 0xff // after landing: a second pass would see it
	if err := w.Commit(sum); err != nil {
		t.Fatalf("commit after every stripe landed: %v", err)
	}
	r, err := e.Get("k", 1)
	if err != nil {
		t.Fatal(err)
	}
	if got := r.Meta().Checksum; got != sum {
		t.Fatalf("meta checksum %#x, want %#x", got, sum)
	}
	r.Release()

	// A wrong checksum is refused as before.
	w, err = e.Put("k2", 1, size, tier.PutOptions{})
	if err != nil {
		t.Fatal(err)
	}
	land(w, stripes())
	if err := w.Commit(sum ^ 1); !errors.Is(err, base.ErrCorruption) {
		t.Fatalf("wrong checksum: %v", err)
	}

	// Overlapping reports, and a missing one: Commit hashes the bytes as they are now.
	for name, ranges := range map[string][][2]int64{
		"overlap": {{0, size / 2}, {size/2 - 10, size/2 + 10}},
		"missing": {{0, size / 2}},
		"twice":   {{0, size / 2}, {0, size / 2}, {size / 2, size / 2}},
	} {
		w, err := e.Put("k3", 1, size, tier.PutOptions{})
		if err != nil {
			t.Fatal(err)
		}
		copy(w.Bytes(), data)
		land(w, ranges)
		w.Bytes()[7] ^= 0xff
		if err := w.Commit(sum); !errors.Is(err, base.ErrCorruption) {
			t.Fatalf("%s: the one pass at Commit should see the changed byte: %v", name, err)
		}
	}
}
