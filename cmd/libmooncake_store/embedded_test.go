package main

import (
	"bytes"
	"context"
	"path/filepath"
	"testing"

	"github.com/mooncake-go/mooncake/client"
	"github.com/mooncake-go/mooncake/internal/testutil"
)

// TestEmbeddedLocalRead drives the library's Go side (no C) against a standalone process: a
// store set up with a segment reads the objects its embedded worker holds through the
// worker's shared arena (a memory copy, no TCP transfer), and close unmounts the worker: when
// it returns the worker is not listed and its object is gone.
func TestEmbeddedLocalRead(t *testing.T) {
	s, master := standaloneStore(t, 32<<20)
	cl, err := s.client()
	if err != nil {
		t.Fatal(err)
	}
	id := s.worker.ID()
	rc, err := s.replicateConfig(cl, rcArgs{preferred: []string{s.getHostname()}})
	if err != nil || rc.PreferredWorker != id {
		t.Fatalf("the embedded worker's address %s resolves to %q, want %s: %v", s.getHostname(), rc.PreferredWorker, id, err)
	}
	ctx := context.Background()
	v := bytes.Repeat([]byte("embedded"), 1<<16)
	if err := cl.Put(ctx, "own", v, rc); err != nil {
		t.Fatal(err)
	}
	before := cl.ReadStats()
	buf := make([]byte, len(v))
	if n, err := cl.GetInto(ctx, "own", buf); err != nil || n != len(v) || !bytes.Equal(buf, v) {
		t.Fatalf("get: %d %v", n, err)
	}
	if after := cl.ReadStats(); after.SharedMemory != before.SharedMemory+1 || after.TCP != before.TCP {
		t.Fatalf("a read of the embedded worker's object took TCP: %+v -> %+v", before, after)
	}

	s.close()
	other, err := client.Connect(ctx, client.Config{MasterAddresses: []string{master}})
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	// close is an unmount: no waiting for the leader to find the worker gone.
	st, err := other.Status(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range st.Workers {
		if w.ID == string(id) {
			t.Fatalf("the closed store's worker %s is still listed (%s)", id, w.State)
		}
	}
	if ok, err := other.Exists(ctx, "own"); ok || err != nil {
		t.Fatalf("exists of the closed store's object: %t, %v; want false at once", ok, err)
	}
}

// standaloneStore starts the binary's standalone and returns a store set up on it with an
// embedded segment of segment bytes (0: a pure client), and the master's address. The store
// is closed and its handle dropped when the test ends. Skipped with -short.
func standaloneStore(t *testing.T, segment uint64) (*store, string) {
	t.Helper()
	if testing.Short() {
		t.Skip("runs the binary; skipped with -short")
	}
	dir := t.TempDir()
	bin := testutil.BuildMooncake(t, dir)
	master, _ := testutil.StartStandalone(t, bin, filepath.Join(dir, "data"), "256MiB", "--client_ttl", "60s")
	h := newHandle()
	s, err := lookupHandle(h)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { dropHandle(h).close() })
	env := func(string) string { return "" }
	if err := s.setup(setupArgs{localHostname: "127.0.0.1", globalSegmentSize: segment, masterServerAddr: master}, env); err != nil {
		t.Fatal(err)
	}
	return s, master
}
