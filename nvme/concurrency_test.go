package nvme

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/mooncake-go/mooncake/internal/base"
)

// TestConcurrent runs writers, readers, deletes and GC at once (for -race), then checks the
// store against a model of what each writer last did to its own keys: under each sync
// policy with dead records punched out (a read must never see a punched range), and with GC
// copying.
func TestConcurrent(t *testing.T) {
	for _, c := range []struct {
		sp    SyncPolicy
		punch bool
	}{{SyncGroup, true}, {SyncAlways, true}, {SyncNone, true}, {SyncGroup, false}} {
		sp := c.sp
		t.Run(fmt.Sprintf("%s/punch=%v", sp, c.punch), func(t *testing.T) {
			dir := t.TempDir()
			o := testOptions(dir)
			o.Sync = sp
			o.DisableHolePunch = !c.punch
			o.GCLiveRatio = 0.7
			s := mustOpen(t, o)
			const writers, ops = 3, 60
			models := make([]map[string][]byte, writers)
			var wg sync.WaitGroup
			var stop atomic.Bool
			errc := make(chan error, writers+2)
			for w := 0; w < writers; w++ {
				models[w] = map[string][]byte{}
				wg.Add(1)
				go func(w int) {
					defer wg.Done()
					r := rand.New(rand.NewPCG(uint64(w), 9))
					m := models[w]
					for i := 0; i < ops; i++ {
						key := fmt.Sprintf("w%d-%d", w, r.IntN(15))
						if r.IntN(4) == 0 {
							err := s.Delete(key, 0)
							if err != nil && !errors.Is(err, base.ErrObjectNotFound) {
								errc <- err
								return
							}
							delete(m, key)
							continue
						}
						data := payload(uint64(w*1000+i), []int{10, 5000, 80 << 10, 200 << 10}[r.IntN(4)], r.IntN(2) == 0)
						if err := s.Put(key, base.Version(i+1), data, r.IntN(2) == 0); err != nil {
							errc <- err
							return
						}
						m[key] = data
					}
				}(w)
			}
			var bg sync.WaitGroup
			bg.Add(2)
			go func() { // GC while writing
				defer bg.Done()
				for !stop.Load() {
					if _, err := s.GC(); err != nil {
						errc <- err
						return
					}
				}
			}()
			go func() { // readers: any answer but corruption is fine while keys change
				defer bg.Done()
				for !stop.Load() {
					_ = s.Scan(func(m base.ObjectMeta) error {
						buf := make([]byte, m.Size)
						if err := s.ReadInto(m.Key, m.Version, buf); errors.Is(err, base.ErrCorruption) {
							errc <- err
						}
						return nil
					})
				}
			}()
			wg.Wait()
			stop.Store(true)
			bg.Wait()
			close(errc)
			for err := range errc {
				t.Fatal(err)
			}
			verify := func(s *Store) {
				t.Helper()
				n := 0
				for _, m := range models {
					for k, v := range m {
						mustRead(t, s, k, 0, v)
						n++
					}
				}
				if got := s.Metrics().Objects; got != int64(n) {
					t.Fatalf("Objects = %d, want %d", got, n)
				}
				checkAccounting(t, s)
			}
			verify(s)
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			s = mustOpen(t, o)
			defer s.Close()
			verify(s)
		})
	}
}

// TestGCRacesWithPut: a Put of the key GC is copying wins; GC must not bring the old bytes back.
func TestGCRacesWithPut(t *testing.T) {
	s := mustOpen(t, copyGCOptions(t.TempDir()))
	defer s.Close()
	old := payload(1, 100<<10, false)
	if err := s.Put("x", 1, old, true); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 12; i++ { // fill and seal the extent, then make it mostly dead
		if err := s.Put(fmt.Sprint("f", i), 1, payload(uint64(i+2), 100<<10, false), false); err != nil {
			t.Fatal(err)
		}
	}
	for i := 0; i < 12; i++ {
		if err := s.Delete(fmt.Sprint("f", i), 0); err != nil {
			t.Fatal(err)
		}
	}
	newer := payload(99, 150<<10, false)
	var fired atomic.Bool
	s.testHookBeforeIndexCommit = func(key string) {
		if key == "x" && fired.CompareAndSwap(false, true) {
			// GC has copied x and is about to re-point the index: a client overwrites x now.
			if err := s.Put("x", 2, newer, true); err != nil {
				t.Errorf("racing Put: %v", err)
			}
		}
	}
	st, err := s.GC()
	if err != nil {
		t.Fatal(err)
	}
	if !fired.Load() || st.ExtentsRemoved == 0 {
		t.Fatalf("GC did not copy x (hook fired %v, %+v)", fired.Load(), st)
	}
	mustRead(t, s, "x", 2, newer)
	checkAccounting(t, s)
	if m := s.Metrics(); m.Objects != 1 {
		t.Fatalf("Objects = %d, want 1", m.Objects)
	}
}

// checkAccounting recomputes objects and live bytes per extent from the index and compares
// them with the store's counters (a "dumb" model of the accounting).
func checkAccounting(t *testing.T, s *Store) {
	t.Helper()
	live := map[uint64]int64{}
	var objects, inline int64
	it, err := s.db.NewIter(nil)
	if err != nil {
		t.Fatal(err)
	}
	for ok := it.First(); ok; ok = it.Next() {
		key, err := decodeIndexKey(it.Key())
		if err != nil {
			continue
		}
		ent, err := decodeIndexEntry(it.Value())
		if err != nil {
			t.Fatalf("index entry of %q: %v", key, err)
		}
		if ent.isInline() {
			inline += inlineCost(key, ent)
		}
		if ent.flags&flagQuarantined != 0 {
			continue
		}
		objects++
		if !ent.isInline() {
			live[ent.extent] += recordLenOf(key, ent)
		}
	}
	if err := it.Close(); err != nil {
		t.Fatal(err)
	}
	if got := s.m.objects.Load(); got != objects {
		t.Errorf("objects counter %d, index has %d", got, objects)
	}
	if got := s.m.inlineBytes.Load(); got != inline {
		t.Errorf("inline bytes counter %d, index has %d", got, inline)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	var total int64
	for id, e := range s.mu.extents {
		if e.live.Load() != live[id] {
			t.Errorf("extent %d: live %d, index says %d", id, e.live.Load(), live[id])
		}
		total += live[id]
		delete(live, id)
	}
	for id, n := range live {
		t.Errorf("index points at %d bytes in extent %d, which the store does not have", n, id)
	}
	if got := s.m.extentLive.Load(); got != total {
		t.Errorf("extent live counter %d, index has %d", got, total)
	}
}
