package tier_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mooncake-go/mooncake/dram"
	"github.com/mooncake-go/mooncake/internal/base"
	"github.com/mooncake-go/mooncake/internal/testutil"
	"github.com/mooncake-go/mooncake/tier"
	"github.com/mooncake-go/mooncake/tier/tiertest"
)

func TestMain(m *testing.M) { testutil.VerifyNoLeaks(m) }

// newArena maps a plain-page arena closed at the end of the test; closing fails (and so the
// test) if any handle is still live, which catches leaked Readers, Writers and copies.
func newArena(t testing.TB, size int64) *dram.Arena {
	t.Helper()
	a, err := dram.NewArena(dram.Options{Size: size, HugePages: dram.HugePagesOff})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := a.Close(); err != nil {
			t.Errorf("arena close: %v", err)
		}
	})
	return a
}

// open opens an engine closed at the end of the test (before its arena).
func open(t testing.TB, opts tier.Options) *tier.Engine {
	t.Helper()
	e, err := tier.Open(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := e.Close(); err != nil {
			t.Errorf("engine close: %v", err)
		}
	})
	return e
}

// pattern returns size bytes derived from key and version, so any byte read back under
// another object's identity (memory reused under a reader) is detected.
func pattern(key string, v base.Version, size int) []byte {
	p := make([]byte, size)
	seed := base.Checksum([]byte(key)) ^ uint64(v)*0x9e3779b97f4a7c15
	for i := 0; i+8 <= size; i += 8 {
		seed = seed*6364136223846793005 + 1442695040888963407
		binary.LittleEndian.PutUint64(p[i:], seed)
	}
	for i := size &^ 7; i < size; i++ {
		p[i] = byte(seed >> (8 * (i & 7)))
	}
	return p
}

func put(e *tier.Engine, key string, v base.Version, data []byte, o tier.PutOptions) error {
	w, err := e.Put(key, v, int64(len(data)), o)
	if err != nil {
		return err
	}
	copy(w.Bytes(), data)
	return w.Commit(base.Checksum(data))
}

func mustPut(t testing.TB, e *tier.Engine, key string, v base.Version, size int, o tier.PutOptions) {
	t.Helper()
	if err := put(e, key, v, pattern(key, v, size), o); err != nil {
		t.Fatalf("put %q v%d: %v", key, v, err)
	}
}

// get reads key and returns a copy of its bytes, its version and the tier that served it.
func get(e *tier.Engine, key string, v base.Version) ([]byte, base.Tier, error) {
	b, _, tr, err := getV(e, key, v)
	return b, tr, err
}

func getV(e *tier.Engine, key string, v base.Version) ([]byte, base.Version, base.Tier, error) {
	r, err := e.Get(key, v)
	if err != nil {
		return nil, 0, 0, err
	}
	defer r.Release()
	return append([]byte(nil), r.Bytes()...), r.Meta().Version, r.Tier(), nil
}

func mustGet(t testing.TB, e *tier.Engine, key string, v base.Version, size int) base.Tier {
	t.Helper()
	b, got, tr, err := getV(e, key, v)
	if err != nil {
		t.Fatalf("get %q v%d: %v", key, v, err)
	}
	if v != 0 && got != v {
		t.Fatalf("get %q v%d: got version %d", key, v, got)
	}
	if !bytes.Equal(b, pattern(key, got, size)) {
		t.Fatalf("get %q v%d: wrong bytes", key, v)
	}
	return tr
}

const kib = 1 << 10

func TestBasic(t *testing.T) {
	e := open(t, tier.Options{Arena: newArena(t, 1<<20)})
	mustPut(t, e, "a/1", 1, 10*kib, tier.PutOptions{})
	mustPut(t, e, "a/2", 2, 20*kib, tier.PutOptions{HardPin: true})
	mustPut(t, e, "b/1", 3, 1, tier.PutOptions{SoftPinTTL: time.Hour})
	if tr := mustGet(t, e, "a/1", 1, 10*kib); tr != base.TierDRAM {
		t.Fatalf("tier %v", tr)
	}
	mustGet(t, e, "a/2", 0, 20*kib)
	if !e.Exists("b/1") || e.Exists("c") {
		t.Fatal("Exists")
	}
	l := e.List("a/")
	if len(l) != 2 || l[0].Key != "a/1" || l[1].Key != "a/2" || !l[1].HardPin || l[0].Tier != base.TierDRAM ||
		l[0].Persistence != base.PersistenceCache {
		t.Fatalf("List: %+v", l)
	}
	if l := e.List("b/"); len(l) != 1 || l[0].SoftPinUntil.IsZero() {
		t.Fatalf("List b/: %+v", l)
	}
	inv := e.Inventory()
	if len(inv) != 3 || inv[0].Key != "a/1" || inv[0].Size != 10*kib || inv[0].Checksum != base.Checksum(pattern("a/1", 1, 10*kib)) {
		t.Fatalf("Inventory: %+v", inv)
	}
	if _, err := e.Get("c", 0); !errors.Is(err, base.ErrObjectNotFound) {
		t.Fatalf("get missing: %v", err)
	}
	if _, err := e.Get("a/1", 7); !errors.Is(err, base.ErrInvalidVersion) {
		t.Fatalf("get wrong version: %v", err)
	}
	if err := e.Remove("a/1", 9); !errors.Is(err, base.ErrInvalidVersion) {
		t.Fatalf("remove wrong version: %v", err)
	}
	if err := e.Remove("a/1", 1); err != nil {
		t.Fatal(err)
	}
	if err := e.Remove("a/1", 0); !errors.Is(err, base.ErrObjectNotFound) {
		t.Fatalf("remove twice: %v", err)
	}
	if err := e.Pin("zz", 0, true); !errors.Is(err, base.ErrObjectNotFound) {
		t.Fatal(err)
	}
	if err := e.Unpin("a/2"); err != nil {
		t.Fatal(err)
	}
	m := e.Metrics()
	if m.DRAM.Objects != 2 || m.DRAM.Bytes != 20*kib+1 || m.HitsDRAM != 2 || m.Misses != 2 || m.Commits != 3 ||
		m.Removes != 1 || m.HardPinned.Objects != 0 || m.PendingWrites.Objects != 0 {
		t.Fatalf("metrics %+v", m)
	}
}

func TestPutValidation(t *testing.T) {
	e := open(t, tier.Options{Arena: newArena(t, 1<<20)})
	f := func(key string, v base.Version, size int64, o tier.PutOptions, want error) {
		t.Helper()
		if _, err := e.Put(key, v, size, o); !errors.Is(err, want) {
			t.Fatalf("Put(%q, %d, %d, %+v) = %v, want %v", key, v, size, o, err, want)
		}
	}
	f("", 1, 1, tier.PutOptions{}, base.ErrInvalidKey)
	f(strings.Repeat("k", base.MaxKeyLen+1), 1, 1, tier.PutOptions{}, base.ErrInvalidKey)
	f("k", 1, 0, tier.PutOptions{}, base.ErrInvalidParams)
	f("k", 0, 1, tier.PutOptions{}, base.ErrInvalidVersion)
	f("k", 1, 1, tier.PutOptions{Persistence: 9}, base.ErrInvalidParams)
	f("k", 1, 1, tier.PutOptions{Persistence: base.PersistenceDurable}, base.ErrNotSupported)
	f("k", 1, 1, tier.PutOptions{SoftPinTTL: -1}, base.ErrInvalidParams)
	f("k", 1, 2<<20, tier.PutOptions{}, base.ErrNoSpace)
	f("k", 1, 2<<20, tier.PutOptions{}, base.ErrTooLarge)

	mustPut(t, e, "k", 5, 100, tier.PutOptions{})
	f("k", 5, 1, tier.PutOptions{}, base.ErrObjectAlreadyExists)
	f("k", 4, 1, tier.PutOptions{}, base.ErrInvalidVersion)

	// Two writers of the same key: the second commit of an older version loses.
	w7, err := e.Put("k", 7, 10, tier.PutOptions{})
	if err != nil {
		t.Fatal(err)
	}
	w6, err := e.Put("k", 6, 10, tier.PutOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := w7.Commit(0); err != nil {
		t.Fatal(err)
	}
	if err := w6.Commit(0); !errors.Is(err, base.ErrInvalidVersion) {
		t.Fatalf("older commit: %v", err)
	}
	if err := w7.Commit(0); !errors.Is(err, base.ErrInvalidParams) {
		t.Fatalf("double commit: %v", err)
	}
	w6.Abort() // no-op after the failed commit aborted it

	// Checksum mismatch: refused, not visible, range freed.
	w, err := e.Put("bad", 1, 10, tier.PutOptions{})
	if err != nil {
		t.Fatal(err)
	}
	copy(w.Bytes(), "0123456789")
	if err := w.Commit(12345); !errors.Is(err, base.ErrCorruption) {
		t.Fatalf("bad checksum: %v", err)
	}
	if e.Exists("bad") {
		t.Fatal("corrupt put visible")
	}
	w, _ = e.Put("bad", 1, 10, tier.PutOptions{})
	if err := w.CommitTrusted(0); !errors.Is(err, base.ErrInvalidParams) {
		t.Fatal(err)
	}
	w, _ = e.Put("bad", 1, 10, tier.PutOptions{})
	w.Abort()
	w.Abort()
	if m := e.Metrics(); m.ChecksumMismatches != 1 || m.PendingWrites.Objects != 0 || m.ReservedBytes != 0 {
		t.Fatalf("metrics %+v", m)
	}
}

func TestReplaceKeepsOldBytesForReaders(t *testing.T) {
	e := open(t, tier.Options{Arena: newArena(t, 1<<20)})
	mustPut(t, e, "k", 1, 64*kib, tier.PutOptions{})
	r, err := e.Get("k", 1)
	if err != nil {
		t.Fatal(err)
	}
	mustPut(t, e, "k", 2, 64*kib, tier.PutOptions{})
	if err := e.Remove("k", 2); err != nil {
		t.Fatal(err)
	}
	// Fill the arena with other objects: the old range must not be reused under r.
	for i := range 12 {
		mustPut(t, e, fmt.Sprint("f", i), 1, 64*kib, tier.PutOptions{})
	}
	if !bytes.Equal(r.Bytes(), pattern("k", 1, 64*kib)) || r.Meta().Version != 1 {
		t.Fatal("reader's bytes changed under it")
	}
	if m := e.Metrics(); m.ReservedBytes != 64*kib {
		t.Fatalf("reserved %d", m.ReservedBytes)
	}
	r.Release()
	if m := e.Metrics(); m.ReservedBytes != 0 || m.Replaced != 1 {
		t.Fatalf("metrics %+v", m)
	}
}

func TestNoSpaceReasons(t *testing.T) {
	a := newArena(t, 256*kib)
	e := open(t, tier.Options{Arena: a})
	mustPut(t, e, "p1", 1, 120*kib, tier.PutOptions{HardPin: true})
	mustPut(t, e, "p2", 1, 120*kib, tier.PutOptions{HardPin: true})
	_, err := e.Put("x", 1, 64*kib, tier.PutOptions{})
	if !errors.Is(err, base.ErrNoSpace) || !strings.Contains(err.Error(), "all pinned") {
		t.Fatalf("all pinned: %v", err)
	}
	if err := e.Unpin("p2"); err != nil {
		t.Fatal(err)
	}
	r, err := e.Get("p2", 0)
	if err != nil {
		t.Fatal(err)
	}
	_, err = e.Put("x", 1, 64*kib, tier.PutOptions{})
	if !errors.Is(err, base.ErrNoSpace) || !strings.Contains(err.Error(), "all in use") {
		t.Fatalf("all in use: %v", err)
	}
	r.Release()
	// Now p2 can go (cache mode: dropped).
	mustPut(t, e, "x", 1, 64*kib, tier.PutOptions{})
	if e.Exists("p2") || !e.Exists("p1") {
		t.Fatal("wrong victim")
	}
	_, err = e.Put("huge", 1, a.Capacity()+1, tier.PutOptions{})
	if !errors.Is(err, base.ErrNoSpace) || !strings.Contains(err.Error(), "larger than the DRAM arena") {
		t.Fatalf("too large: %v", err)
	}
	// A pending writer holds bytes: "all in use" too.
	w, err := e.Put("w", 1, 120*kib, tier.PutOptions{})
	if err != nil {
		t.Fatal(err)
	}
	_, err = e.Put("y", 1, 64*kib, tier.PutOptions{})
	if !errors.Is(err, base.ErrNoSpace) || !strings.Contains(err.Error(), "all in use") {
		t.Fatalf("writer: %v", err)
	}
	w.Abort()
	m := e.Metrics()
	if m.NoSpaceAllPinned != 1 || m.NoSpaceAllInUse != 2 || m.NoSpaceTooLarge != 1 || m.EvictedDropped < 1 {
		t.Fatalf("metrics %+v", m)
	}
}

// TestCacheEvictionOrder checks that reused objects survive a scan of one-shot puts, and that
// dropped objects are reported lost.
func TestCacheEvictionOrder(t *testing.T) {
	var mu sync.Mutex
	var lost []string
	// No background eviction: drops happen (and are reported) inside the Puts.
	e := open(t, tier.Options{Arena: newArena(t, 1<<20), HighWatermark: 1, LowWatermark: 1, Events: tier.EventListener{
		ObjectLost: func(m base.ObjectMeta, why string) { mu.Lock(); lost = append(lost, m.Key); mu.Unlock() },
	}})
	for i := range 4 {
		mustPut(t, e, fmt.Sprint("hot", i), 1, 100*kib, tier.PutOptions{})
		mustGet(t, e, fmt.Sprint("hot", i), 1, 100*kib)
	}
	for i := range 30 {
		mustPut(t, e, fmt.Sprint("scan", i), 1, 100*kib, tier.PutOptions{})
	}
	for i := range 4 {
		mustGet(t, e, fmt.Sprint("hot", i), 1, 100*kib)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(lost) < 24 || !strings.HasPrefix(lost[0], "scan") {
		t.Fatalf("lost %v", lost)
	}
}

func newSpill(t testing.TB, arena int64, opts tier.Options) (*tier.Engine, *tiertest.MemLower) {
	t.Helper()
	l := tiertest.NewMemLower()
	opts.Arena = newArena(t, arena)
	opts.Lower = l
	return open(t, opts), l
}

func TestSpillAndPromote(t *testing.T) {
	var mu sync.Mutex
	var spilled, promoted int
	e, l := newSpill(t, 1<<20, tier.Options{Events: tier.EventListener{
		SpillEnd: func(i tier.SpillInfo) {
			mu.Lock()
			defer mu.Unlock()
			if i.Err == nil {
				spilled++
			}
		},
		Promoted: func(base.ObjectMeta) { mu.Lock(); promoted++; mu.Unlock() },
	}})
	const n, size = 40, 100 * kib
	for i := range n {
		mustPut(t, e, fmt.Sprint("k", i), base.Version(i+1), size, tier.PutOptions{})
	}
	for i := range n {
		mustGet(t, e, fmt.Sprint("k", i), base.Version(i+1), size)
	}
	if len(e.Inventory()) != n {
		t.Fatal("objects lost")
	}
	m := e.Metrics()
	if m.Spills < 30 || m.HitsNVMe < 30 || l.Len() < 30 || m.EvictedDropped != 0 {
		t.Fatalf("metrics %+v, lower %d", m, l.Len())
	}
	// k0 is on NVMe: its first hit is served from there, the second promotes it.
	if tr := mustGet(t, e, "k0", 0, size); tr != base.TierNVMe {
		t.Fatalf("k0 hit %v", tr)
	}
	if tr := mustGet(t, e, "k0", 0, size); tr != base.TierDRAM && e.Metrics().PromotionsSkipped == 0 {
		t.Fatalf("k0 second hit %v", tr)
	}
	if tr := mustGet(t, e, "k0", 0, size); tr != base.TierDRAM {
		t.Fatalf("k0 after promotion: %v (metrics %+v)", tr, e.Metrics())
	}
	mu.Lock()
	if spilled < 30 || promoted < 1 {
		t.Fatalf("events: spilled %d promoted %d", spilled, promoted)
	}
	mu.Unlock()
	// Removing a spilled object removes it from the lower tier too.
	if err := e.Remove("k1", 0); err != nil {
		t.Fatal(err)
	}
	if l.Has("k1", 0) {
		t.Fatal("k1 still on the lower tier")
	}
	// Replacing a spilled object deletes the old version there.
	mustPut(t, e, "k2", 100, size, tier.PutOptions{})
	if l.Has("k2", 3) {
		t.Fatal("k2 v3 still on the lower tier")
	}
	mustGet(t, e, "k2", 100, size)
}

func TestDurable(t *testing.T) {
	e, l := newSpill(t, 512*kib, tier.Options{Persistence: base.PersistenceDurable})
	mustPut(t, e, "d", 1, 100*kib, tier.PutOptions{})
	if !l.Has("d", 1) || l.Syncs != 1 {
		t.Fatal("durable put not synced to the lower tier before the ack")
	}
	// Eviction drops the DRAM copy only: no second write.
	for i := range 10 {
		mustPut(t, e, fmt.Sprint("c", i), 1, 100*kib, tier.PutOptions{Persistence: base.PersistenceCache})
	}
	if puts := l.Puts; puts != 1 {
		t.Fatalf("lower puts %d", puts)
	}
	if m := e.Metrics(); m.EvictedCopies < 1 {
		t.Fatalf("metrics %+v", m)
	}
	mustGet(t, e, "d", 1, 100*kib)

	// A lower-tier failure fails the commit; nothing becomes visible.
	l.Fail(tiertest.OpPut, func(string) error { return errors.New("disk on fire") })
	err := put(e, "d2", 1, pattern("d2", 1, 10), tier.PutOptions{})
	if err == nil || !strings.Contains(err.Error(), "disk on fire") || e.Exists("d2") {
		t.Fatalf("durable failure: %v", err)
	}
	if m := e.Metrics(); m.LowerErrors != 1 || m.ReservedBytes != 0 {
		t.Fatalf("metrics %+v", m)
	}
}

func TestSpillFailureDropsObject(t *testing.T) {
	lostCh := make(chan string, 16)
	// No background eviction: every spill is chosen by a Put, synchronously.
	e, l := newSpill(t, 256*kib, tier.Options{HighWatermark: 1, LowWatermark: 1, Events: tier.EventListener{
		ObjectLost:      func(m base.ObjectMeta, why string) { lostCh <- m.Key },
		BackgroundError: func(error) {},
	}})
	l.Fail(tiertest.OpPut, func(string) error { return fmt.Errorf("%w: full", base.ErrNoSpace) })
	for i := range 6 {
		mustPut(t, e, fmt.Sprint("k", i), 1, 100*kib, tier.PutOptions{})
	}
	chosen := e.Metrics().EvictedSpilled
	if chosen < 4 {
		t.Fatalf("%d spills chosen", chosen)
	}
	for range chosen {
		if k := <-lostCh; e.Exists(k) {
			t.Fatalf("%s lost but listed", k)
		}
	}
	m := e.Metrics()
	if m.SpillErrors != chosen || m.DRAM.Objects+chosen != 6 || m.Spills != 0 {
		t.Fatalf("metrics %+v", m)
	}
}

func TestLowerCorruption(t *testing.T) {
	e, l := newSpill(t, 256*kib, tier.Options{})
	for i := range 6 {
		mustPut(t, e, fmt.Sprint("k", i), 1, 100*kib, tier.PutOptions{})
	}
	if !l.Has("k0", 1) {
		t.Fatal("k0 not spilled")
	}
	l.Corrupt("k0")
	if _, _, err := get(e, "k0", 0); !errors.Is(err, base.ErrCorruption) {
		t.Fatalf("corrupt read: %v", err)
	}
	if e.Exists("k0") {
		t.Fatal("corrupt object still indexed")
	}
	mustGet(t, e, "k1", 1, 100*kib)
}

func TestRestart(t *testing.T) {
	l := tiertest.NewMemLower()
	a := newArena(t, 1<<20)
	e, err := tier.Open(tier.Options{Arena: a, Lower: l})
	if err != nil {
		t.Fatal(err)
	}
	const size = 100 * kib
	for i := range 20 {
		o := tier.PutOptions{}
		if i%5 == 0 {
			o.Persistence = base.PersistenceCache // not meant to survive
		}
		if i%7 == 0 {
			o.Persistence = base.PersistenceDurable
		}
		mustPut(t, e, fmt.Sprint("k", i), base.Version(i+1), size, o)
	}
	before := e.Inventory()
	if err := e.SpillAll(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}

	var opened []base.ObjectMeta
	e2 := open(t, tier.Options{Arena: a, Lower: l})
	opened = e2.Inventory()
	want := map[string]base.ObjectMeta{}
	for _, m := range before {
		var i int
		fmt.Sscan(strings.TrimPrefix(m.Key, "k"), &i)
		if i%5 != 0 || i%7 == 0 {
			want[m.Key] = m
		}
	}
	if len(opened) != len(want) {
		t.Fatalf("after restart %d objects, want %d", len(opened), len(want))
	}
	for _, m := range opened {
		if want[m.Key] != m {
			t.Fatalf("after restart %+v, want %+v", m, want[m.Key])
		}
	}
	if m := e2.Metrics(); m.NVMe.Objects != int64(len(want)) || m.DRAM.Objects != 0 {
		t.Fatalf("metrics %+v", m)
	}
	n, err := e2.WarmUp(context.Background(), 0)
	if err != nil || n == 0 {
		t.Fatalf("warm-up %d, %v", n, err)
	}
	if m := e2.Metrics(); m.DRAM.Objects != int64(n) || float64(m.DRAM.Bytes) > 0.85*float64(a.Capacity()) {
		t.Fatalf("warm-up metrics %+v", m)
	}
	for _, m := range opened {
		mustGet(t, e2, m.Key, m.Version, size)
	}
}

func TestSpillAllDeadline(t *testing.T) {
	e, l := newSpill(t, 1<<20, tier.Options{})
	for i := range 5 {
		mustPut(t, e, fmt.Sprint("k", i), 1, 10*kib, tier.PutOptions{})
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := e.SpillAll(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("SpillAll with a dead context: %v", err)
	}
	if l.Len() != 0 {
		t.Fatal("spilled after the deadline")
	}
	if err := e.SpillAll(context.Background()); err != nil || l.Len() != 5 {
		t.Fatalf("SpillAll: %v, lower holds %d", err, l.Len())
	}
	// Objects on the lower tier already: a second SpillAll writes nothing.
	if err := e.SpillAll(context.Background()); err != nil || l.Puts != 5 {
		t.Fatalf("second SpillAll: %v, %d puts", err, l.Puts)
	}
}

func TestOpenScan(t *testing.T) {
	l := tiertest.NewMemLower()
	if err := l.Put("x", 3, pattern("x", 3, 100), false); err != nil {
		t.Fatal(err)
	}
	l.Fail(tiertest.OpScan, func(string) error { return errors.New("scan broke") })
	if _, err := tier.Open(tier.Options{Arena: newArena(t, 1<<20), Lower: l}); err == nil {
		t.Fatal("open must fail when the scan fails")
	}
	l.Fail(tiertest.OpScan, nil)
	e := open(t, tier.Options{Arena: newArena(t, 1<<20), Lower: l})
	if tr := mustGet(t, e, "x", 3, 100); tr != base.TierNVMe {
		t.Fatalf("tier %v", tr)
	}
	if _, err := tier.Open(tier.Options{}); !errors.Is(err, base.ErrInvalidParams) {
		t.Fatal(err)
	}
}

func TestClosed(t *testing.T) {
	a := newArena(t, 1<<20)
	e, err := tier.Open(tier.Options{Arena: a})
	if err != nil {
		t.Fatal(err)
	}
	mustPut(t, e, "k", 1, 100, tier.PutOptions{})
	r, err := e.Get("k", 0)
	if err != nil {
		t.Fatal(err)
	}
	w, err := e.Put("w", 1, 100, tier.PutOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(r.Bytes(), pattern("k", 1, 100)) {
		t.Fatal("reader after close")
	}
	r.Release()
	if err := w.Commit(0); !errors.Is(err, base.ErrClosed) {
		t.Fatalf("commit after close: %v", err)
	}
	if _, err := e.Get("k", 0); !errors.Is(err, base.ErrClosed) {
		t.Fatal(err)
	}
	if _, err := e.Put("k", 2, 1, tier.PutOptions{}); !errors.Is(err, base.ErrClosed) {
		t.Fatal(err)
	}
	if e.Exists("k") {
		t.Fatal("exists after close")
	}
}

// TestWatermarkEviction checks the background evictor: past the high watermark it evicts down
// to the low one, soft-pinned objects last.
func TestWatermarkEviction(t *testing.T) {
	evicted := make(chan tier.EvictInfo, 16)
	e := open(t, tier.Options{Arena: newArena(t, 1<<20), HighWatermark: 0.5, LowWatermark: 0.3,
		Events: tier.EventListener{Evicted: func(i tier.EvictInfo) { evicted <- i }}})
	mustPut(t, e, "k0", 1, 100*kib, tier.PutOptions{SoftPinTTL: time.Hour})
	for i := 1; i < 5; i++ {
		mustPut(t, e, fmt.Sprint("k", i), 1, 100*kib, tier.PutOptions{})
	}
	select {
	case i := <-evicted:
		t.Fatalf("evicted under the high watermark: %+v", i)
	default:
	}
	mustPut(t, e, "k5", 1, 100*kib, tier.PutOptions{}) // 600 KiB > 512 KiB: evict to 30%
	var got []string
	for range 3 {
		i := <-evicted
		if i.Reason != tier.EvictWatermark || i.Action != "drop" {
			t.Fatalf("eviction %+v", i)
		}
		got = append(got, i.Meta.Key)
	}
	if strings.Join(got, ",") != "k1,k2,k3" {
		t.Fatalf("victims %v, want k1,k2,k3 (k0 is soft-pinned)", got)
	}
	if m := e.Metrics(); m.EvictionsWatermark != 3 || m.DRAM.Objects != 3 {
		t.Fatalf("metrics %+v", m)
	}
}

// TestSpillQueueBackPressure checks that a Put needing room waits for its spills (writers
// wait) and that the spill queue never holds more than its bound.
func TestSpillQueueBackPressure(t *testing.T) {
	const limit = 200 * kib
	var maxQueued int64
	var e *tier.Engine
	var mu sync.Mutex
	decided := make(chan struct{}, 64)
	e, l := newSpill(t, 1<<20, tier.Options{SpillQueueBytes: limit, HighWatermark: 1, LowWatermark: 1,
		Events: tier.EventListener{Evicted: func(tier.EvictInfo) {
			mu.Lock()
			maxQueued = max(maxQueued, e.Metrics().SpillQueueBytes)
			mu.Unlock()
			decided <- struct{}{}
		}}})
	for i := range 10 {
		mustPut(t, e, fmt.Sprint("k", i), 1, 100*kib, tier.PutOptions{})
	}
	open := l.Gate()
	defer open()
	done := make(chan error, 1)
	go func() { done <- put(e, "big", 1, pattern("big", 1, 500*kib), tier.PutOptions{}) }()
	<-decided // the Put chose its victims; their spills cannot finish while the gate is shut
	select {
	case err := <-done:
		t.Fatalf("Put returned (%v) before its spills ended", err)
	default:
	}
	open()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	mustGet(t, e, "big", 1, 500*kib)
	mu.Lock()
	defer mu.Unlock()
	if maxQueued > limit {
		t.Fatalf("spill queue held %d bytes, bound %d", maxQueued, limit)
	}
	if m := e.Metrics(); m.Spills < 5 || m.EvictionsPressure < 5 {
		t.Fatalf("metrics %+v", m)
	}
}

// blockingLower blocks Puts of one version until released.
type blockingLower struct {
	*tiertest.MemLower
	v       base.Version
	entered chan struct{}
	release chan struct{}
}

func (l *blockingLower) PutChecked(key string, v base.Version, data []byte, checksum uint64, sync bool) error {
	if v == l.v {
		close(l.entered)
		<-l.release
	}
	return l.MemLower.PutChecked(key, v, data, checksum, sync)
}

// TestSlowSpillNeverOverwritesNewerVersion: a spill of version 1 still being written when a
// durable put of version 2 commits must not land on the lower tier after it.
func TestSlowSpillNeverOverwritesNewerVersion(t *testing.T) {
	l := &blockingLower{MemLower: tiertest.NewMemLower(), v: 1, entered: make(chan struct{}), release: make(chan struct{})}
	e := open(t, tier.Options{Arena: newArena(t, 256*kib), Lower: l, HighWatermark: 1, LowWatermark: 1})
	mustPut(t, e, "k", 1, 100*kib, tier.PutOptions{})
	mustPut(t, e, "f1", 1, 100*kib, tier.PutOptions{})
	filler := make(chan error, 1)
	go func() { filler <- put(e, "f2", 1, pattern("f2", 1, 100*kib), tier.PutOptions{}) }()
	<-l.entered // k v1 is being spilled
	durable := make(chan error, 1)
	go func() {
		durable <- put(e, "k", 2, pattern("k", 2, 10*kib), tier.PutOptions{Persistence: base.PersistenceDurable})
	}()
	for range 1000 {
		runtime.Gosched() // give a broken commit every chance to reach the lower tier first
	}
	close(l.release)
	if err := <-filler; err != nil {
		t.Fatal(err)
	}
	if err := <-durable; err != nil {
		t.Fatal(err)
	}
	if !l.Has("k", 2) {
		t.Fatal("the lower tier lost version 2 to the slow spill of version 1")
	}
	mustGet(t, e, "k", 2, 10*kib)
}

func TestPinnedPromotionAndWarmUpLimit(t *testing.T) {
	l := tiertest.NewMemLower()
	for i := range 5 {
		k := fmt.Sprint("k", i)
		if err := l.Put(k, 1, pattern(k, 1, 100*kib), false); err != nil {
			t.Fatal(err)
		}
	}
	e := open(t, tier.Options{Arena: newArena(t, 1<<20), Lower: l, PromoteOnHit: 1})
	n, err := e.WarmUp(context.Background(), 250*kib)
	if err != nil || n != 2 {
		t.Fatalf("warm-up loaded %d (%v), want 2 within 250 KiB", n, err)
	}
	// A hard pin set while the object is on NVMe holds once it is promoted.
	if err := e.Pin("k4", 0, true); err != nil {
		t.Fatal(err)
	}
	if tr := mustGet(t, e, "k4", 1, 100*kib); tr != base.TierNVMe {
		t.Fatalf("first hit %v", tr)
	}
	if tr := mustGet(t, e, "k4", 1, 100*kib); tr != base.TierDRAM {
		t.Fatalf("after promotion %v", tr)
	}
	if m := e.Metrics(); m.HardPinned.Objects != 1 || m.Promotions != 3 || m.DRAM.Objects != 3 || m.HitsNVMe != 1 || m.HitsDRAM != 1 {
		t.Fatalf("metrics %+v", m)
	}
}

// TestCrashKeepsDurable: without SpillAll (a crash), a restart finds every durable object and
// every spilled one, and nothing else.
func TestCrashKeepsDurable(t *testing.T) {
	l := tiertest.NewMemLower()
	a := newArena(t, 512*kib)
	e, err := tier.Open(tier.Options{Arena: a, Lower: l, HighWatermark: 1, LowWatermark: 1})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 8 {
		o := tier.PutOptions{}
		if i%2 == 0 {
			o.Persistence = base.PersistenceDurable
		}
		mustPut(t, e, fmt.Sprint("k", i), 1, 100*kib, o)
	}
	resident := map[string]bool{}
	for _, info := range e.List("") {
		if !info.OnLower {
			resident[info.Key] = true
		}
	}
	if err := e.Close(); err != nil { // no SpillAll: DRAM-only objects are gone
		t.Fatal(err)
	}
	e2 := open(t, tier.Options{Arena: a, Lower: l})
	got := map[string]bool{}
	for _, m := range e2.Inventory() {
		got[m.Key] = true
		mustGet(t, e2, m.Key, 1, 100*kib)
	}
	for i := range 8 {
		k := fmt.Sprint("k", i)
		if want := !resident[k]; got[k] != want {
			t.Fatalf("%s after the crash: present %t, want %t (durable: %t)", k, got[k], want, i%2 == 0)
		}
		if i%2 == 0 && !got[k] {
			t.Fatalf("durable %s lost", k)
		}
	}
	if len(resident) == 0 || len(got) == 8 {
		t.Fatalf("the test did not leave spill-mode objects only in DRAM (%d)", len(resident))
	}
}

// TestListenerMayUseTheSameKey: callbacks run without the engine's locks, the key's included,
// so a listener may commit the same key (here: a put of k0 waiting for its old version's loss).
func TestListenerMayUseTheSameKey(t *testing.T) {
	var w *tier.Writer
	committed := make(chan error, 1)
	e, l := newSpill(t, 256*kib, tier.Options{HighWatermark: 1, LowWatermark: 1, Events: tier.EventListener{
		BackgroundError: func(error) {},
		ObjectLost: func(m base.ObjectMeta, why string) {
			if m.Key == "k0" {
				copy(w.Bytes(), pattern("k0", 2, kib))
				committed <- w.Commit(0)
			}
		},
	}})
	mustPut(t, e, "k0", 1, 100*kib, tier.PutOptions{})
	mustPut(t, e, "k1", 1, 100*kib, tier.PutOptions{})
	var err error
	if w, err = e.Put("k0", 2, kib, tier.PutOptions{}); err != nil {
		t.Fatal(err)
	}
	l.Fail(tiertest.OpPut, func(string) error { return errors.New("no disk") })
	mustPut(t, e, "k2", 1, 100*kib, tier.PutOptions{}) // evicts k0 v1: its spill fails
	if err := <-committed; err != nil {
		t.Fatal(err)
	}
	mustGet(t, e, "k0", 2, kib)
}
