package tier_test

import (
	"errors"
	"fmt"
	"testing"

	"github.com/mooncake-go/mooncake/internal/base"
	"github.com/mooncake-go/mooncake/tier"
)

// TestSessionPinEvictsLast: a member of a pinned KV session is evicted after every object
// without a soft pin, although it is the oldest; lifting the mark makes it an ordinary victim.
func TestSessionPinEvictsLast(t *testing.T) {
	e := open(t, tier.Options{Arena: newArena(t, 512*kib), HighWatermark: 1, LowWatermark: 1})
	for i := range 4 {
		mustPut(t, e, fmt.Sprint("k", i), 1, 100*kib, tier.PutOptions{})
	}
	if err := e.SetSessionPin("k0", 1, true); err != nil {
		t.Fatal(err)
	}
	if err := e.SetSessionPin("absent", 0, true); !errors.Is(err, base.ErrObjectNotFound) {
		t.Fatalf("absent key: %v", err)
	}
	if err := e.SetSessionPin("k1", 9, true); !errors.Is(err, base.ErrInvalidVersion) {
		t.Fatalf("other version: %v", err)
	}
	for i := 4; i < 7; i++ {
		mustPut(t, e, fmt.Sprint("k", i), 1, 100*kib, tier.PutOptions{})
	}
	if !e.Exists("k0") {
		t.Fatal("the session-pinned object was evicted before unpinned ones")
	}
	if e.Exists("k1") {
		t.Fatal("k1 (unpinned, oldest after k0) survived")
	}
	if err := e.SetSessionPin("k0", 0, false); err != nil {
		t.Fatal(err)
	}
	for i := 7; i < 12; i++ {
		mustPut(t, e, fmt.Sprint("k", i), 1, 100*kib, tier.PutOptions{})
	}
	if e.Exists("k0") {
		t.Fatal("k0 survived five more puts after its session pin was lifted")
	}
}
