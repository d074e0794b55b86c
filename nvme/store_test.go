package nvme

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/mooncake-go/mooncake/internal/base"
	"github.com/mooncake-go/mooncake/internal/testutil"
)

func TestMain(m *testing.M) { testutil.VerifyNoLeaks(m) }

var quietLogger = slog.New(slog.NewTextHandler(io.Discard, nil))

// testOptions are small: 1 MiB extents so tests roll extents and GC has work.
func testOptions(dir string) Options {
	return Options{Dir: dir, Logger: quietLogger, ExtentSize: 1 << 20, GCInterval: -1, Capacity: 1 << 30}
}

// copyGCOptions are testOptions without hole punching: GC copies the live records of mostly
// dead extents, the path of filesystems that cannot punch.
func copyGCOptions(dir string) Options {
	o := testOptions(dir)
	o.DisableHolePunch = true
	return o
}

func mustOpen(t testing.TB, o Options) *Store {
	t.Helper()
	s, err := Open(o)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	return s
}

// payload returns n deterministic bytes; compressible selects a low-entropy pattern.
func payload(seed uint64, n int, compressible bool) []byte {
	r := rand.New(rand.NewPCG(seed, 7))
	b := make([]byte, n+8)
	for i := 0; i < n; i += 8 {
		binary.LittleEndian.PutUint64(b[i:], r.Uint64())
	}
	b = b[:n:n]
	if compressible {
		// Runs of a repeating pattern with a random byte every ~50: lz4 saves most of it.
		for i := range b {
			if b[i] > 5 {
				b[i] = byte(i / 64 % 7)
			}
		}
	}
	return b
}

func mustRead(t testing.TB, s *Store, key string, v base.Version, want []byte) {
	t.Helper()
	meta, err := s.Stat(key)
	if err != nil {
		t.Fatalf("Stat(%q): %v", key, err)
	}
	if meta.Size != int64(len(want)) || meta.Checksum != base.Checksum(want) || (v != 0 && meta.Version != v) {
		t.Fatalf("Stat(%q) = %+v, want size %d version %d", key, meta, len(want), v)
	}
	got := make([]byte, len(want))
	if err := s.ReadInto(key, v, got); err != nil {
		t.Fatalf("ReadInto(%q): %v", key, err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("ReadInto(%q): bytes differ", key)
	}
}

func TestRoundTripSizes(t *testing.T) {
	dir := t.TempDir()
	s := mustOpen(t, testOptions(dir))
	sizes := []int{0, 1, 255, 256, 4095, 4096, 4097, 64<<10 - 1, 64 << 10, 64<<10 + 1, 300 << 10, 1 << 20, 3<<20 + 5, 4<<20 - 4096, 9<<20 + 3}
	want := map[string][]byte{}
	for i, n := range sizes {
		for _, comp := range []bool{false, true} {
			key := fmt.Sprintf("k-%d-%v", n, comp)
			data := payload(uint64(i), n, comp)
			if err := s.Put(key, base.Version(i+1), data, i%2 == 0); err != nil {
				t.Fatalf("Put(%q): %v", key, err)
			}
			want[key] = data
			mustRead(t, s, key, base.Version(i+1), data)
			mustRead(t, s, key, 0, data)
		}
	}
	m := s.Metrics()
	if m.Objects != int64(len(want)) || m.LZ4BytesSaved <= 0 || m.Extents == 0 {
		t.Fatalf("metrics %+v: want %d objects, lz4 savings and extents", m, len(want))
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = mustOpen(t, testOptions(dir))
	defer s.Close()
	seen := map[string]bool{}
	if err := s.Scan(func(m base.ObjectMeta) error {
		seen[m.Key] = true
		if w, ok := want[m.Key]; !ok || m.Checksum != base.Checksum(w) || m.Size != int64(len(w)) {
			t.Errorf("Scan: unexpected %+v", m)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if len(seen) != len(want) {
		t.Fatalf("Scan after reopen saw %d objects, want %d", len(seen), len(want))
	}
	for k, w := range want {
		mustRead(t, s, k, 0, w)
	}
}

func TestVersionsOverwriteDelete(t *testing.T) {
	s := mustOpen(t, testOptions(t.TempDir()))
	defer s.Close()
	big1, big2 := payload(1, 200<<10, false), payload(2, 300<<10, false)
	if err := s.Put("a", 5, big1, true); err != nil {
		t.Fatal(err)
	}
	if err := s.ReadInto("a", 6, make([]byte, len(big1))); !errors.Is(err, base.ErrInvalidVersion) {
		t.Fatalf("ReadInto wrong version: %v, want ErrInvalidVersion", err)
	}
	if err := s.ReadInto("a", 5, make([]byte, 10)); !errors.Is(err, base.ErrInvalidParams) {
		t.Fatalf("ReadInto short buffer: %v, want ErrInvalidParams", err)
	}
	if err := s.Put("a", 7, big2, true); err != nil {
		t.Fatal(err)
	}
	mustRead(t, s, "a", 7, big2)
	if err := s.ReadInto("a", 5, make([]byte, len(big1))); !errors.Is(err, base.ErrInvalidVersion) {
		t.Fatalf("ReadInto old version: %v", err)
	}
	if m := s.Metrics(); m.Objects != 1 || m.LiveRatio >= 1 {
		t.Fatalf("after overwrite: %+v, want 1 object and dead space", m)
	}
	if err := s.Delete("a", 5); !errors.Is(err, base.ErrInvalidVersion) {
		t.Fatalf("Delete old version: %v", err)
	}
	if err := s.Delete("a", 7); err != nil {
		t.Fatal(err)
	}
	if err := s.Delete("a", 0); !errors.Is(err, base.ErrObjectNotFound) {
		t.Fatalf("Delete again: %v", err)
	}
	if _, err := s.Stat("a"); !errors.Is(err, base.ErrObjectNotFound) {
		t.Fatalf("Stat deleted: %v", err)
	}
	if err := s.ReadInto("a", 0, nil); !errors.Is(err, base.ErrObjectNotFound) {
		t.Fatalf("ReadInto deleted: %v", err)
	}
	if err := s.Put("", 1, nil, false); !errors.Is(err, base.ErrInvalidKey) {
		t.Fatalf("Put empty key: %v", err)
	}
	if m := s.Metrics(); m.Objects != 0 || m.LiveBytes != 0 {
		t.Fatalf("after delete: %+v", m)
	}
}

func TestClosed(t *testing.T) {
	s := mustOpen(t, testOptions(t.TempDir()))
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := s.Put("a", 1, []byte("x"), true); !errors.Is(err, base.ErrClosed) {
		t.Fatalf("Put after Close: %v", err)
	}
	if err := s.Close(); !errors.Is(err, base.ErrClosed) {
		t.Fatalf("second Close: %v", err)
	}
}

func TestOptionsValidate(t *testing.T) {
	f := func(o Options) {
		t.Helper()
		o.EnsureDefaults()
		if err := o.Validate(); !errors.Is(err, base.ErrInvalidParams) {
			t.Fatalf("Validate(%+v) = %v, want ErrInvalidParams", o, err)
		}
	}
	f(Options{})
	f(Options{Dir: "x", ExtentSize: 100})
	f(Options{Dir: "x", GCLiveRatio: 2})
	f(Options{Dir: "x", LZ4MinSaving: 1})
	f(Options{Dir: "x", Sync: 9})
}

func TestCapacity(t *testing.T) {
	dir := t.TempDir()
	o := testOptions(dir)
	o.Capacity = 3 << 20
	o.DisableLZ4 = true
	s := mustOpen(t, o)
	defer s.Close()
	data := payload(1, 1<<20, false)
	var err error
	n := 0
	for ; n < 10; n++ {
		if err = s.Put(fmt.Sprint("k", n), 1, data, true); err != nil {
			break
		}
	}
	if !errors.Is(err, base.ErrNoSpace) {
		t.Fatalf("Put into a full store: %v, want ErrNoSpace", err)
	}
	if n == 0 {
		t.Fatal("nothing fit")
	}
	for i := 0; i < n; i++ {
		mustRead(t, s, fmt.Sprint("k", i), 1, data)
	}
	if _, err := s.Stat(fmt.Sprint("k", n)); !errors.Is(err, base.ErrObjectNotFound) {
		t.Fatalf("the refused object is visible: %v", err)
	}
	// Deleting and collecting makes room again.
	for i := 0; i < n; i++ {
		if err := s.Delete(fmt.Sprint("k", i), 0); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.GC(); err != nil {
		t.Fatal(err)
	}
	if err := s.Put("again", 1, data, true); err != nil {
		t.Fatalf("Put after GC: %v", err)
	}
}

// TestMemFS: the store runs on any pebble vfs.FS (here an in-memory one), as fault tests need.
func TestMemFS(t *testing.T) {
	o := testOptions("/store")
	o.FS = vfs.NewMem()
	s := mustOpen(t, o)
	if s.Metrics().DirectIO {
		t.Fatal("O_DIRECT on a MemFS")
	}
	data := payload(1, 300<<10, false)
	if err := s.Put("a", 1, data, true); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = mustOpen(t, o)
	defer s.Close()
	mustRead(t, s, "a", 1, data)
}

// TestGCWhenFull: a store full of mostly dead extents can still collect them (GC copies are
// not refused for capacity), and then takes writes again.
func TestGCWhenFull(t *testing.T) {
	o := copyGCOptions(t.TempDir())
	o.Capacity = 4 << 20
	o.DisableLZ4 = true
	s := mustOpen(t, o)
	defer s.Close()
	var keys []string
	for i := 0; ; i++ {
		key := fmt.Sprint("k", i)
		err := s.Put(key, 1, payload(uint64(i), 300<<10, false), false)
		if errors.Is(err, base.ErrNoSpace) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		keys = append(keys, key)
	}
	live := map[string][]byte{}
	for i, key := range keys {
		if i%3 != 0 {
			if err := s.Delete(key, 0); err != nil {
				t.Fatal(err)
			}
			continue
		}
		live[key] = payload(uint64(i), 300<<10, false)
	}
	st, err := s.GC()
	if err != nil {
		t.Fatal(err)
	}
	if st.ExtentsRemoved == 0 || st.RecordsMoved == 0 {
		t.Fatalf("GC of a full store: %+v", st)
	}
	if err := s.Put("after", 1, payload(7, 300<<10, false), true); err != nil {
		t.Fatalf("Put after GC: %v", err)
	}
	for k, v := range live {
		mustRead(t, s, k, 1, v)
	}
	checkAccounting(t, s)
}

// TestPutSourceAlignment covers both extent write paths: from the caller's memory (buffered,
// or O_DIRECT with a block-aligned source) and through aligned copies (O_DIRECT with an
// unaligned source), with tails of every kind and a key long enough for a two-block header.
func TestPutSourceAlignment(t *testing.T) {
	for _, mode := range []DirectIO{DirectIOAuto, DirectIOOff} {
		dir := t.TempDir()
		o := testOptions(dir)
		o.DirectIO = mode
		o.DisableLZ4 = true
		s := mustOpen(t, o)
		want := map[string][]byte{}
		longKey := string(bytes.Repeat([]byte("k"), base.MaxKeyLen-40))
		i := 0
		for _, n := range []int{64<<10 + 1, 1 << 20, 1<<20 + 4095, 9<<20 + 3} {
			for _, shift := range []int{0, 1, 512} {
				i++
				buf := alignedAlloc(n + shift)
				data := buf[shift : shift+n]
				copy(data, payload(uint64(i), n, false))
				key := fmt.Sprintf("%s-%d-%d-%d", longKey[:(i%2)*len(longKey)], mode, n, shift)
				if err := s.Put(key, 1, data, i%2 == 0); err != nil {
					t.Fatalf("Put(%d bytes at +%d): %v", n, shift, err)
				}
				want[key] = data
				mustRead(t, s, key, 1, data)
			}
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
		s = mustOpen(t, o)
		for k, w := range want {
			mustRead(t, s, k, 1, w)
		}
		if m := s.Metrics(); m.DroppedOnOpen != 0 || m.Objects != int64(len(want)) {
			t.Fatalf("direct=%v: after reopen %+v, want %d objects", m.DirectIO, m, len(want))
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

// TestPutChecked: a known checksum is stored as given, not recomputed. The right one reads
// back; a wrong one (bytes changed after the checksum was taken, as DRAM damage would) makes
// every read of that object a corruption error, and other objects still read.
func TestPutChecked(t *testing.T) {
	s := mustOpen(t, testOptions(t.TempDir()))
	defer s.Close()
	for i, n := range []int{100, 64 << 10, 1 << 20, 1<<20 + 5} {
		for _, comp := range []bool{false, true} {
			data := payload(uint64(i), n, comp)
			good := fmt.Sprintf("good-%d-%v", n, comp)
			if err := s.PutChecked(good, 1, data, base.Checksum(data), false); err != nil {
				t.Fatal(err)
			}
			mustRead(t, s, good, 1, data)
			if m, err := s.Stat(good); err != nil || m.Checksum != base.Checksum(data) {
				t.Fatalf("Stat(%q) = %+v, %v", good, m, err)
			}
			bad := fmt.Sprintf("bad-%d-%v", n, comp)
			if err := s.PutChecked(bad, 1, data, base.Checksum(data)+1, false); err != nil {
				t.Fatal(err)
			}
			if err := s.ReadInto(bad, 1, make([]byte, n)); !errors.Is(err, base.ErrCorruption) {
				t.Fatalf("ReadInto(%q) with a wrong stored checksum: %v, want ErrCorruption", bad, err)
			}
			mustRead(t, s, good, 1, data)
		}
	}
}
