package main

import (
	"fmt"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/mooncake-go/mooncake/internal/testutil"
)

// TestPopulateArenaStandalone: `mooncake standalone` populates its arena in the background by
// default (worker_arena_populated_bytes reaches the capacity) and takes a put right after
// start (a put racing the populator is TestArenaPutDuringPopulation in dram);
// --populate_arena=false leaves it at 0, and --prefault_arena reports it whole from the start.
func TestPopulateArenaStandalone(t *testing.T) {
	bin := buildBinary(t)
	populated := regexp.MustCompile(`(?m)^worker_arena_populated_bytes (\S+)$`)
	run := func(flags ...string) (master string, metrics func() float64) {
		t.Helper()
		port := freePort(t)
		_, master = startStandalone(t, bin, filepath.Join(t.TempDir(), "data"),
			append([]string{"--global_segment_size", "64MiB", "--metrics_port", strconv.Itoa(port)}, flags...)...)
		return master, func() float64 {
			t.Helper()
			m := populated.FindStringSubmatch(httpGet(t, fmt.Sprintf("http://127.0.0.1:%d/metrics", port)))
			if m == nil {
				t.Fatal("/metrics lacks worker_arena_populated_bytes")
			}
			v, err := strconv.ParseFloat(m[1], 64)
			if err != nil {
				t.Fatal(err)
			}
			return v
		}
	}
	const capacity = 64 << 20
	master, metrics := run()
	if r := runBin(t, bin, []string{envMaster + "=" + master}, strings.NewReader("v"), "put", "k", "-"); r.code != 0 {
		t.Fatalf("put during population: exit %d: %s", r.code, r.stderr)
	}
	testutil.WaitFor(t, "the arena populated", 60*time.Second, func() error {
		if v := metrics(); v != capacity {
			return fmt.Errorf("populated %v of %d bytes", v, capacity)
		}
		return nil
	})
	if _, metrics := run("--populate_arena=false"); metrics() != 0 {
		t.Fatalf("--populate_arena=false: populated %v bytes, want 0", metrics())
	}
	if _, metrics := run("--prefault_arena"); metrics() != capacity {
		t.Fatalf("--prefault_arena: populated %v bytes, want %d", metrics(), capacity)
	}
}
