package nvme

import (
	"errors"
	"fmt"
	"io"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/cockroachdb/pebble/v2/vfs/errorfs"
	"github.com/mooncake-go/mooncake/internal/base"
)

// faultFS injects faults into extent files only (pebble keeps working): write errors, sync
// errors and ENOSPC through pebble's errorfs, short reads through shortReadFile.
type faultFS struct {
	vfs.FS
	failWrite, failSync, diskFull, failCreate, failRead, shortRead atomic.Bool
}

func newFaultFS() *faultFS {
	f := &faultFS{}
	f.FS = errorfs.Wrap(vfs.Default, errorfs.InjectorFunc(func(op errorfs.Op) error {
		if !strings.Contains(op.Path, "/extents/") {
			return nil
		}
		switch {
		case op.Kind == errorfs.OpFileWriteAt && f.failWrite.Load():
			return errorfs.ErrInjected
		case op.Kind == errorfs.OpFileWriteAt && f.diskFull.Load():
			return fmt.Errorf("injected: %w", syscall.ENOSPC)
		case (op.Kind == errorfs.OpFileSyncData || op.Kind == errorfs.OpFileSync) && f.failSync.Load():
			return errorfs.ErrInjected
		case op.Kind == errorfs.OpFileReadAt && f.failRead.Load():
			return errorfs.ErrInjected
		case op.Kind == errorfs.OpCreate && f.failCreate.Load():
			return errorfs.ErrInjected
		}
		return nil
	}))
	return f
}

func (f *faultFS) Open(name string, opts ...vfs.OpenOption) (vfs.File, error) {
	file, err := f.FS.Open(name, opts...)
	if err != nil || !strings.Contains(name, "/extents/") {
		return file, err
	}
	return &shortReadFile{File: file, on: &f.shortRead}, nil
}

// shortReadFile returns half of what is asked, with io.EOF, while on.
type shortReadFile struct {
	vfs.File
	on *atomic.Bool
}

func (s *shortReadFile) ReadAt(p []byte, off int64) (int, error) {
	if s.on.Load() && len(p) > 1 {
		n, _ := s.File.ReadAt(p[:len(p)/2], off)
		return n, io.EOF
	}
	return s.File.ReadAt(p, off)
}

func TestFaults(t *testing.T) {
	dir := t.TempDir()
	fs := newFaultFS()
	o := testOptions(dir)
	o.FS = fs
	o.InlineThreshold = -1 // every value goes to an extent
	o.DisableLZ4 = true
	s := mustOpen(t, o)
	want := map[string][]byte{}
	put := func(key string, n int) error {
		data := payload(uint64(len(want)+n), n, false)
		err := s.Put(key, 1, data, true)
		if err == nil {
			want[key] = data
		}
		return err
	}
	for i := 0; i < 5; i++ {
		if err := put(fmt.Sprint("before", i), 50<<10); err != nil {
			t.Fatal(err)
		}
	}

	fs.failWrite.Store(true)
	if err := put("write-fails", 50<<10); !errors.Is(err, errorfs.ErrInjected) {
		t.Fatalf("Put with a failing write: %v, want the injected error", err)
	}
	fs.failWrite.Store(false)

	fs.failSync.Store(true)
	if err := put("sync-fails", 50<<10); !errors.Is(err, errorfs.ErrInjected) {
		t.Fatalf("Put with a failing sync: %v, want the injected error", err)
	}
	fs.failSync.Store(false)

	fs.diskFull.Store(true)
	if err := put("disk-full", 50<<10); !errors.Is(err, base.ErrNoSpace) {
		t.Fatalf("Put on a full disk: %v, want ErrNoSpace", err)
	}
	fs.diskFull.Store(false)

	// The next extent cannot be created either (each failure above sealed the extent).
	fs.failCreate.Store(true)
	if err := put("create-fails", 50<<10); !errors.Is(err, errorfs.ErrInjected) {
		t.Fatalf("Put with a failing extent create: %v", err)
	}
	fs.failCreate.Store(false)

	for _, k := range []string{"write-fails", "sync-fails", "disk-full", "create-fails"} {
		if _, err := s.Stat(k); !errors.Is(err, base.ErrObjectNotFound) {
			t.Fatalf("Stat(%q) after a failed Put: %v", k, err)
		}
	}
	for i := 0; i < 5; i++ {
		if err := put(fmt.Sprint("after", i), 70<<10); err != nil {
			t.Fatalf("Put after the faults: %v", err)
		}
	}
	for k, v := range want {
		mustRead(t, s, k, 1, v)
	}

	// A short read is a truncated record: ErrCorruption for that object, no panic.
	fs.shortRead.Store(true)
	err := s.ReadInto("before0", 1, make([]byte, len(want["before0"])))
	fs.shortRead.Store(false)
	if !errors.Is(err, base.ErrCorruption) {
		t.Fatalf("ReadInto with a short read: %v, want ErrCorruption", err)
	}
	delete(want, "before0") // quarantined
	if err := s.Close(); err != nil {
		t.Fatalf("Close after the faults: %v", err)
	}

	// Reopen without faults: the index is consistent (nothing dropped, everything reads).
	s = mustOpen(t, testOptions(dir))
	defer s.Close()
	if m := s.Metrics(); m.DroppedOnOpen != 0 || m.Objects != int64(len(want)) {
		t.Fatalf("after reopen: %+v, want %d objects and nothing dropped", m, len(want))
	}
	n := 0
	if err := s.Scan(func(m base.ObjectMeta) error {
		n++
		if _, ok := want[m.Key]; !ok {
			return fmt.Errorf("unexpected object %q", m.Key)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	for k, v := range want {
		mustRead(t, s, k, 1, v)
	}
}

// TestFaultsOnOpen: a read error at Open fails Open and drops nothing; a truncated extent
// (short read) drops the entries that point into it.
func TestFaultsOnOpen(t *testing.T) {
	dir := t.TempDir()
	o := testOptions(dir)
	o.InlineThreshold = -1
	s := mustOpen(t, o)
	data := payload(1, 10<<10, false)
	if err := s.Put("a", 1, data, true); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	fs := newFaultFS()
	o.FS = fs
	fs.failRead.Store(true)
	if s, err := Open(o); !errors.Is(err, errorfs.ErrInjected) {
		if err == nil {
			s.Close()
		}
		t.Fatalf("Open with failing reads: %v, want the injected error", err)
	}
	fs.failRead.Store(false)
	s = mustOpen(t, o)
	mustRead(t, s, "a", 1, data)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	fs.shortRead.Store(true)
	s = mustOpen(t, o)
	if m := s.Metrics(); m.Objects != 0 || m.DroppedOnOpen != 1 {
		t.Fatalf("Open of a truncated extent: %+v, want its entry dropped", m)
	}
	if _, err := s.Stat("a"); !errors.Is(err, base.ErrObjectNotFound) {
		t.Fatalf("Stat of an object whose extent is truncated: %v", err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
}
