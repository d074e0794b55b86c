package main

import (
	"bytes"
	"context"
	"errors"
	"sync"
	"testing"

	"github.com/mooncake-go/mooncake/client"
	"github.com/mooncake-go/mooncake/internal/base"
)

// TestMountSegments drives segments.go (no C) against a standalone process, under -race: two
// segments mounted at once by a pure client, a put placed on one by its address, that one
// unmounted (its object gone at once, the other segment's kept), an unknown id refused with
// nothing unmounted, and close unmounting the rest.
func TestMountSegments(t *testing.T) {
	notSetUp := &store{}
	if _, _, err := notSetUp.mountSegment(8<<20, "", 0, ""); !errors.Is(err, errNotSetUp) {
		t.Fatalf("mount before setup: %v", err)
	}
	s, master := standaloneStore(t, 0)
	var wg sync.WaitGroup
	ids := make([]base.WorkerID, 2)
	errs := make([]error, 2)
	for i := range ids {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var n int64
			ids[i], n, errs[i] = s.mountSegment(8<<20, "", 0, "cpu")
			if errs[i] == nil && n < 8<<20 {
				t.Errorf("segment %s: %d bytes mounted, want at least %d", ids[i], n, 8<<20)
			}
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("mount %d: %v", i, err)
		}
	}
	cl, err := s.client()
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	s.mu.Lock()
	addrs := []string{s.mounted[ids[0]].Addr(), s.mounted[ids[1]].Addr()}
	s.mu.Unlock()
	v := bytes.Repeat([]byte("seg"), 10000)
	for i, k := range []string{"on0", "on1"} {
		rc, err := s.replicateConfig(cl, rcArgs{preferred: []string{addrs[i]}})
		if err != nil || rc.PreferredWorker != ids[i] {
			t.Fatalf("segment address %s resolves to %q, want %s: %v", addrs[i], rc.PreferredWorker, ids[i], err)
		}
		if err := cl.Put(ctx, k, v, rc); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.unmountSegments([]string{string(ids[0]), "no-such"}, 0); !errors.Is(err, base.ErrSegmentNotFound) {
		t.Fatalf("unmount with an unknown id: %v", err)
	}
	if ok, err := cl.Exists(ctx, "on0"); !ok || err != nil {
		t.Fatalf("a refused unmount unmounted: exists %t, %v", ok, err)
	}
	if err := s.unmountSegments([]string{string(ids[0])}, 0); err != nil {
		t.Fatal(err)
	}
	if ok, err := cl.Exists(ctx, "on0"); ok || err != nil {
		t.Fatalf("exists of the unmounted segment's object: %t, %v; want false at once", ok, err)
	}
	if ok, err := cl.Exists(ctx, "on1"); !ok || err != nil {
		t.Fatalf("the other segment's object: %t, %v", ok, err)
	}
	s.close()
	other, err := client.Connect(ctx, client.Config{MasterAddresses: []string{master}})
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	if ok, err := other.Exists(ctx, "on1"); ok || err != nil {
		t.Fatalf("exists after close of a mounted segment's object: %t, %v; want false", ok, err)
	}
}
