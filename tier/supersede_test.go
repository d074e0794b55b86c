package tier_test

import (
	"bytes"
	"context"
	"errors"
	"testing"
	"time"

	"github.com/mooncake-go/mooncake/internal/base"
	"github.com/mooncake-go/mooncake/tier"
	"github.com/mooncake-go/mooncake/tier/tiertest"
)

// TestSupersede: with KeepSuperseded a commit keeps the version it replaces until a Remove
// settles the key: Remove of the new version restores the old one, Remove of the old one
// releases it; a third version is refused meanwhile; the held bytes count as reserved.
func TestSupersede(t *testing.T) {
	for _, name := range []string{"dram", "lower-only"} {
		t.Run(name, func(t *testing.T) {
			lower := tiertest.NewMemLower()
			const size = 4096
			if name == "lower-only" {
				// v1 found on the lower tier at Open: on the lower tier only.
				e0, err := tier.Open(tier.Options{Arena: newArena(t, 1<<20), Lower: lower})
				if err != nil {
					t.Fatal(err)
				}
				mustPut(t, e0, "k", 1, size, tier.PutOptions{Persistence: base.PersistenceDurable})
				if err := e0.Close(); err != nil {
					t.Fatal(err)
				}
			}
			e := open(t, tier.Options{Arena: newArena(t, 1<<20), Lower: lower, KeepSuperseded: true})
			if name == "dram" {
				mustPut(t, e, "k", 1, size, tier.PutOptions{})
			} else if info := e.List("k"); len(info) != 1 || info[0].Tier != base.TierNVMe {
				t.Fatalf("v1 not on the lower tier only: %+v", info)
			}
			want := func(v base.Version) {
				t.Helper()
				b, _, err := get(e, "k", v)
				if err != nil {
					t.Fatalf("get v%d: %v", v, err)
				}
				if !bytes.Equal(b, pattern("k", v, size)) {
					t.Fatalf("get v%d: wrong bytes", v)
				}
			}
			held := func(objects int64) {
				t.Helper()
				m := e.Metrics()
				if m.Superseded.Objects != objects || m.Superseded.Bytes != objects*size || m.ReservedBytes != objects*size {
					t.Fatalf("superseded %+v, reserved %d; want %d objects", m.Superseded, m.ReservedBytes, objects)
				}
			}

			// v2 replaces v1: both readable, v1 held.
			mustPut(t, e, "k", 2, size, tier.PutOptions{})
			want(1)
			want(2)
			held(1)
			if !e.Unsettled("k") {
				t.Fatal("k not unsettled")
			}
			// A third version waits for the master: refused, nothing changes.
			if err := put(e, "k", 3, pattern("k", 3, size), tier.PutOptions{}); !errors.Is(err, base.ErrUnavailable) {
				t.Fatalf("third version: %v, want ErrUnavailable", err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), time.Millisecond)
			if err := e.AwaitSettled(ctx, "k"); !errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("AwaitSettled on an unsettled key: %v", err)
			}
			cancel()

			// v2 never commits on the master: its drop restores v1.
			if err := e.Remove("k", 2); err != nil {
				t.Fatal(err)
			}
			want(1)
			if _, _, err := get(e, "k", 2); !errors.Is(err, base.ErrInvalidVersion) {
				t.Fatalf("get v2 after its drop: %v", err)
			}
			held(0)
			if m := e.Metrics(); m.Restored != 1 {
				t.Fatalf("restored %d", m.Restored)
			}

			// v3 commits on the master, which drops v1: released.
			mustPut(t, e, "k", 3, size, tier.PutOptions{})
			held(1)
			r, err := e.Get("k", 1) // a reader holds v1 across its release
			if err != nil {
				t.Fatal(err)
			}
			done := make(chan error, 1)
			go func() { done <- e.AwaitSettled(context.Background(), "k") }()
			if err := e.Remove("k", 1); err != nil {
				t.Fatal(err)
			}
			if err := <-done; err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(r.Bytes(), pattern("k", 1, size)) {
				t.Fatal("reader of v1 saw its bytes change")
			}
			r.Release()
			held(0)
			want(3)
			if _, _, err := get(e, "k", 1); !errors.Is(err, base.ErrInvalidVersion) {
				t.Fatalf("get v1 after its drop: %v", err)
			}
			// Remove of any version drops both.
			mustPut(t, e, "k", 4, size, tier.PutOptions{})
			if err := e.Remove("k", 0); err != nil {
				t.Fatal(err)
			}
			held(0)
			if e.Exists("k") {
				t.Fatal("k exists after Remove(0)")
			}
		})
	}
}
