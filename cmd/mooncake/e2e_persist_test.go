package main

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mooncake-go/mooncake/client"
	"github.com/mooncake-go/mooncake/internal/base"
	"github.com/mooncake-go/mooncake/internal/testutil"
)

// TestStandaloneRestartPersistence is issue 6's restart check: `mooncake standalone
// --root_fs_dir DIR` with more objects than DRAM holds, SIGTERM, start again, and every object
// reads back with the right checksum, with the figures: 2 GiB of objects through a
// 512 MiB segment, so most objects live on the NVMe tier (about a minute on 2 cores).
func TestStandaloneRestartPersistence(t *testing.T) {
	start := time.Now()
	bin := buildBinary(t)
	t.Logf("built in %v", time.Since(start).Round(time.Millisecond))
	segment, total := "512MiB", int64(2<<30)
	dir := t.TempDir()
	flags := []string{"--global_segment_size", segment, "--root_fs_dir", filepath.Join(dir, "nvme")}
	sa, master := startStandalone(t, bin, filepath.Join(dir, "data"), flags...)
	cl := connectClient(t, master)

	// Objects of 64 KiB-4 MiB until total bytes.
	var sizes []int64
	for sum := int64(0); sum < total; {
		s := logUniformSize(len(sizes), 64<<10, 4<<20)
		sizes = append(sizes, s)
		sum += s
	}
	start = time.Now()
	sums := putObjects(t, cl, "p/", 5, len(sizes), func(i int) int64 { return sizes[i] }, client.ReplicateConfig{})
	t.Logf("put %d objects, %s, through a %s segment in %v", len(sums), base.Bytes(total), segment, time.Since(start).Round(time.Millisecond))
	// And one through the CLI, durable: on NVMe before the put returns.
	env := []string{envMaster + "=" + master}
	if r := runBin(t, bin, env, strings.NewReader("durable via the CLI"), "put", "--persistence", "durable", "cli/durable", "-"); r.code != 0 {
		t.Fatalf("put --persistence durable: %s", r.stderr)
	}
	cl.Close()

	start = time.Now()
	if err := sa.term(2 * time.Minute); err != nil {
		t.Fatalf("SIGTERM: %v", err)
	}
	t.Logf("SIGTERM to exit (spilling DRAM to NVMe): %v", time.Since(start).Round(time.Millisecond))
	start = time.Now()
	// The second run warms DRAM from NVMe in the background while the objects are read.
	_, master = startStandalone(t, bin, filepath.Join(dir, "data"), append(flags, "--warm_up")...)
	t.Logf("restarted in %v", time.Since(start).Round(time.Millisecond))
	cl = connectClient(t, master)
	testutil.WaitFor(t, "the restored keys", 60*time.Second, func() error {
		st, err := cl.Status(context.Background())
		if err != nil {
			return err
		}
		if st.Keys != int64(len(sums))+1 {
			return fmt.Errorf("%d keys, want %d", st.Keys, len(sums)+1)
		}
		return nil
	})
	if r := runBin(t, bin, []string{envMaster + "=" + master}, nil, "get", "cli/durable"); r.code != 0 || r.stdout != "durable via the CLI" {
		t.Fatalf("get cli/durable after restart: exit %d %q %s", r.code, r.stdout, r.stderr)
	}
	start = time.Now()
	checkObjects(t, cl, sums)
	t.Logf("all %d objects read back after SIGTERM and restart in %v", len(sums), time.Since(start).Round(time.Millisecond))
}

// TestClusterDurableWorkerKill is issue 6's cluster check: durable objects (one replica, so
// only that worker's NVMe tier holds them) survive a SIGKILL of their worker: it restarts,
// re-registers its inventory, and every object reads back with the right checksum.
func TestClusterDurableWorkerKill(t *testing.T) {
	bin := buildBinary(t)
	dir := t.TempDir()
	// A long client_ttl: the worker is back long before the master would declare it dead.
	c := startCluster(t, bin, []string{"--client_ttl", "60s"}, 2,
		"--global_segment_size", "128MiB", "--root_fs_dir", filepath.Join(dir, "nvme"))
	cl := connectClient(t, c.masterRPC...)
	waitWorkers(t, cl, 2)
	sums := putObjects(t, cl, "d/", 7, 200, func(i int) int64 { return logUniformSize(i, 64<<10, 1<<20) },
		client.ReplicateConfig{Persistence: base.PersistenceDurable, PreferredWorker: "w1"})

	c.workers[0].kill()
	c.workers[0].restart()
	c.workers[0].mustReady()
	waitWorkers(t, cl, 2)
	checkObjects(t, cl, sums)
	// w1 held them: its inventory was kept, none of them moved.
	st, err := cl.Status(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range st.Workers {
		t.Logf("worker %s: %s, %d objects, DRAM %s, NVMe %s (%d)", w.ID, w.State, w.Objects,
			base.Bytes(w.DRAMUsedBytes), base.Bytes(w.NVMeUsedBytes), w.NVMeObjects)
	}
	t.Logf("all %d durable objects read back after SIGKILL and restart of worker w1", len(sums))
}
