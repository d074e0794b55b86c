package tier_test

import (
	"log/slog"
	"testing"

	"github.com/mooncake-go/mooncake/nvme"
	"github.com/mooncake-go/mooncake/tier"
)

// The metamorphic configurations again over the real nvme store in a temporary directory;
// graceful restarts close the store and open it again on the same files.
func init() {
	newStore := func(t *testing.T) (tier.Lower, func() tier.Lower) {
		dir := t.TempDir()
		openStore := func() *nvme.Store {
			s, err := nvme.Open(nvme.Options{Dir: dir, Capacity: 1 << 30, Sync: nvme.SyncNone,
				Logger: slog.New(slog.DiscardHandler)})
			if err != nil {
				t.Fatalf("nvme open: %v", err)
			}
			return s
		}
		cur := openStore()
		t.Cleanup(func() {
			if err := cur.Close(); err != nil {
				t.Errorf("nvme close: %v", err)
			}
		})
		return cur, func() tier.Lower {
			if err := cur.Close(); err != nil {
				t.Fatalf("nvme close: %v", err)
			}
			cur = openStore()
			return cur
		}
	}
	extraMetaConfigs = append(extraMetaConfigs,
		metaConfig{name: "nvme-dram-small", arena: 4 * metaMaxSize, lower: newStore},
		metaConfig{name: "nvme-dram-one-object", arena: metaMaxSize, lower: newStore},
	)
}
