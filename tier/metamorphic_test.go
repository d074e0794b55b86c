package tier_test

import (
	"context"
	"flag"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/mooncake-go/mooncake/dram"
	"github.com/mooncake-go/mooncake/internal/base"
	"github.com/mooncake-go/mooncake/tier"
	"github.com/mooncake-go/mooncake/tier/tiertest"
)

var (
	metaSeed = flag.Uint64("seed", 0, "seed of TestMetamorphic (0: time-based)")
	metaOps  = flag.Int("meta-ops", 0, "operations per TestMetamorphic run (0: 1500, 300 under -race)")
)

// metaConfig is one engine configuration the same operations run on.
type metaConfig struct {
	name  string
	arena int64 // bytes
	// lower returns a fresh lower tier and a function that restarts it (closes it and opens it
	// again on the same files); a nil restart keeps the same instance across engine restarts.
	// The lower tier is closed by t's cleanup if it must be.
	lower func(t *testing.T) (l tier.Lower, restart func() tier.Lower)
}

const metaMaxSize = 64 * kib

// metaConfigs are (a) DRAM big enough for everything, (b) DRAM of four objects, so most
// objects spill, (c) DRAM of one object, each over an in-memory lower tier; extraMetaConfigs
// adds the same over the real nvme store.
func metaConfigs() []metaConfig {
	mem := func(*testing.T) (tier.Lower, func() tier.Lower) { return tiertest.NewMemLower(), nil }
	cs := []metaConfig{
		{name: "dram-big", arena: 64 << 20, lower: mem},
		{name: "dram-small", arena: 4 * metaMaxSize, lower: mem},
		{name: "dram-one-object", arena: metaMaxSize, lower: mem},
	}
	return append(cs, extraMetaConfigs...)
}

// extraMetaConfigs is extended by other test files.
var extraMetaConfigs []metaConfig

// TestMetamorphic runs one seeded sequence of puts, gets, removes, pins, lists and restarts on
// each configuration and requires identical results (the tier that served a read excepted).
// Only spill and durable puts are used: cache mode may drop objects by design. Rerun a failure
// with -seed=N.
func TestMetamorphic(t *testing.T) {
	seed := *metaSeed
	if seed == 0 {
		seed = uint64(time.Now().UnixNano())
	}
	t.Logf("seed %d (rerun: go test ./tier -run TestMetamorphic -seed %d)", seed, seed)
	ops := *metaOps
	if ops == 0 {
		ops = 1500
		if raceEnabled {
			ops = 300
		}
	}
	if testing.Short() {
		ops /= 5
	}
	var want []string
	var wantName string
	for _, c := range metaConfigs() {
		got := runMeta(t, c, seed, ops)
		if want == nil {
			want, wantName = got, c.name
			continue
		}
		for i := range max(len(want), len(got)) {
			var w, g string
			if i < len(want) {
				w = want[i]
			}
			if i < len(got) {
				g = got[i]
			}
			if w != g {
				t.Fatalf("seed %d: op %d differs:\n  %s: %s\n  %s: %s", seed, i, wantName, w, c.name, g)
			}
		}
	}
}

// runMeta runs the operations of seed on configuration c and returns one line per operation.
func runMeta(t *testing.T, c metaConfig, seed uint64, ops int) []string {
	rng := rand.New(rand.NewPCG(seed, 1))
	a, err := dram.NewArena(dram.Options{Size: c.arena, HugePages: dram.HugePagesOff})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := a.Close(); err != nil {
			t.Errorf("%s: arena: %v", c.name, err)
		}
	}()
	l, restartLower := c.lower(t)
	opts := tier.Options{Arena: a, Lower: l, Persistence: base.PersistenceSpill, SpillQueueBytes: 2 * metaMaxSize}
	e, err := tier.Open(opts)
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := e.Close(); err != nil {
			t.Errorf("%s: close: %v", c.name, err)
		}
	}()

	res := func(err error) string {
		if err == nil {
			return "ok"
		}
		return "err " + base.CodeOf(err).String()
	}
	var spills, nvmeHits int64
	count := func() { m := e.Metrics(); spills += m.Spills; nvmeHits += m.HitsNVMe }
	keys := 3 + rng.IntN(30)
	var version base.Version = 10
	out := make([]string, 0, ops)
	for i := range ops {
		key := fmt.Sprintf("key/%d", rng.IntN(keys))
		var line string
		switch op := rng.IntN(100); {
		case op < 35:
			version++
			v := version
			if rng.IntN(10) == 0 {
				v -= base.Version(rng.IntN(5)) // sometimes stale: must fail the same way everywhere
			}
			size := 1 + rng.IntN(metaMaxSize)
			if rng.IntN(4) == 0 {
				size = metaMaxSize
			}
			o := tier.PutOptions{}
			if rng.IntN(4) == 0 {
				o.Persistence = base.PersistenceDurable
			}
			if rng.IntN(8) == 0 {
				o.SoftPinTTL = time.Hour
			}
			line = fmt.Sprintf("put %s v%d %d %s: %s", key, v, size, o.Persistence, res(put(e, key, v, pattern(key, v, size), o)))
		case op < 75:
			var v base.Version
			if rng.IntN(3) == 0 {
				v = version - base.Version(rng.IntN(4))
			}
			b, got, _, err := getV(e, key, v)
			line = fmt.Sprintf("get %s v%d: %s", key, v, res(err))
			if err == nil {
				sum := base.Checksum(b)
				ok := sum == base.Checksum(pattern(key, got, len(b)))
				line += fmt.Sprintf(" v%d len %d sum %x pattern-ok %t", got, len(b), sum, ok)
			}
		case op < 87:
			var v base.Version
			if rng.IntN(3) == 0 {
				v = version - base.Version(rng.IntN(4))
			}
			line = fmt.Sprintf("remove %s v%d: %s", key, v, res(e.Remove(key, v)))
		case op < 92:
			var b strings.Builder
			for _, info := range e.List("key/" + fmt.Sprint(rng.IntN(4))) {
				fmt.Fprintf(&b, " %s@%d/%d/%x", info.Key, info.Version, info.Size, info.Checksum)
			}
			line = "list" + b.String() + fmt.Sprintf(" exists(%s)=%t", key, e.Exists(key))
		case op < 96:
			if rng.IntN(2) == 0 {
				line = "pin " + key + ": " + res(e.Pin(key, time.Minute, false))
			} else {
				line = "unpin " + key + ": " + res(e.Unpin(key))
			}
		case op < 98:
			line = fmt.Sprintf("inventory %d", len(e.Inventory()))
		default:
			// Graceful restart: spill everything, close, reopen on the same lower tier.
			if err := e.SpillAll(context.Background()); err != nil {
				t.Fatalf("%s: op %d: SpillAll: %v", c.name, i, err)
			}
			count()
			if err := e.Close(); err != nil {
				t.Fatalf("%s: op %d: close: %v", c.name, i, err)
			}
			if restartLower != nil {
				opts.Lower = restartLower()
			}
			if e, err = tier.Open(opts); err != nil {
				t.Fatalf("%s: op %d: reopen: %v", c.name, i, err)
			}
			var b strings.Builder
			for _, m := range e.Inventory() {
				fmt.Fprintf(&b, " %s@%d", m.Key, m.Version)
			}
			line = "restart:" + b.String()
		}
		out = append(out, line)
	}
	count()
	t.Logf("%s: spills %d, nvme hits %d", c.name, spills, nvmeHits)
	if c.arena < 64<<20 && spills == 0 && ops >= 200 {
		t.Errorf("%s: nothing spilled: the configuration does not test what it should", c.name)
	}
	return out
}
