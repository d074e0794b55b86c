package nvme

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/cockroachdb/pebble/v2"
	"github.com/mooncake-go/mooncake/internal/base"
)

// flipByte flips one byte of a file at off through the OS (the store may have it open; the
// page cache keeps buffered readers coherent).
func flipByte(t *testing.T, path string, off int64) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var b [1]byte
	if _, err := f.ReadAt(b[:], off); err != nil {
		t.Fatal(err)
	}
	b[0] ^= 0x5a
	if _, err := f.WriteAt(b[:], off); err != nil {
		t.Fatal(err)
	}
}

func TestCorruption(t *testing.T) {
	dir := t.TempDir()
	o := testOptions(dir)
	var events []string
	o.Events.Corruption = func(key string, err error) { events = append(events, key) }
	s := mustOpen(t, o)
	want := map[string][]byte{}
	for i := 0; i < 12; i++ {
		n := []int{1000, 100 << 10, 1500 << 10}[i%3]
		key := fmt.Sprint("obj", i)
		want[key] = payload(uint64(i), n, i%2 == 0)
		if err := s.Put(key, 1, want[key], true); err != nil {
			t.Fatal(err)
		}
	}
	entryOf := func(key string) indexEntry {
		ent, found, err := s.getEntry(key, true)
		if err != nil || !found {
			t.Fatalf("getEntry(%q): %v %v", key, found, err)
		}
		return ent
	}
	extPath := func(ent indexEntry) string { return filepath.Join(dir, "extents", extentName(ent.extent)) }

	// 1. A byte of data in an uncompressed extent record (obj1: 100 KiB, random).
	// 2. A byte of data in an lz4 extent record (obj2: 1.5 MiB, compressible).
	// 3. An inline value whose stored bytes no longer match (obj3, rewritten in the index).
	bad := []string{"obj1", "obj2", "obj3"}
	e1, e2 := entryOf("obj1"), entryOf("obj2")
	if e1.isInline() || e2.isInline() || e1.flags&flagLZ4 != 0 || e2.flags&flagLZ4 == 0 {
		t.Fatalf("test setup: obj1 %+v obj2 %+v", e1.flags, e2.flags)
	}
	flipByte(t, extPath(e1), e1.offset+recordDataOff("obj1")+5000)
	flipByte(t, extPath(e2), e2.offset+recordDataOff("obj2")+e2.storedLen/2)
	e3 := entryOf("obj3")
	e3.inline[7] ^= 1
	if err := s.db.Set(encodeIndexKey("obj3"), e3.encode(), pebble.Sync); err != nil {
		t.Fatal(err)
	}

	for i, key := range bad {
		err := s.ReadInto(key, 0, make([]byte, len(want[key])))
		if !errors.Is(err, base.ErrCorruption) {
			t.Fatalf("ReadInto(%q) of a flipped byte: %v, want ErrCorruption", key, err)
		}
		if m := s.Metrics(); m.Corruptions != int64(i+1) || m.Quarantined != int64(i+1) {
			t.Fatalf("after %d corruptions: %+v", i+1, m)
		}
		// Quarantined: never served again, not reported.
		if err := s.ReadInto(key, 0, make([]byte, len(want[key]))); !errors.Is(err, base.ErrObjectNotFound) {
			t.Fatalf("second ReadInto(%q): %v, want ErrObjectNotFound", key, err)
		}
		if _, err := s.Stat(key); !errors.Is(err, base.ErrObjectNotFound) {
			t.Fatalf("Stat(%q) after quarantine: %v", key, err)
		}
	}
	check := func(s *Store) {
		t.Helper()
		n := 0
		if err := s.Scan(func(m base.ObjectMeta) error {
			n++
			for _, b := range bad {
				if m.Key == b {
					t.Errorf("Scan reports quarantined %q", b)
				}
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		good := 0
		for key, data := range want {
			if key != "obj1" && key != "obj2" && key != "obj3" {
				mustRead(t, s, key, 1, data)
				good++
			}
		}
		if n != good {
			t.Fatalf("Scan: %d objects, want %d", n, good)
		}
	}
	check(s)
	checkAccounting(t, s)
	if fmt.Sprint(events) != "[obj1 obj2 obj3]" {
		t.Fatalf("Corruption events %v, want [obj1 obj2 obj3]", events)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	// The quarantine survives a restart.
	s = mustOpen(t, testOptions(dir))
	check(s)

	// A flipped byte in a record header is found by Open: the entry is dropped.
	e4 := entryOf("obj7")
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	flipByte(t, extPath(e4), e4.offset+20)
	s = mustOpen(t, testOptions(dir))
	defer s.Close()
	if m := s.Metrics(); m.DroppedOnOpen != 1 {
		t.Fatalf("DroppedOnOpen = %d, want 1", m.DroppedOnOpen)
	}
	if _, err := s.Stat("obj7"); !errors.Is(err, base.ErrObjectNotFound) {
		t.Fatalf("Stat(obj7) with a bad header: %v", err)
	}
	delete(want, "obj7")
	bad = append(bad, "obj7")
	check(s)
}

func dirSize(t *testing.T, dir string) int64 {
	t.Helper()
	var n int64
	err := filepath.Walk(dir, func(_ string, fi os.FileInfo, err error) error {
		if err == nil && !fi.IsDir() {
			n += fi.Size()
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func TestGC(t *testing.T) {
	dir := t.TempDir()
	o := copyGCOptions(dir)
	var gcEnds []GCStats
	o.Events.GCEnd = func(st GCStats) { gcEnds = append(gcEnds, st) }
	s := mustOpen(t, o)
	want := map[string][]byte{}
	const n = 60
	for i := 0; i < n; i++ {
		key := fmt.Sprint("obj", i)
		want[key] = payload(uint64(i), 100<<10+i, false)
		if err := s.Put(key, base.Version(i+1), want[key], false); err != nil {
			t.Fatal(err)
		}
	}
	// Delete five in six.
	for i := 0; i < n; i++ {
		if i%6 != 0 {
			key := fmt.Sprint("obj", i)
			if err := s.Delete(key, 0); err != nil {
				t.Fatal(err)
			}
			delete(want, key)
		}
	}
	before := dirSize(t, filepath.Join(dir, "extents"))
	m0 := s.Metrics()

	// Readers run during GC: records move under them.
	var wg sync.WaitGroup
	stop := make(chan struct{})
	errc := make(chan error, 1)
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			for key, data := range want {
				buf := make([]byte, len(data))
				if err := s.ReadInto(key, 0, buf); err != nil || string(buf) != string(data) {
					select {
					case errc <- fmt.Errorf("concurrent ReadInto(%q): %v", key, err):
					default:
					}
					return
				}
			}
		}
	}()
	st, err := s.GC()
	close(stop)
	wg.Wait()
	if err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-errc:
		t.Fatal(err)
	default:
	}
	after := dirSize(t, filepath.Join(dir, "extents"))
	m1 := s.Metrics()
	t.Logf("gc: %+v; extents %d -> %d bytes; live ratio %.2f -> %.2f", st, before, after, m0.LiveRatio, m1.LiveRatio)
	if len(gcEnds) != 1 || gcEnds[0] != st {
		t.Fatalf("GCEnd events %+v, want one with %+v", gcEnds, st)
	}
	if st.ExtentsRemoved == 0 || after >= before/2 || m1.GCRuns != 1 || m1.GCBytesReclaimed <= 0 {
		t.Fatalf("GC reclaimed too little: %+v, %d -> %d bytes, metrics %+v", st, before, after, m1)
	}
	for key, data := range want {
		mustRead(t, s, key, 0, data)
	}
	checkAccounting(t, s)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = mustOpen(t, testOptions(dir))
	defer s.Close()
	checkAccounting(t, s)
	if m := s.Metrics(); m.Objects != int64(len(want)) || m.DroppedOnOpen != 0 {
		t.Fatalf("after reopen: %+v, want %d objects", m, len(want))
	}
	for key, data := range want {
		mustRead(t, s, key, 0, data)
	}
}
