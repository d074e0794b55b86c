package dram

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"runtime"
	"sync"
	"testing"
)

// fill writes a pattern that names its owner into b.
func fill(b []byte, tag byte) {
	for i := range b {
		b[i] = tag ^ byte(i)
	}
}

func checkFill(b []byte, tag byte) error {
	for i := range b {
		if b[i] != tag^byte(i) {
			return fmt.Errorf("byte %d is %#x, want %#x (tag %#x): range reused under its holder", i, b[i], tag^byte(i), tag)
		}
	}
	return nil
}

// TestConcurrentAllocRetainRelease has goroutines allocate, fill, share, retain and release
// handles concurrently. A handle's bytes must keep their pattern as long as anyone holds a
// reference, whoever allocated it and whoever released first; the race detector checks the
// handles' refcounts and the arena's lock.
func TestConcurrentAllocRetainRelease(t *testing.T) { sharings(t, testConcurrentAllocRetainRelease) }

func testConcurrentAllocRetainRelease(t *testing.T, memfd bool) {
	a := newTestArena(t, Options{Size: 4 << 20, HugePages: HugePagesOff, Shared: memfd})
	const workers = 4
	const opsPerWorker = 3000
	shared := make(chan *Handle, 64) // each handle sent carries one reference, owned by the receiver
	type tagged struct {
		h   *Handle
		tag byte
	}
	var wg sync.WaitGroup
	errc := make(chan error, workers)
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(w), 7))
			var mine []tagged
			for op := range opsPerWorker {
				switch r := rng.IntN(10); {
				case r < 4:
					h, err := a.Alloc(1 + rng.Int64N(64<<10))
					if err != nil {
						continue // full: others will release
					}
					tag := byte(rng.Uint32())
					fill(h.Bytes(), tag)
					// The tag travels in the first byte of the pattern: tag^0.
					mine = append(mine, tagged{h, tag})
				case r < 6 && len(mine) > 0:
					// Share: Retain for the receiver, who owns that reference.
					th := mine[rng.IntN(len(mine))]
					if err := th.h.Retain(); err != nil {
						errc <- err
						return
					}
					select {
					case shared <- th.h:
					default:
						if err := th.h.Release(); err != nil {
							errc <- err
							return
						}
					}
				case r < 8:
					select {
					case h := <-shared:
						b := h.Bytes()
						if err := checkFill(b, b[0]); err != nil {
							errc <- fmt.Errorf("worker %d op %d: %w", w, op, err)
							return
						}
						if err := h.Release(); err != nil {
							errc <- err
							return
						}
					default:
					}
				default:
					if len(mine) == 0 {
						continue
					}
					i := rng.IntN(len(mine))
					th := mine[i]
					mine[i] = mine[len(mine)-1]
					mine = mine[:len(mine)-1]
					if err := checkFill(th.h.Bytes(), th.tag); err != nil {
						errc <- fmt.Errorf("worker %d op %d: %w", w, op, err)
						return
					}
					if err := th.h.Release(); err != nil {
						errc <- err
						return
					}
				}
			}
			for _, th := range mine {
				if err := checkFill(th.h.Bytes(), th.tag); err != nil {
					errc <- err
					return
				}
				if err := th.h.Release(); err != nil {
					errc <- err
					return
				}
			}
		}()
	}
	// A metrics reader takes snapshots meanwhile: each must be self-consistent.
	stop := make(chan struct{})
	statsDone := make(chan error, 1)
	go func() {
		for {
			s := a.Stats()
			if s.Used+s.Free != s.Capacity || s.LiveAllocs < 0 || s.Requested > s.Used || s.LargestFree > s.Free {
				statsDone <- fmt.Errorf("inconsistent snapshot %+v", s)
				return
			}
			select {
			case <-stop:
				statsDone <- nil
				return
			default:
				runtime.Gosched() // sample, don't hog the arena's lock
			}
		}
	}()
	wg.Wait()
	close(stop)
	if err := <-statsDone; err != nil {
		t.Fatal(err)
	}
	close(errc)
	for err := range errc {
		t.Fatal(err)
	}
	close(shared)
	for h := range shared {
		if err := h.Release(); err != nil {
			t.Fatal(err)
		}
	}
	s := a.Stats()
	if s.LiveAllocs != 0 || s.Used != 0 || s.FreeBlocks != 1 {
		t.Fatalf("after all releases: %+v", s)
	}
}

// TestReaderHoldsRange: a reader Retains a handle, the owner Releases its reference and
// keeps allocating (pressing on the freed space), and the reader's bytes must not change
// until it releases; only then is the range handed out again.
func TestReaderHoldsRange(t *testing.T) { sharings(t, testReaderHoldsRange) }

func testReaderHoldsRange(t *testing.T, shared bool) {
	a := newTestArena(t, Options{Size: 1 << 20, HugePages: HugePagesOff, Shared: shared})
	const size = 256 << 10
	h, err := a.Alloc(size)
	if err != nil {
		t.Fatal(err)
	}
	fill(h.Bytes(), 0xA5)
	if err := h.Retain(); err != nil { // the reader's reference
		t.Fatal(err)
	}
	readerHas := make(chan struct{})
	ownerDone := make(chan struct{})
	var readerErr error
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { // the reader
		defer wg.Done()
		b := h.Bytes()
		close(readerHas)
		<-ownerDone
		readerErr = checkFill(b, 0xA5)
		if err := h.Release(); err != nil && readerErr == nil {
			readerErr = err
		}
	}()
	<-readerHas
	// The owner drops its reference, then fills the whole rest of the arena with other
	// patterns: if the range had been freed, one of these would land on it.
	if err := h.Release(); err != nil {
		t.Fatal(err)
	}
	var others []*Handle
	for {
		o, err := a.Alloc(16 << 10)
		if err != nil {
			break
		}
		if o.Offset() < h.Offset()+size && h.Offset() < o.Offset()+o.Len() {
			t.Fatalf("range [%d,%d) handed out while a reader holds it", o.Offset(), o.Offset()+o.Len())
		}
		fill(o.Bytes(), 0x3C)
		others = append(others, o)
	}
	close(ownerDone)
	wg.Wait()
	if readerErr != nil {
		t.Fatal(readerErr)
	}
	// Now the range is free and reusable.
	again, err := a.Alloc(size)
	if err != nil || again.Offset() != h.Offset() {
		t.Fatalf("range not reused after the last release: %v, offset %d want %d", err, again.Offset(), h.Offset())
	}
	if !bytes.Equal(again.Bytes()[:4], []byte{0xA5, 0xA4, 0xA7, 0xA6}) {
		t.Fatal("test fill pattern changed unexpectedly")
	}
	others = append(others, again)
	for _, o := range others {
		if err := o.Release(); err != nil {
			t.Fatal(err)
		}
	}
}
