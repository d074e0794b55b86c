package client_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/mooncake-go/mooncake/client"
	"github.com/mooncake-go/mooncake/server/worker"
)

// TestUpsertHotKeysSmallArena: a few clients upsert the same few keys over and over into a
// small arena, many times its size in all. A worker keeps each replaced version until the
// master's drop (tier/supersede.go), so superseded versions pile up faster than one heartbeat
// of drops frees them: the worker must fetch the drops early (and a put finding DRAM full of
// them must wait for them) rather than fail with "no space". Every put succeeds and every
// read returns the bytes just put; the worker's metrics show the drops fetched early.
//
// DRAM only, the objects are hard-pinned (else a full arena of a cache-mode worker evicts
// current versions, and a read may miss). With an NVMe tier they are not: current versions
// spill, and a commit replacing one that is on NVMe only reads it back into DRAM to keep it.
func TestUpsertHotKeysSmallArena(t *testing.T) {
	const (
		arena   = 64 << 20
		size    = 4 << 20
		writers = 6  // one key each, over two clients (same-host shared memory and TCP)
		puts    = 40 // 6 x 40 x 4 MiB = 960 MiB, 15 arenas
	)
	for _, tc := range []struct {
		name string
		nvme bool
	}{{"dram", false}, {"nvme", true}} {
		t.Run(tc.name, func(t *testing.T) {
			root := ""
			if tc.nvme {
				root = t.TempDir()
			}
			ip := startInprocWith(t, 1, arena, func(cfg *worker.Config) {
				cfg.MetricsAddress, cfg.RootFSDir = "127.0.0.1:0", root
			})
			clients := []*client.Client{connect(t, ip), connectWith(t, ip, client.Config{DisableSharedMemory: true})}
			rc := client.ReplicateConfig{Upsert: true, HardPin: !tc.nvme}
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
			defer cancel()
			inParallel(t, writers, func(g int) error {
				c := clients[g%len(clients)]
				key := fmt.Sprintf("hot-%d", g)
				for i := range puts {
					v := val(size, byte(g*puts+i))
					binary.LittleEndian.PutUint64(v, uint64(g)<<32|uint64(i))
					if err := c.Put(ctx, key, v, rc); err != nil {
						return fmt.Errorf("put %d of %q: %w", i, key, err)
					}
					got, err := c.Get(ctx, key)
					if err != nil {
						return fmt.Errorf("get after put %d of %q: %w", i, key, err)
					}
					if !bytes.Equal(got, v) {
						return fmt.Errorf("get after put %d of %q: %d bytes, header %#x: not the bytes just put", i, key, len(got), binary.LittleEndian.Uint64(got))
					}
				}
				return nil
			})
			// Reads from the other client see the newest version of every key too.
			for g := range writers {
				key := fmt.Sprintf("hot-%d", g)
				got, err := clients[(g+1)%len(clients)].Get(ctx, key)
				if err != nil {
					t.Fatalf("get %q: %v", key, err)
				}
				if want := uint64(g)<<32 | uint64(puts-1); len(got) != size || binary.LittleEndian.Uint64(got) != want {
					t.Fatalf("get %q: header %#x, want the last put's %#x", key, binary.LittleEndian.Uint64(got), want)
				}
			}
			if n := workerMetric(t, ip.workers[0].MetricsAddr(), "worker_drops_fetched_early_total"); n == 0 {
				t.Fatal("no drop was fetched early: superseded versions waited for the periodic heartbeat")
			}
		})
	}
}

// workerMetric reads one series (a name, with its labels if any) from a worker's /metrics
// (0 when absent).
func workerMetric(t *testing.T, addr, name string) float64 {
	t.Helper()
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, name+" "); ok {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				t.Fatal(err)
			}
			return f
		}
	}
	return 0
}
