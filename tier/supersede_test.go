package tier_test

import (
	"bytes"
	"errors"
	"log/slog"
	"testing"

	"github.com/mooncake-go/mooncake/internal/base"
	"github.com/mooncake-go/mooncake/nvme"
	"github.com/mooncake-go/mooncake/tier"
	"github.com/mooncake-go/mooncake/tier/tiertest"
)

// TestSupersede: with KeepSuperseded a commit keeps the version it replaces until a Remove
// settles it: Remove of the current version restores the newest kept one, Remove of a kept
// one releases it; several versions may be kept at once (concurrent upserts) and settle in
// any order; the held bytes count as reserved and are released by the drops.
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
				// The read path's non-blocking DRAM get serves kept versions too.
				r, ok, err := e.GetDRAM("k", v)
				if ok && (err != nil || !bytes.Equal(r.Bytes(), pattern("k", v, size))) {
					t.Fatalf("GetDRAM v%d: %v", v, err)
				}
				if ok {
					r.Release()
				}
			}
			gone := func(v base.Version) {
				t.Helper()
				if _, _, err := get(e, "k", v); !errors.Is(err, base.ErrInvalidVersion) && !errors.Is(err, base.ErrObjectNotFound) {
					t.Fatalf("get v%d: %v, want it gone", v, err)
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
			if r, ok, err := e.GetDRAM("k", 1); !ok || err != nil {
				t.Fatalf("GetDRAM of the kept v1: ok %v err %v", ok, err)
			} else {
				r.Release()
			}
			want(1)
			want(2)
			held(1)
			// v3 replaces v2 before the master settled either: all three readable.
			mustPut(t, e, "k", 3, size, tier.PutOptions{})
			want(1)
			want(2)
			want(3)
			held(2)
			// An older version than the kept ones cannot commit (versions ascend).
			if err := put(e, "k", 2, pattern("k", 2, size), tier.PutOptions{}); !errors.Is(err, base.ErrObjectAlreadyExists) && !errors.Is(err, base.ErrInvalidVersion) {
				t.Fatalf("commit of a kept version again: %v", err)
			}

			// Neither v2 nor v3 commits on the master: their drops (v3 first) restore v2,
			// then v1.
			if err := e.Remove("k", 3); err != nil {
				t.Fatal(err)
			}
			gone(3)
			want(1)
			want(2)
			held(1)
			if err := e.Remove("k", 2); err != nil {
				t.Fatal(err)
			}
			gone(2)
			want(1)
			held(0)
			if m := e.Metrics(); m.Restored != 2 {
				t.Fatalf("restored %d", m.Restored)
			}

			// v4 and v5; the master commits v4 (drops v1) and refuses v5 (drops v5): v4 stays.
			mustPut(t, e, "k", 4, size, tier.PutOptions{})
			mustPut(t, e, "k", 5, size, tier.PutOptions{})
			held(2)
			r, err := e.Get("k", 1) // a reader holds v1 across its release
			if err != nil {
				t.Fatal(err)
			}
			if err := e.Remove("k", 1); err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(r.Bytes(), pattern("k", 1, size)) {
				t.Fatal("reader of v1 saw its bytes change")
			}
			r.Release()
			gone(1)
			held(1)
			if err := e.Remove("k", 5); err != nil {
				t.Fatal(err)
			}
			held(0)
			want(4)
			if info := e.List("k"); len(info) != 1 || info[0].Version != 4 {
				t.Fatalf("after the drops: %+v", info)
			}
			// Remove of any version drops them all.
			mustPut(t, e, "k", 6, size, tier.PutOptions{})
			mustPut(t, e, "k", 7, size, tier.PutOptions{})
			if err := e.Remove("k", 0); err != nil {
				t.Fatal(err)
			}
			held(0)
			if e.Exists("k") {
				t.Fatal("k exists after Remove(0)")
			}
			if lower.Len() != 0 {
				t.Fatalf("%d records left on the lower tier", lower.Len())
			}
		})
	}
}

// TestSupersedeLower: a superseded version keeps its lower-tier record while the newer
// version is in DRAM only (a restart before the master settles the key still finds it), the
// record goes with the master's drop of it, and a durable version made current again after
// a durable newer one replaced its record is written there again. On the in-memory lower
// tier and on the real nvme store.
func TestSupersedeLower(t *testing.T) {
	const size = 4096
	durable := tier.PutOptions{Persistence: base.PersistenceDurable}
	lowers := map[string]func(t *testing.T) tier.Lower{
		"mem": func(*testing.T) tier.Lower { return tiertest.NewMemLower() },
		"nvme": func(t *testing.T) tier.Lower {
			s, err := nvme.Open(nvme.Options{Dir: t.TempDir(), Capacity: 1 << 30, Sync: nvme.SyncNone,
				Logger: slog.New(slog.DiscardHandler)})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() {
				if err := s.Close(); err != nil {
					t.Error(err)
				}
			})
			return s
		},
	}
	for name, newLower := range lowers {
		// stored returns the version the lower tier holds of k (0: none).
		stored := func(t *testing.T, lower tier.Lower) base.Version {
			t.Helper()
			m, err := lower.Stat("k")
			if errors.Is(err, base.ErrObjectNotFound) {
				return 0
			}
			if err != nil {
				t.Fatal(err)
			}
			return m.Version
		}
		t.Run(name+"/kept", func(t *testing.T) {
			lower := newLower(t)
			e := open(t, tier.Options{Arena: newArena(t, 1<<20), Lower: lower, KeepSuperseded: true})
			mustPut(t, e, "k", 1, size, durable)
			mustPut(t, e, "k", 2, size, tier.PutOptions{}) // DRAM only
			if v := stored(t, lower); v != 1 {
				t.Fatalf("lower tier holds v%d while v2 is unsettled, want v1", v)
			}
			if err := e.Remove("k", 1); err != nil { // v2 committed on the master
				t.Fatal(err)
			}
			if v := stored(t, lower); v != 0 {
				t.Fatalf("lower tier holds v%d after the master's drop of v1", v)
			}

			mustPut(t, e, "k", 3, size, durable)
			mustPut(t, e, "k", 4, size, tier.PutOptions{})
			if err := e.Remove("k", 4); err != nil { // v4 never committed
				t.Fatal(err)
			}
			if info := e.List("k"); len(info) != 1 || info[0].Version != 3 || !info[0].OnLower {
				t.Fatalf("restored v3: %+v, want it on the lower tier", info)
			}
		})

		t.Run(name+"/rewritten", func(t *testing.T) {
			lower := newLower(t)
			e, err := tier.Open(tier.Options{Arena: newArena(t, 1<<20), Lower: lower, KeepSuperseded: true})
			if err != nil {
				t.Fatal(err)
			}
			mustPut(t, e, "k", 1, size, durable)
			mustPut(t, e, "k", 2, size, durable) // replaces v1's record
			if v := stored(t, lower); v != 2 {
				t.Fatalf("lower tier holds v%d after v2's durable write", v)
			}
			mustGet(t, e, "k", 1, size)              // served from DRAM
			if err := e.Remove("k", 2); err != nil { // v2 never committed
				t.Fatal(err)
			}
			if v := stored(t, lower); v != 1 {
				t.Fatalf("durable v1 made current again: lower tier holds v%d", v)
			}
			if info := e.List("k"); len(info) != 1 || info[0].Version != 1 || !info[0].OnLower {
				t.Fatalf("restored v1: %+v", info)
			}
			if err := e.Close(); err != nil {
				t.Fatal(err)
			}
			// A restart finds v1.
			e2 := open(t, tier.Options{Arena: newArena(t, 1<<20), Lower: lower, KeepSuperseded: true})
			mustGet(t, e2, "k", 1, size)
		})
	}
}
