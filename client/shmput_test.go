package client_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mooncake-go/mooncake/client"
	"github.com/mooncake-go/mooncake/internal/base"
	"github.com/mooncake-go/mooncake/internal/testutil"
	"github.com/mooncake-go/mooncake/server/worker"
)

// shmPutSizes cover one byte, a page, a value in one slot, exactly one 4 MiB slot, and a value
// streamed through three slots.
var shmPutSizes = []int{1, 4096, 1 << 20, 4 << 20, 9<<20 + 17}

// TestSharedMemoryPut: a client on the worker's host puts through the staging area by
// default, over TCP when asked to; a reader over TCP gets the same bytes either way; puts
// in parallel through one area stay intact.
func TestSharedMemoryPut(t *testing.T) {
	ip := startInproc(t, 1, 512<<20) // room for every object: no eviction
	shm := connect(t, ip)
	tcp := connectWith(t, ip, client.Config{DisableSharedMemory: true})
	ctx := context.Background()
	for i, n := range shmPutSizes {
		for _, c := range []*client.Client{shm, tcp} {
			key := fmt.Sprintf("k%d-%p", i, c)
			v := val(n, byte(i))
			if err := c.Put(ctx, key, v, client.ReplicateConfig{}); err != nil {
				t.Fatalf("put %d bytes: %v", n, err)
			}
			if got, err := tcp.Get(ctx, key); err != nil || !bytes.Equal(got, v) {
				t.Fatalf("get of a %d-byte put: %v", n, err)
			}
		}
	}
	want := int64(len(shmPutSizes))
	if ws := shm.WriteStats(); ws != (client.WriteStats{SharedMemory: want}) {
		t.Fatalf("default client write paths %+v, want %d through shared memory", ws, want)
	}
	if ws := tcp.WriteStats(); ws != (client.WriteStats{TCP: want}) {
		t.Fatalf("DisableSharedMemory client write paths %+v, want %d over TCP", ws, want)
	}
	if n := ip.workers[0].ShmPutStages(); n != 1 {
		t.Fatalf("%d staging areas open, want 1 (the default client's)", n)
	}

	// Eight puts in flight through one area (eight slots): every object intact.
	inParallel(t, 8, func(g int) error {
		for j := range 6 {
			n := shmPutSizes[(g+j)%len(shmPutSizes)]
			key := fmt.Sprintf("p%d-%d", g, j)
			v := val(n, byte(g*7+j))
			if err := shm.Put(ctx, key, v, client.ReplicateConfig{Upsert: true}); err != nil {
				return fmt.Errorf("parallel put %s: %w", key, err)
			}
			if got, err := tcp.Get(ctx, key); err != nil || !bytes.Equal(got, v) {
				return fmt.Errorf("parallel get %s: %v", key, err)
			}
		}
		return nil
	})
	if ws := shm.WriteStats(); ws.TCP != 0 || ws.SharedMemory != want+48 {
		t.Fatalf("write paths after the parallel puts: %+v", ws)
	}

	// A new client's first puts, all at once: one opens the area, the others wait for it.
	fresh := connect(t, ip)
	inParallel(t, 8, func(g int) error {
		return fresh.Put(ctx, fmt.Sprintf("first%d", g), val(1<<20, byte(g)), client.ReplicateConfig{})
	})
	if ws := fresh.WriteStats(); ws != (client.WriteStats{SharedMemory: 8}) {
		t.Fatalf("a new client's concurrent first puts: write paths %+v, want 8 through shared memory", ws)
	}
}

// TestSharedMemoryPutSpoiled: a byte changed in the staging slot after the client copied the
// value there is caught by the worker's checksum; the put falls back to TCP and what is
// stored is the value, never the spoiled bytes. Both for a value in one slot and in the
// middle chunk of a streamed one.
func TestSharedMemoryPutSpoiled(t *testing.T) {
	ip := startInproc(t, 1, 64<<20)
	tcp := connectWith(t, ip, client.Config{DisableSharedMemory: true})
	ctx := context.Background()
	for _, c := range []struct {
		size, spoil int // spoil the spoil-th chunk staged (0-based)
	}{{1 << 20, 0}, {9 << 20, 1}} {
		c2 := connect(t, ip)
		var chunks atomic.Int32
		client.SetStagedHook(c2, func(slot []byte) {
			if int(chunks.Add(1))-1 == c.spoil {
				slot[len(slot)/2] ^= 1
			}
		})
		key := fmt.Sprintf("spoiled-%d", c.size)
		v := val(c.size, 3)
		if err := c2.Put(ctx, key, v, client.ReplicateConfig{}); err != nil {
			t.Fatalf("put with a spoiled staging slot: %v", err)
		}
		if got, err := tcp.Get(ctx, key); err != nil || !bytes.Equal(got, v) {
			t.Fatalf("get after a spoiled staged put: %v", err)
		}
		if ws := c2.WriteStats(); ws != (client.WriteStats{TCP: 1, Fallbacks: 1}) {
			t.Fatalf("write paths %+v, want one TCP write after one fallback", ws)
		}
	}
}

// TestSharedMemoryPutClientDies: a client that ends in the middle of a streamed put (one
// chunk staged) leaves nothing visible, and its staging area is reclaimed with its
// connections. (The key stays reserved until the master's put timeout, as after any client
// that dies mid-put.)
func TestSharedMemoryPutClientDies(t *testing.T) {
	ip := startInproc(t, 1, 64<<20)
	other := connect(t, ip)
	ctx := context.Background()
	dying := connect(t, ip)
	client.SetStagedHook(dying, func([]byte) { dying.Close() })
	v := val(9<<20, 5)
	if err := dying.Put(ctx, "k", v, client.ReplicateConfig{}); err == nil {
		t.Fatal("a put whose client closed in the middle succeeded")
	}
	w := ip.workers[0]
	testutil.WaitFor(t, "the closed client's staging areas closed", 30*time.Second, func() error {
		if n := w.ShmPutStages(); n != 0 {
			return fmt.Errorf("%d staging areas still open after their client closed", n)
		}
		return nil
	})
	if _, err := other.Get(ctx, "k"); !errors.Is(err, base.ErrObjectNotFound) {
		t.Fatalf("get of a put whose client died: %v", err)
	}
	if err := other.Put(ctx, "k2", v, client.ReplicateConfig{}); err != nil {
		t.Fatal(err)
	}
	if got, err := other.Get(ctx, "k2"); err != nil || !bytes.Equal(got, v) {
		t.Fatalf("get: %v", err)
	}
	if ws := other.WriteStats(); ws.SharedMemory != 1 {
		t.Fatalf("write paths %+v", ws)
	}
}

// TestSharedMemoryPutRefused: a put the worker refuses outright (durable without an NVMe tier:
// NOT_SUPPORTED, which also means "no such staging area") fails with the worker's error, as
// over TCP, and leaves at most one staging area open; a later put still goes through one.
func TestSharedMemoryPutRefused(t *testing.T) {
	ip := startInproc(t, 1, 16<<20)
	c := connect(t, ip)
	ctx := context.Background()
	for i := range 3 {
		err := c.Put(ctx, fmt.Sprintf("durable%d", i), val(1000, 1), client.ReplicateConfig{Persistence: base.PersistenceDurable})
		if !errors.Is(err, base.ErrNotSupported) {
			t.Fatalf("durable put on a worker without NVMe: %v", err)
		}
		if n := ip.workers[0].ShmPutStages(); n > 1 {
			t.Fatalf("%d staging areas open for one client", n)
		}
	}
	if err := c.Put(ctx, "k", val(1000, 2), client.ReplicateConfig{}); err != nil {
		t.Fatal(err)
	}
	if ws := c.WriteStats(); ws != (client.WriteStats{SharedMemory: 1, Fallbacks: 3}) {
		t.Fatalf("write paths %+v, want 3 refused staged writes and 1 through shared memory", ws)
	}
}

// TestSharedMemoryPutPrivate: a worker started with its memory private (--shared_memory=false)
// opens no staging area; puts go over TCP.
func TestSharedMemoryPutPrivate(t *testing.T) {
	ip := startInprocWith(t, 1, 16<<20, func(cfg *worker.Config) { cfg.PrivateArena = true })
	c := connect(t, ip)
	ctx := context.Background()
	for i := range 3 {
		v := val(100_000, byte(i))
		key := fmt.Sprintf("k%d", i)
		if err := c.Put(ctx, key, v, client.ReplicateConfig{}); err != nil {
			t.Fatal(err)
		}
		if got, err := c.Get(ctx, key); err != nil || !bytes.Equal(got, v) {
			t.Fatalf("get: %v", err)
		}
	}
	if ws := c.WriteStats(); ws != (client.WriteStats{TCP: 3}) {
		t.Fatalf("write paths %+v, want 3 over TCP", ws)
	}
	if n := ip.workers[0].ShmPutStages(); n != 0 {
		t.Fatalf("a private worker opened %d staging areas", n)
	}
}
