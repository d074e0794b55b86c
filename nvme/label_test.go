package nvme

import (
	"errors"
	"fmt"
	"testing"

	"github.com/mooncake-go/mooncake/internal/base"
)

// TestLabels: an object's label and the labels' names survive a restart and GC's copies;
// Footprint is what the store counts as live for it.
func TestLabels(t *testing.T) {
	dir := t.TempDir()
	s := mustOpen(t, copyGCOptions(dir))
	if err := s.SetLabelName(7, "qwen2-7b"); err != nil {
		t.Fatal(err)
	}
	// Extent records (200 KiB) and inline ones (1 KiB); half are deleted so GC copies the rest.
	for i := range 20 {
		size := 200 << 10
		if i%4 == 3 {
			size = 1 << 10
		}
		label := uint16(7)
		if i%5 == 0 {
			label = 0
		}
		if err := s.PutLabeled(fmt.Sprint("k", i), base.Version(i+1), payload(uint64(i), size, false), 0, false, label); err != nil {
			t.Fatal(err)
		}
	}
	for i := 0; i < 20; i += 2 {
		if err := s.Delete(fmt.Sprint("k", i), 0); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.GC(); err != nil {
		t.Fatal(err)
	}
	check := func(s *Store, when string) {
		t.Helper()
		var live int64
		n := 0
		err := s.ScanLabeled(func(m base.ObjectMeta, label uint16) error {
			var i int
			fmt.Sscan(m.Key[1:], &i)
			want := uint16(7)
			if i%5 == 0 {
				want = 0
			}
			if label != want {
				return fmt.Errorf("%s: label %d, want %d", m.Key, label, want)
			}
			fp, err := s.Footprint(m.Key, m.Version)
			if err != nil || fp < m.Size {
				return fmt.Errorf("%s: footprint %d (%v) for %d bytes", m.Key, fp, err, m.Size)
			}
			live += fp
			n++
			return nil
		})
		if err != nil || n != 10 {
			t.Fatalf("%s: %d objects, %v", when, n, err)
		}
		if got := s.Metrics().LiveBytes; got != live {
			t.Fatalf("%s: footprints sum to %d, live bytes %d", when, live, got)
		}
		names, err := s.LabelNames()
		if err != nil || len(names) != 1 || names[7] != "qwen2-7b" {
			t.Fatalf("%s: label names %v, %v", when, names, err)
		}
	}
	check(s, "after GC")
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = mustOpen(t, copyGCOptions(dir))
	defer s.Close()
	check(s, "after reopening")
	if _, err := s.Footprint("k0", 0); !errors.Is(err, base.ErrObjectNotFound) {
		t.Fatalf("footprint of a deleted object: %v", err)
	}
}
