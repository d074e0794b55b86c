package dram

import (
	"bytes"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/mooncake-go/mooncake/dram/internal/hugepage"
	"github.com/mooncake-go/mooncake/internal/testutil"
)

// populateArena makes a 16 MiB arena of plain pages (resident bytes are then exact) with
// background population in steps of 1 MiB through fn (nil: hugepage.Populate).
func populateArena(t *testing.T, shared bool, fn func([]byte) error, logger *slog.Logger) *Arena {
	t.Helper()
	return newTestArena(t, Options{Size: 16 << 20, HugePages: HugePagesOff, Shared: shared, Populate: true,
		populateStep: 1 << 20, populateFn: fn, Logger: logger})
}

// TestArenaPopulate: the populator faults in the whole arena, no more, and says so.
func TestArenaPopulate(t *testing.T) {
	sharings(t, func(t *testing.T, shared bool) {
		a := populateArena(t, shared, nil, nil)
		<-a.populator.done
		if a.Populated() != a.Capacity() || a.Stats().Populated != a.Capacity() {
			t.Fatalf("populated %d (stats %d) of %d", a.Populated(), a.Stats().Populated, a.Capacity())
		}
		r, err := a.Residency()
		if err != nil {
			t.Fatal(err)
		}
		if r.Resident != a.Capacity() {
			t.Fatalf("resident %d bytes after population, want the arena's %d", r.Resident, a.Capacity())
		}
	})
}

// TestArenaPopulateOff: without Populate nothing is faulted in and Populated is 0; with
// Prefault everything is, before NewArena returns.
func TestArenaPopulateOff(t *testing.T) {
	sharings(t, func(t *testing.T, shared bool) {
		a := newTestArena(t, Options{Size: 16 << 20, HugePages: HugePagesOff, Shared: shared})
		r, err := a.Residency()
		if err != nil || r.Resident != 0 || a.Populated() != 0 || a.populator != nil {
			t.Fatalf("populate off: resident %d, populated %d, populator %v, %v", r.Resident, a.Populated(), a.populator, err)
		}
		p := newTestArena(t, Options{Size: 16 << 20, HugePages: HugePagesOff, Shared: shared, Prefault: true, Populate: true})
		if p.Populated() != p.Capacity() || p.populator != nil {
			t.Fatalf("prefault: populated %d of %d, populator %v", p.Populated(), p.Capacity(), p.populator)
		}
	})
}

// TestArenaPutDuringPopulation: puts write ranges the populator has not reached yet, then it
// populates them, through madvise and through the touch fallback of old kernels: no byte a
// put wrote changes. The populator is held at a gate between steps, so the order is fixed.
func TestArenaPutDuringPopulation(t *testing.T) {
	for _, fill := range []struct {
		name string
		fn   func([]byte) error
	}{
		{"madvise", hugepage.Populate},
		{"touch", func(mem []byte) error { hugepage.Touch(mem); return nil }},
	} {
		t.Run(fill.name, func(t *testing.T) {
			sharings(t, func(t *testing.T, shared bool) {
				gate := make(chan struct{})
				a := populateArena(t, shared, func(mem []byte) error {
					<-gate
					return fill.fn(mem)
				}, nil)
				gate <- struct{}{} // the first MiB is populated, the rest is not
				var handles []*Handle
				for i := range 6 { // 6 x 2.5 MiB: every page start written, across steps
					h, err := a.Alloc(5 << 19)
					if err != nil {
						t.Fatal(err)
					}
					b := h.Bytes()
					for j := range b {
						b[j] = byte(i + j>>12 + 1) // never 0, and differs per page
					}
					handles = append(handles, h)
				}
				close(gate)
				<-a.populator.done
				for i, h := range handles {
					b := h.Bytes()
					for j := range b {
						if b[j] != byte(i+j>>12+1) {
							t.Fatalf("object %d byte %d is %d after population, want %d", i, j, b[j], byte(i+j>>12+1))
						}
					}
					if err := h.Release(); err != nil {
						t.Fatal(err)
					}
				}
				if a.Populated() != a.Capacity() {
					t.Fatalf("populated %d of %d", a.Populated(), a.Capacity())
				}
			})
		})
	}
}

// TestArenaPopulateOutOfMemory: when the kernel refuses memory (ENOMEM from madvise: a cgroup
// limit), population stops where it was, says so once at Warn, and the arena works as
// without it.
func TestArenaPopulateOutOfMemory(t *testing.T) {
	var logs testutil.SyncBuffer
	calls := 0
	a := populateArena(t, false, func(mem []byte) error {
		if calls++; calls == 3 {
			return fmt.Errorf("hugepage: madvise(MADV_POPULATE_WRITE) of %d bytes: %w", len(mem), unix.ENOMEM)
		}
		return hugepage.Populate(mem)
	}, slog.New(slog.NewTextHandler(&logs, nil)))
	<-a.populator.done
	if a.Populated() != 2<<20 {
		t.Fatalf("populated %d bytes, want the 2 MiB of the steps before the error", a.Populated())
	}
	if out := logs.String(); !strings.Contains(out, "level=WARN") || !strings.Contains(out, "background population stopped") ||
		!strings.Contains(out, "populated_bytes=2097152") || !strings.Contains(out, "cannot allocate memory") {
		t.Fatalf("log:\n%s", out)
	}
	h, err := a.Alloc(a.Capacity())
	if err != nil {
		t.Fatal(err)
	}
	copy(h.Bytes()[a.Capacity()-4:], "tail") // pages past the populated ones fault in as written
	if !bytes.Equal(h.Bytes()[a.Capacity()-4:], []byte("tail")) {
		t.Fatal("write past the populated range lost")
	}
	if err := h.Release(); err != nil {
		t.Fatal(err)
	}
}

// TestArenaCloseDuringPopulation: Close stops the populator after its current step and
// returns once it has ended, before unmapping.
func TestArenaCloseDuringPopulation(t *testing.T) {
	sharings(t, func(t *testing.T, shared bool) {
		gate, entered := make(chan struct{}), make(chan struct{})
		a, err := NewArena(Options{Size: 16 << 20, HugePages: HugePagesOff, Shared: shared, Populate: true,
			populateStep: 1 << 20, populateFn: func(mem []byte) error {
				entered <- struct{}{}
				<-gate
				return hugepage.Populate(mem)
			}})
		if err != nil {
			t.Fatal(err)
		}
		<-entered
		gate <- struct{}{} // the first step
		<-entered          // the populator is in the second step
		var wg sync.WaitGroup
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := a.Close(); err != nil {
				t.Error(err)
			}
		}()
		<-a.populator.stop // Close has asked it to stop
		gate <- struct{}{} // the second step ends; the populator sees the stop
		wg.Wait()
		if got := a.Populated(); got != 2<<20 {
			t.Fatalf("populated %d bytes, want the 2 steps let through", got)
		}
	})
}
