package main

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/mooncake-go/mooncake/internal/base"
)

func TestStandaloneNVMeCapacity(t *testing.T) {
	const gib = int64(1 << 30)
	f := func(used, avail, want int64, wantErr bool) {
		t.Helper()
		got, err := standaloneNVMeCapacity("/d", used, avail)
		if wantErr {
			if !errors.Is(err, base.ErrInvalidParams) || !strings.Contains(err.Error(), "--dram_only") {
				t.Fatalf("used %d avail %d: err %v, want invalid params naming --dram_only", used, avail, err)
			}
			return
		}
		if err != nil || got != want {
			t.Fatalf("used %d avail %d: %d, %v; want %d", used, avail, got, err, want)
		}
	}
	f(0, 100*gib, 25*gib, false)
	f(0, 4*gib, gib, false) // exactly the minimum
	f(0, 4*gib-4, 0, true)  // a byte short
	f(0, 0, 0, true)
	// A restart: what the tier holds counts, so a fuller disk never shrinks the tier under its
	// objects.
	f(3*gib, 0, 3*gib, false)
	f(gib/2, 2*gib, gib, false)
}

// TestStandaloneNVMeDefaultSizes: the default tier measures what its directory holds.
func TestStandaloneNVMeDefaultSizes(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "nvme")
	empty, err := standaloneNVMeDefault(dir) // not there yet: sized from the parent's disk
	if err != nil {
		t.Skipf("this disk is too small for the default tier: %v", err)
	}
	if err := os.MkdirAll(filepath.Join(dir, "a", "b"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "a", "b", "x"), make([]byte, 3<<20), 0o644); err != nil {
		t.Fatal(err)
	}
	if n, err := dirBytes(dir); err != nil || n != 3<<20 {
		t.Fatalf("dirBytes: %d, %v", n, err)
	}
	held, err := standaloneNVMeDefault(dir)
	if err != nil {
		t.Fatal(err)
	}
	// The tier covers what it holds. (Comparing held with empty would race with every other
	// writer on this disk, whose free space moves between the two calls: the sizing rule
	// itself is the pure cases of TestStandaloneNVMeCapacity.)
	if held < 3<<20 || empty <= 0 {
		t.Fatalf("capacity %d with 3 MiB held (%d when empty)", held, empty)
	}
}

// TestStandaloneKeepsItsCache is issue 24's item 6 with the built binary: `mooncake
// standalone` with no flags but its ports, in a fresh directory, keeps an object across
// SIGTERM and a restart (its NVMe tier is under ./mooncake-data/nvme); with --dram_only the
// object is gone after a restart.
func TestStandaloneKeepsItsCache(t *testing.T) {
	bin := buildBinary(t)
	run := func(t *testing.T, extra ...string) {
		dir := t.TempDir()
		value := filepath.Join(dir, "v")
		if err := os.WriteFile(value, []byte("kept across restarts"), 0o644); err != nil {
			t.Fatal(err)
		}
		p := freePorts(t, 2)
		args := append([]string{"standalone", "--rpc_port", strconv.Itoa(p[0]), "--metrics_port", strconv.Itoa(p[1])}, extra...)
		env := []string{envMaster + "=" + hostPort(p[0])}
		start := func() *proc {
			sa := startProcIn(t, dir, nil, "standalone", bin, args...)
			sa.mustReady()
			return sa
		}
		sa := start()
		if r := runBin(t, bin, env, nil, "put", "k", value); r.code != 0 {
			t.Fatalf("put: exit %d %s", r.code, r.stderr)
		}
		if err := sa.term(60 * time.Second); err != nil {
			t.Fatalf("SIGTERM: %v", err)
		}
		start()
		r := runBin(t, bin, env, nil, "get", "k")
		if len(extra) == 0 {
			if r.code != 0 || r.stdout != "kept across restarts" {
				t.Fatalf("get after restart: exit %d %q %s", r.code, r.stdout, r.stderr)
			}
			if _, err := os.Stat(filepath.Join(dir, "mooncake-data", standaloneNVMeSubdir, base.DefaultClusterID, defaultStandaloneWorker)); err != nil {
				t.Fatalf("the NVMe tier is not under the data dir: %v", err)
			}
			return
		}
		if r.code == 0 {
			t.Fatalf("get after a --dram_only restart found %q; want the object gone", r.stdout)
		}
	}
	t.Run("default", func(t *testing.T) { run(t) })
	t.Run("dram_only", func(t *testing.T) { run(t, "--dram_only") })
}

// TestStandaloneBanner: the start banner says where the NVMe tier is, how large, and whether
// objects outlive a restart.
func TestStandaloneBanner(t *testing.T) {
	f := func(s workerSettings, want string) {
		t.Helper()
		if got := nvmeDesc(s); got != want {
			t.Fatalf("nvmeDesc(%+v) = %q, want %q", s, got, want)
		}
	}
	f(workerSettings{}, "none (DRAM only, persistence cache: objects are lost on a restart)")
	f(workerSettings{RootFSDir: "/d/nvme", SSDCapacity: 5 << 30}, "/d/nvme, up to 5.0 GiB (persistence spill: objects kept across restarts)")
	f(workerSettings{RootFSDir: "/d/nvme", Persistence: base.PersistenceDurable}, "/d/nvme, up to 90% of the free disk (persistence durable: objects kept across restarts)")
}
