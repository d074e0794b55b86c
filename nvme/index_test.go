package nvme

import (
	"errors"
	"fmt"
	"testing"

	"github.com/mooncake-go/mooncake/internal/base"
)

// TestIndexFilters: the index's sstables carry bloom filters, so a lookup of a key the tier
// does not hold (what every spill's put does first) is answered by the filter instead of a
// data block read. It fails without the filters (0 of 200).
func TestIndexFilters(t *testing.T) {
	s := mustOpen(t, testOptions(t.TempDir()))
	defer s.Close()
	for i := range 200 {
		if err := s.Put(fmt.Sprintf("held/%04d", i), 1, payload(uint64(i), 1000, false), false); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.db.Flush(); err != nil { // into an sstable, where filters live
		t.Fatal(err)
	}
	before := s.db.Metrics().Filter.Hits
	for i := range 200 {
		key := fmt.Sprintf("held/%04d-gone", i) // within the sstable's key range
		if _, err := s.Stat(key); !errors.Is(err, base.ErrObjectNotFound) {
			t.Fatalf("Stat of a missing key: %v", err)
		}
	}
	if hits := s.db.Metrics().Filter.Hits - before; hits < 150 {
		t.Fatalf("%d of 200 lookups of missing keys were answered by a filter, want nearly all", hits)
	}
}
