package server

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/mooncake-go/mooncake/client"
	"github.com/mooncake-go/mooncake/internal/base"
	"github.com/mooncake-go/mooncake/internal/testutil"
)

// TestGetsWithoutLookups: a get that knows its placement goes straight to the worker. A
// client knows it after its own put or batch put (the commit's placement is seeded into its
// lookup cache) and after an exists or batch exists (the master answers with the
// placements), so a get after either asks the master nothing: no Lookup or BatchLookup
// reaches it. A get of a key the client knows nothing about still looks it up, a put that
// failed seeds nothing, and another client's remove is still seen (the worker refuses the
// removed version, the get looks up again).
func TestGetsWithoutLookups(t *testing.T) {
	c := startMasters(t, 1, nil)
	c.addWorker("", nil)
	c.addWorker("", nil)
	ctx := context.Background()
	// The clients' debug lines say why a get looked a key up (a read that failed, and how):
	// a failure below prints them.
	var clientLog testutil.SyncBuffer
	connect := func() *client.Client {
		cli, err := client.Connect(ctx, client.Config{MasterAddresses: c.masterAddrs(), Timeout: 10 * time.Second,
			Logger:         slog.New(slog.NewTextHandler(&clientLog, &slog.HandlerOptions{Level: slog.LevelDebug})),
			LookupCacheTTL: time.Hour}) // no expiry within the test
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cli.Close() })
		return cli
	}
	hooks := c.masters[0].TestHooks()
	lookups := func() uint64 {
		n, _ := hooks.Calls("get_replica_list")
		b, _ := hooks.Calls("batch_get_replica_list")
		return n + b
	}
	noLookups := func(what string, fn func() error) {
		t.Helper()
		before := lookups()
		if err := fn(); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		if n := lookups() - before; n != 0 {
			var why []string
			for _, l := range strings.Split(clientLog.String(), "\n") {
				if strings.Contains(l, "looking up again") || strings.Contains(l, "read failed") {
					why = append(why, l)
				}
			}
			t.Fatalf("%s: %d lookups reached the master, want none; the clients' reasons:\n%s", what, n, strings.Join(why, "\n"))
		}
	}
	val := func(i int) []byte { return bytes.Repeat([]byte{byte(i)}, 4096+i) }
	check := func(cli *client.Client, key string, want []byte) error {
		got, err := cli.Get(ctx, key)
		if err == nil && !bytes.Equal(got, want) {
			err = fmt.Errorf("get %s: wrong bytes", key)
		}
		return err
	}

	writer := connect()
	if err := writer.Put(ctx, "single", val(1), client.ReplicateConfig{Replicas: 2}); err != nil {
		t.Fatal(err)
	}
	keys := []string{"batch/0", "batch/1", "batch/2"}
	for i, err := range writer.BatchPut(ctx, keys, [][]byte{val(10), val(11), val(12)}, client.ReplicateConfig{}) {
		if err != nil {
			t.Fatalf("batch put %s: %v", keys[i], err)
		}
	}
	noLookups("the writer's gets of its own puts", func() error {
		for i, k := range append([]string{"single"}, keys...) {
			want := val(1)
			if i > 0 {
				want = val(9 + i)
			}
			for range 3 { // both replicas of "single", in random order
				if err := check(writer, k, want); err != nil {
					return err
				}
			}
		}
		return nil
	})
	// A put refused (the key exists) seeds nothing: the writer's next get still reads the
	// committed object.
	if err := writer.Put(ctx, "single", val(2), client.ReplicateConfig{}); !errors.Is(err, base.ErrObjectAlreadyExists) {
		t.Fatalf("put of an existing key: %v", err)
	}
	if err := check(writer, "single", val(1)); err != nil {
		t.Fatal(err)
	}

	reader := connect()
	before := lookups()
	if err := check(reader, "batch/0", val(10)); err != nil { // knows nothing: looks up
		t.Fatal(err)
	}
	if lookups() == before {
		t.Fatal("a get of an unknown key did not look it up")
	}
	noLookups("batch exists, then gets", func() error {
		ex, err := reader.BatchExists(ctx, []string{"batch/1", "missing", "batch/2"})
		if err != nil {
			return err
		}
		if !ex[0] || ex[1] || !ex[2] {
			return fmt.Errorf("batch exists %v, want [true false true]", ex)
		}
		if err := check(reader, "batch/1", val(11)); err != nil {
			return err
		}
		return check(reader, "batch/2", val(12))
	})
	noLookups("exists, then get", func() error {
		if ok, err := reader.Exists(ctx, "single"); err != nil || !ok {
			return fmt.Errorf("exists single: %v %v", ok, err)
		}
		return check(reader, "single", val(1))
	})
	if ok, err := reader.Exists(ctx, "missing"); err != nil || ok {
		t.Fatalf("exists missing: %v %v", ok, err)
	}
	if _, err := reader.Get(ctx, "missing"); !errors.Is(err, base.ErrObjectNotFound) {
		t.Fatalf("get missing: %v", err)
	}

	// The writer removes what the reader knows the placement of: once the worker has let
	// the removed version go, the reader's get asks the master again and finds nothing.
	if err := writer.Remove(ctx, "batch/1"); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the reader sees the remove", func() bool {
		_, err := reader.Get(ctx, "batch/1")
		return errors.Is(err, base.ErrObjectNotFound)
	})
}
