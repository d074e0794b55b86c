package client_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mooncake-go/mooncake/client"
	"github.com/mooncake-go/mooncake/internal/base"
)

// These tests run real servers (one master, real workers on 127.0.0.1) and take workers away
// from the client only: client.RedirectWorker sends its calls for a worker to a closed port
// (refused) or to a listener that never answers (hung), while the master still places and
// looks up objects there, as it does in the moments after a worker dies.

// deadAddr returns an address nothing listens on (a port bound, then closed).
func deadAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

// hungAddr returns the address of a listener that accepts connections and never answers.
func hungAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var (
		mu    sync.Mutex
		conns []net.Conn
		done  = make(chan struct{})
	)
	go func() {
		defer close(done)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		<-done
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			c.Close()
		}
	})
	return ln.Addr().String()
}

// startReplace starts a master and n workers (w1..wn) and a client with timeout (and
// cfg's other settings).
func startReplace(t *testing.T, n int, timeout time.Duration, cfg client.Config) (*inproc, *client.Client) {
	t.Helper()
	ip := startInproc(t, n, 8<<20)
	cfg.Timeout = timeout
	return ip, connectWith(t, ip, cfg)
}

// replicasOf returns the workers holding key.
func replicasOf(t *testing.T, c *client.Client, key string) []base.WorkerID {
	t.Helper()
	info, err := c.Describe(context.Background(), key)
	if err != nil {
		t.Fatal(err)
	}
	var ids []base.WorkerID
	for _, r := range info.Replicas {
		ids = append(ids, r.WorkerID)
	}
	return ids
}

func checkGet(t *testing.T, c *client.Client, key string, want []byte) {
	t.Helper()
	got, err := c.Get(context.Background(), key)
	if err != nil {
		t.Fatalf("get %q: %v", key, err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("get %q: %d bytes differ from the %d put", key, len(got), len(want))
	}
}

// TestPutReplacedWhenWorkerRefuses: the master places a put first on w1 (preferred), whose
// connection is refused; the put is revoked and placed again without w1, and succeeds. So do
// PutFrom, a two-replica put, an upsert and a value large enough to be striped.
func TestPutReplacedWhenWorkerRefuses(t *testing.T) {
	ip, c := startReplace(t, 3, 20*time.Second, client.Config{})
	client.RedirectWorker(c, ip.workers[0].Addr(), deadAddr(t))
	ctx := context.Background()
	on := func(replicas int) client.ReplicateConfig {
		return client.ReplicateConfig{Replicas: replicas, PreferredWorker: "w1"}
	}
	notOnW1 := func(key string) {
		t.Helper()
		for _, id := range replicasOf(t, c, key) {
			if id == "w1" {
				t.Fatalf("%q has a replica on w1, whose write failed", key)
			}
		}
	}

	v := val(64<<10, 1)
	if err := c.Put(ctx, "put", v, on(1)); err != nil {
		t.Fatalf("put with its first worker refusing: %v", err)
	}
	checkGet(t, c, "put", v)
	notOnW1("put")

	big := val(5<<20, 2) // over the stripe threshold: striped writes, then a Commit
	if err := c.PutFrom(ctx, "put_from", bytes.NewReader(big), int64(len(big)), on(1)); err != nil {
		t.Fatalf("put_from with its first worker refusing: %v", err)
	}
	checkGet(t, c, "put_from", big)
	notOnW1("put_from")

	if err := c.Put(ctx, "two", v, on(2)); err != nil {
		t.Fatalf("two-replica put with one worker refusing: %v", err)
	}
	if ids := replicasOf(t, c, "two"); len(ids) != 2 {
		t.Fatalf("two-replica put has replicas %v", ids)
	}
	notOnW1("two")

	v2 := val(32<<10, 3)
	up := on(1)
	up.Upsert = true
	if err := c.Put(ctx, "put", v2, up); err != nil {
		t.Fatalf("upsert with its first worker refusing: %v", err)
	}
	checkGet(t, c, "put", v2)
	notOnW1("put")
}

// TestPutReplacedWhenWorkerHangs: the first placed worker accepts the connection and never
// answers; the write attempt ends at half the put's time left, and the put is placed again.
func TestPutReplacedWhenWorkerHangs(t *testing.T) {
	ip, c := startReplace(t, 2, 3*time.Second, client.Config{})
	client.RedirectWorker(c, ip.workers[0].Addr(), hungAddr(t))
	v := val(4096, 4)
	if err := c.Put(context.Background(), "k", v, client.ReplicateConfig{PreferredWorker: "w1"}); err != nil {
		t.Fatalf("put with its first worker hung: %v", err)
	}
	checkGet(t, c, "k", v)
}

// TestPutNoWorkerLeft: with every worker refusing, a put fails with base.ErrNoSpace saying no
// worker with room is left after excluding them, before its timeout; a two-replica put fails
// once too few are left; upserts, put_from and batch items the same.
func TestPutNoWorkerLeft(t *testing.T) {
	ip, c := startReplace(t, 3, 20*time.Second, client.Config{})
	for _, w := range ip.workers {
		client.RedirectWorker(c, w.Addr(), deadAddr(t))
	}
	ctx := context.Background()
	check := func(what string, err error) {
		t.Helper()
		if err == nil {
			t.Fatalf("%s succeeded with every worker refusing", what)
		}
		if !errors.Is(err, base.ErrNoSpace) || !strings.Contains(err.Error(), "no worker with room left after excluding") ||
			errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("%s: %v; want NO_SPACE, no worker with room left", what, err)
		}
	}
	err := c.Put(ctx, "k", val(100, 5), client.ReplicateConfig{})
	check("put", err)
	for _, w := range []string{"w1", "w2", "w3"} {
		if !strings.Contains(err.Error(), w) {
			t.Fatalf("the error does not name %s: %v", w, err)
		}
	}
	check("two-replica put", c.Put(ctx, "k2", val(100, 5), client.ReplicateConfig{Replicas: 2}))
	check("upsert", c.Put(ctx, "k", val(100, 5), client.ReplicateConfig{Upsert: true}))
	check("put_from", c.PutFrom(ctx, "k3", bytes.NewReader(val(100, 5)), 100, client.ReplicateConfig{}))
	for i, err := range c.BatchPut(ctx, []string{"b1", "b2", "b3"}, [][]byte{val(10, 1), val(20, 2), val(30, 3)}, client.ReplicateConfig{}) {
		check(fmt.Sprintf("batch put item %d", i), err)
	}
	if ok, err := c.Exists(ctx, "k"); err != nil || ok {
		t.Fatalf("exists after a failed put = %v, %v", ok, err)
	}
}

// TestBatchPutReplaced: every item of a batch is placed first on a refusing worker; each is
// placed again and the batch commits; a batch of upserts does the same.
func TestBatchPutReplaced(t *testing.T) {
	ip, c := startReplace(t, 3, 20*time.Second, client.Config{})
	client.RedirectWorker(c, ip.workers[0].Addr(), deadAddr(t))
	ctx := context.Background()
	keys := make([]string, 12)
	values := make([][]byte, len(keys))
	for i := range keys {
		keys[i], values[i] = fmt.Sprintf("b%02d", i), val(1000+i*100, byte(i))
	}
	rc := client.ReplicateConfig{PreferredWorker: "w1"}
	for i, err := range c.BatchPut(ctx, keys, values, rc) {
		if err != nil {
			t.Fatalf("batch put item %d with its first worker refusing: %v", i, err)
		}
	}
	rc.Upsert = true
	for i := range values {
		values[i] = val(500+i, byte(100+i))
	}
	for i, err := range c.BatchPut(ctx, keys, values, rc) {
		if err != nil {
			t.Fatalf("batch upsert item %d with its first worker refusing: %v", i, err)
		}
	}
	for i, k := range keys {
		checkGet(t, c, k, values[i])
	}
}

// TestGetDeadFirstReplica: a two-replica object whose first tried replica's worker refuses,
// or hangs, is read from the second; with both workers gone the get reports
// base.ErrObjectNotFound.
func TestGetDeadFirstReplica(t *testing.T) {
	for _, hang := range []bool{false, true} {
		t.Run(fmt.Sprintf("hang=%t", hang), func(t *testing.T) {
			// Over TCP: a client on the workers' host would read the replicas' bytes from
			// their shared arenas (verified), with no call the redirection could fail.
			ip, c := startReplace(t, 2, 3*time.Second, client.Config{DisableSharedMemory: true})
			v := val(64<<10, 6)
			if err := c.Put(context.Background(), "k", v, client.ReplicateConfig{Replicas: 2}); err != nil {
				t.Fatal(err)
			}
			// w1's replica is tried first: w2 looks busier to this client.
			client.AddReadLoad(c, ip.workers[1].Addr(), 100)
			gone := deadAddr(t)
			if hang {
				gone = hungAddr(t)
			}
			client.RedirectWorker(c, ip.workers[0].Addr(), gone)
			checkGet(t, c, "k", v)

			client.RedirectWorker(c, ip.workers[1].Addr(), deadAddr(t))
			if _, err := c.Get(context.Background(), "k"); !errors.Is(err, base.ErrObjectNotFound) {
				t.Fatalf("get with every replica's worker gone: %v; want not found", err)
			}
		})
	}
}
