package dram

import (
	"runtime"
	"testing"

	"github.com/mooncake-go/mooncake/internal/invariants"
)

// TestLeakDetection drops a handle without releasing it: in invariants builds the arena must
// notice once the GC collects it.
func TestLeakDetection(t *testing.T) {
	if !invariants.Enabled {
		t.Skip("leak detection runs in invariants builds only: go test -tags invariants")
	}
	sharings(t, testLeakDetection)
}

func testLeakDetection(t *testing.T, shared bool) {
	a := newTestArena(t, Options{Size: 1 << 20, HugePages: HugePagesOff, Shared: shared})
	func() {
		h, err := a.Alloc(4096)
		if err != nil {
			t.Fatal(err)
		}
		_ = h // dropped without Release
	}()
	func() {
		released, err := a.Alloc(4096)
		if err != nil {
			t.Fatal(err)
		}
		if err := released.Release(); err != nil {
			t.Fatal(err)
		}
	}()
	// Cleanups run on a runtime goroutine after a GC; give it a bounded number of cycles.
	for i := 0; i < 100 && a.Stats().LeakedAllocs == 0; i++ {
		runtime.GC()
		runtime.Gosched()
	}
	if got := a.Stats().LeakedAllocs; got != 1 {
		t.Fatalf("LeakedAllocs = %d, want 1 (the dropped handle, not the released one)", got)
	}
	// Reclaim the leaked range behind the API so the arena can close.
	a.mu.Lock()
	for _, al := range usedBlocks(a.mu.alloc) {
		if err := a.mu.alloc.free(al); err != nil {
			t.Fatal(err)
		}
	}
	a.mu.requested = 0
	a.mu.Unlock()
}
