package client_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/mooncake-go/mooncake/client"
	"github.com/mooncake-go/mooncake/internal/base"
	"github.com/mooncake-go/mooncake/internal/testutil"
	"github.com/mooncake-go/mooncake/server/worker"
)

// TestSharedMemoryGet: a client on the worker's host reads through the shared arena by
// default, over TCP when asked to, and over TCP from a worker whose arena is private; the
// bytes are the same every way.
func TestSharedMemoryGet(t *testing.T) {
	ip := startInproc(t, 1, 64<<20)
	shm := connect(t, ip)
	tcp := connectWith(t, ip, client.Config{DisableSharedMemory: true})
	ctx := context.Background()
	sizes := []int{1, 4096, 1 << 20, 9 << 20} // the last one written striped
	for i, n := range sizes {
		key := fmt.Sprintf("k%d", i)
		v := val(n, byte(i))
		if err := shm.Put(ctx, key, v, client.ReplicateConfig{}); err != nil {
			t.Fatal(err)
		}
		for _, c := range []*client.Client{shm, tcp} {
			got, err := c.Get(ctx, key)
			if err != nil || !bytes.Equal(got, v) {
				t.Fatalf("get %d bytes: %v", n, err)
			}
			buf := make([]byte, n+10)
			if m, err := c.GetInto(ctx, key, buf); err != nil || m != n || !bytes.Equal(buf[:m], v) {
				t.Fatalf("GetInto %d bytes: %d %v", n, m, err)
			}
		}
	}
	want := int64(2 * len(sizes))
	if rs := shm.ReadStats(); rs.SharedMemory != want || rs.TCP != 0 {
		t.Fatalf("default client read paths %+v, want %d through shared memory", rs, want)
	}
	if rs := tcp.ReadStats(); rs.SharedMemory != 0 || rs.TCP != want {
		t.Fatalf("DisableSharedMemory client read paths %+v, want %d over TCP", rs, want)
	}

	// Concurrent gets of the same objects through one mapping.
	inParallel(t, 8, func(g int) error {
		for j := range 20 {
			i := (g + j) % len(sizes)
			got, err := shm.Get(ctx, fmt.Sprintf("k%d", i))
			if err != nil || !bytes.Equal(got, val(sizes[i], byte(i))) {
				return fmt.Errorf("concurrent get k%d: %v", i, err)
			}
		}
		return nil
	})
}

func TestSharedMemoryPrivateArena(t *testing.T) {
	ip := startInprocWith(t, 1, 16<<20, func(cfg *worker.Config) { cfg.PrivateArena = true })
	c := connect(t, ip)
	ctx := context.Background()
	v := val(100_000, 7)
	if err := c.Put(ctx, "k", v, client.ReplicateConfig{}); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		if got, err := c.Get(ctx, "k"); err != nil || !bytes.Equal(got, v) {
			t.Fatalf("get: %v", err)
		}
	}
	if rs := c.ReadStats(); rs.SharedMemory != 0 || rs.TCP != 3 {
		t.Fatalf("read paths %+v, want 3 over TCP", rs)
	}
}

// TestSharedMemoryWorkerRestart restarts the worker behind the same address with a new arena
// (its objects come back from its NVMe tier): the client notices the arena changed, reads
// over TCP once, maps the new arena, and never returns bytes of the old mapping.
func TestSharedMemoryWorkerRestart(t *testing.T) {
	root := t.TempDir()
	ip := startInprocWith(t, 1, 16<<20, func(cfg *worker.Config) { cfg.RootFSDir = root })
	c := connect(t, ip)
	ctx := context.Background()
	vals := map[string][]byte{"a": val(300_000, 1), "b": val(70_000, 2)}
	for k, v := range vals {
		if err := c.Put(ctx, k, v, client.ReplicateConfig{}); err != nil {
			t.Fatal(err)
		}
		if got, err := c.Get(ctx, k); err != nil || !bytes.Equal(got, v) {
			t.Fatalf("get %s: %v", k, err)
		}
	}
	before := c.ReadStats()
	if before.SharedMemory != 2 {
		t.Fatalf("read paths before the restart %+v", before)
	}

	old := ip.workers[0]
	addr := old.Addr()
	sctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := old.Shutdown(sctx); err != nil { // spills both objects to NVMe
		t.Fatal(err)
	}
	w, err := worker.NewWorker(worker.Config{WorkerID: "w1", MasterAddresses: []string{ip.master.Addr()},
		Address: addr, GlobalSegmentSize: 16 << 20, RootFSDir: root, Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	ip.workers[0] = w
	waitActive(t, c, 1)

	for round := range 3 {
		for k, v := range vals {
			if got, err := c.Get(ctx, k); err != nil || !bytes.Equal(got, v) {
				t.Fatalf("round %d: get %s after the restart: %v", round, k, err)
			}
		}
	}
	after := c.ReadStats()
	if after.SharedMemory <= before.SharedMemory {
		t.Fatalf("no read through the new arena: before %+v, after %+v", before, after)
	}
	if after.SharedMemory+after.TCP != before.SharedMemory+6 {
		t.Fatalf("read paths %+v after 6 gets from %+v", after, before)
	}
}

// TestSharedMemoryReleasesPins: gets through shared memory (verified: batched releases sent
// in the background; unverified: a confirmed release each) leave nothing pinned on the worker.
func TestSharedMemoryReleasesPins(t *testing.T) {
	for _, skip := range []bool{false, true} {
		t.Run(fmt.Sprintf("skip_verify=%v", skip), func(t *testing.T) {
			ip := startInproc(t, 1, 16<<20)
			c := connectWith(t, ip, client.Config{SkipChecksumVerify: skip})
			ctx := context.Background()
			for i := range 12 {
				key := fmt.Sprintf("a%d", i)
				v := val(100_000+i, byte(i))
				if err := c.Put(ctx, key, v, client.ReplicateConfig{}); err != nil {
					t.Fatal(err)
				}
				for range 3 {
					if got, err := c.Get(ctx, key); err != nil || !bytes.Equal(got, v) {
						t.Fatalf("get %s: %v", key, err)
					}
				}
			}
			if rs := c.ReadStats(); rs.SharedMemory != 36 {
				t.Fatalf("read paths %+v", rs)
			}
			w := ip.workers[0]
			if skip && w.ShmLeases() != 0 {
				t.Fatalf("%d leases held after confirmed releases", w.ShmLeases())
			}
			// Releases are batched in the background.
			testutil.WaitFor(t, "every lease released", 10*time.Second, func() error {
				if n := w.ShmLeases(); n != 0 {
					return fmt.Errorf("%d leases still held (never released?)", n)
				}
				return nil
			})
		})
	}
}

// clientArenaMappings counts this process's read-only shared mappings of worker arenas (what
// a client maps; a worker's own mapping is writable).
func clientArenaMappings(t *testing.T) int {
	t.Helper()
	b, err := os.ReadFile("/proc/self/maps")
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) >= 6 && f[1] == "r--s" && strings.Contains(line, "mooncake-arena") {
			n++
		}
	}
	return n
}

// TestSharedMemoryDeadWorkerUnmapped: a client does not keep the arena of a worker that died
// mapped (which would keep all of that memory allocated): the first get that cannot reach the
// worker unmaps it, and the get fails over to the other replica.
func TestSharedMemoryDeadWorkerUnmapped(t *testing.T) {
	ip := startInproc(t, 2, 16<<20)
	c := connect(t, ip)
	ctx := context.Background()
	before := clientArenaMappings(t)
	v := val(200_000, 5)
	if err := c.Put(ctx, "k", v, client.ReplicateConfig{Replicas: 2}); err != nil {
		t.Fatal(err)
	}
	// Read until both workers' arenas are mapped (the replica order is random).
	for i := 0; clientArenaMappings(t) < before+2; i++ {
		if i == 200 {
			t.Fatalf("after %d gets only %d arenas mapped", i, clientArenaMappings(t)-before)
		}
		if got, err := c.Get(ctx, "k"); err != nil || !bytes.Equal(got, v) {
			t.Fatalf("get: %v", err)
		}
	}
	sctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	dead := ip.workers[0]
	if err := dead.Shutdown(sctx); err != nil {
		t.Fatal(err)
	}
	// Until a get tries the dead worker, its arena stays mapped; gets keep succeeding from the
	// other replica while they do.
	for i := 0; clientArenaMappings(t) > before+1; i++ {
		if i == 200 {
			t.Fatalf("the dead worker's arena is still mapped after %d gets", i)
		}
		if got, err := c.Get(ctx, "k"); err != nil || !bytes.Equal(got, v) {
			t.Fatalf("get with a dead replica: %v", err)
		}
	}
}

// TestSharedMemoryUnpinned: a repeated get of the same version copies from where the first
// get's pin found it, with no call to the worker; it stops the moment the object changes on
// the worker (another client's upsert: the next get returns the new bytes), and the worker
// hears of the unpinned reads (ShmTouch).
func TestSharedMemoryUnpinned(t *testing.T) {
	ip := startInprocWith(t, 1, 16<<20, func(cfg *worker.Config) { cfg.MetricsAddress = "127.0.0.1:0" })
	reader, writer := connect(t, ip), connect(t, ip)
	ctx := context.Background()
	v1, v2 := val(70_000, 1), val(70_000, 2)
	if err := writer.Put(ctx, "k", v1, client.ReplicateConfig{}); err != nil {
		t.Fatal(err)
	}
	get := func(want []byte) {
		t.Helper()
		if got, err := reader.Get(ctx, "k"); err != nil || !bytes.Equal(got, want) {
			t.Fatalf("get: %v (%d bytes)", err, len(got))
		}
	}
	for range 4 {
		get(v1)
	}
	if rs := reader.ReadStats(); rs.SharedMemory != 4 || rs.SharedMemoryUnpinned != 3 {
		t.Fatalf("read paths %+v, want 4 through shared memory, 3 of them unpinned", rs)
	}
	if err := writer.Put(ctx, "k", v2, client.ReplicateConfig{Upsert: true}); err != nil {
		t.Fatal(err)
	}
	// The replaced copy's generation moved: the next get pins. The worker may still serve v1
	// (until the master's drop of it arrives: docs/tier.md, "Upserts"), through a pin as over
	// TCP; never a mix, and v2 once v1 is let go or the cached lookup expired.
	if rs := reader.ReadStats(); rs.SharedMemoryUnpinned != 3 {
		t.Fatalf("read paths %+v before the get after the upsert", rs)
	}
	awaitV2(t, reader, "k", v1, v2)
	before := reader.ReadStats()
	get(v2)
	get(v2) // unpinned, at the new copy
	if rs := reader.ReadStats(); rs.SharedMemory != before.SharedMemory+2 || rs.SharedMemoryUnpinned < before.SharedMemoryUnpinned+1 {
		t.Fatalf("read paths %+v after %+v: want 2 through shared memory, the last unpinned", rs, before)
	}
	if err := writer.Remove(ctx, "k"); err != nil {
		t.Fatal(err)
	}
	// The reader's cached lookup still names the removed version; the worker dropped it, so
	// the get misses rather than copying the old bytes.
	testutil.WaitFor(t, "the removed object missed", 10*time.Second, func() error {
		_, err := reader.Get(ctx, "k")
		switch {
		case errors.Is(err, base.ErrObjectNotFound):
			return nil
		case err != nil:
			t.Fatalf("get after remove: %v", err)
		}
		return errors.New("the removed object is still read")
	})

	// The unpinned reads reached the worker as touches.
	testutil.WaitFor(t, "a ShmTouch at the worker", 10*time.Second, func() error {
		if workerOpCount(t, ip.workers[0].MetricsAddr(), "shm_touch") == 0 {
			return errors.New("no ShmTouch reached the worker")
		}
		return nil
	})
}

// workerOpCount reads worker_requests_total{op=op} from a worker's metrics endpoint.
func workerOpCount(t *testing.T, addr, op string) float64 {
	t.Helper()
	return workerMetric(t, addr, `worker_requests_total{op="`+op+`"}`)
}

// TestGetIntoNoWait: the no-wait get succeeds exactly when a get would need no call (a
// cached lookup and a shared-memory copy the worker pinned before, unchanged since), and
// otherwise reads nothing, leaving the caller to GetInto.
func TestGetIntoNoWait(t *testing.T) {
	ip := startInproc(t, 1, 16<<20)
	reader, writer := connect(t, ip), connect(t, ip)
	tcp := connectWith(t, ip, client.Config{DisableSharedMemory: true})
	ctx := context.Background()
	v1, v2 := val(50_000, 1), val(50_000, 2)
	if err := writer.Put(ctx, "k", v1, client.ReplicateConfig{}); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 60_000)
	if n, ok := reader.GetIntoNoWait("k", buf); ok {
		t.Fatalf("no-wait get before any lookup: %d", n)
	}
	for _, c := range []*client.Client{reader, tcp} {
		if _, err := c.Get(ctx, "k"); err != nil {
			t.Fatal(err)
		}
	}
	if n, ok := reader.GetIntoNoWait("k", buf); !ok || n != len(v1) || !bytes.Equal(buf[:n], v1) {
		t.Fatalf("no-wait get after a get: %d %v", n, ok)
	}
	if _, ok := reader.GetIntoNoWait("k", buf[:100]); ok {
		t.Fatal("no-wait get into a short buffer")
	}
	if _, ok := tcp.GetIntoNoWait("k", buf); ok {
		t.Fatal("no-wait get with shared memory disabled")
	}
	if err := writer.Put(ctx, "k", v2, client.ReplicateConfig{Upsert: true}); err != nil {
		t.Fatal(err)
	}
	if n, ok := reader.GetIntoNoWait("k", buf); ok {
		t.Fatalf("no-wait get of a replaced object: %d bytes", n)
	}
	awaitV2(t, reader, "k", v1, v2)
	if n, ok := reader.GetIntoNoWait("k", buf); !ok || !bytes.Equal(buf[:n], v2) {
		t.Fatalf("no-wait get of the new version: %v", ok)
	}
}

// TestBatchGetNoWait: a batch caches its lookups as single gets do, so a repeated batch
// copies every object without a call; an object another client replaced in between is read
// anew (its new bytes), the others still without a call.
func TestBatchGetNoWait(t *testing.T) {
	ip := startInproc(t, 1, 16<<20)
	reader, writer := connect(t, ip), connect(t, ip)
	ctx := context.Background()
	keys := []string{"b0", "b1", "b2", "b3"}
	bufs := make([][]byte, len(keys))
	for i, k := range keys {
		if err := writer.Put(ctx, k, val(30_000, byte(i)), client.ReplicateConfig{}); err != nil {
			t.Fatal(err)
		}
		bufs[i] = make([]byte, 30_000)
	}
	batch := func(want func(i int) []byte) {
		t.Helper()
		_, errs := reader.BatchGetInto(ctx, keys, bufs)
		for i, err := range errs {
			if err != nil || !bytes.Equal(bufs[i], want(i)) {
				t.Fatalf("item %d: %v", i, err)
			}
		}
	}
	orig := func(i int) []byte { return val(30_000, byte(i)) }
	batch(orig) // maps the arena (reads that race with the mapping go over TCP)
	batch(orig) // pins what the first one read over TCP
	before := reader.ReadStats()
	batch(orig)
	if rs := reader.ReadStats(); rs.SharedMemoryUnpinned != before.SharedMemoryUnpinned+4 {
		t.Fatalf("read paths %+v after %+v: want 4 more unpinned", rs, before)
	}
	if err := writer.Put(ctx, "b2", val(30_000, 9), client.ReplicateConfig{Upsert: true}); err != nil {
		t.Fatal(err)
	}
	// The replaced object is read anew: its old bytes while the reader's cached lookup and
	// the worker's copy of them last (the staleness single gets have), then its new ones;
	// never a mix, and the others still without a call.
	testutil.WaitFor(t, "a batch reads b2's upsert", 30*time.Second, func() error {
		_, errs := reader.BatchGetInto(ctx, keys, bufs)
		for i, err := range errs {
			if err != nil {
				t.Fatalf("item %d: %v", i, err)
			}
			if i != 2 && !bytes.Equal(bufs[i], orig(i)) {
				t.Fatalf("item %d: wrong bytes", i)
			}
		}
		switch {
		case bytes.Equal(bufs[2], val(30_000, 9)):
			return nil
		case bytes.Equal(bufs[2], orig(2)):
			return errors.New("still reading b2's old version")
		}
		t.Fatal("item 2: neither version's bytes")
		return nil
	})
	batch(func(i int) []byte { // pins b2's new version where it was read over TCP
		if i == 2 {
			return val(30_000, 9)
		}
		return orig(i)
	})
	before = reader.ReadStats()
	batch(func(i int) []byte {
		if i == 2 {
			return val(30_000, 9)
		}
		return orig(i)
	})
	if rs := reader.ReadStats(); rs.SharedMemoryUnpinned != before.SharedMemoryUnpinned+4 {
		t.Fatalf("read paths %+v after %+v: want 4 more unpinned", rs, before)
	}
}

// awaitV2 gets key until it reads v2, failing on anything but v1 or v2 (an upsert's old
// version may be read until its worker lets it go) or after a bounded wait.
func awaitV2(t *testing.T, c *client.Client, key string, v1, v2 []byte) {
	t.Helper()
	testutil.WaitFor(t, "get "+key+" reads the upsert", 30*time.Second, func() error {
		got, err := c.Get(context.Background(), key)
		if err != nil || !(bytes.Equal(got, v1) || bytes.Equal(got, v2)) {
			t.Fatalf("get %s after the upsert: %v (%d bytes)", key, err, len(got))
		}
		if !bytes.Equal(got, v2) {
			return errors.New("still the old version")
		}
		return nil
	})
}
