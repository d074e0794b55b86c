package server

import (
	"context"
	"errors"
	"slices"
	"testing"

	"github.com/mooncake-go/mooncake/client"
	"github.com/mooncake-go/mooncake/internal/base"
)

// TestKVSessionsAcrossLeaderChange drives Mooncake's KV-session calls through the Go client on
// three masters, moves leadership, and checks that the new leader holds the same registry (the
// registry is replicated; Mooncake's is lost on failover) and follows removals.
func TestKVSessionsAcrossLeaderChange(t *testing.T) {
	c := startMasters(t, 3, nil)
	w := c.addWorker("", nil)
	ctx, cancel := context.WithTimeout(context.Background(), testWait)
	defer cancel()
	cli, err := client.Connect(ctx, client.Config{MasterAddresses: c.masterAddrs(), Logger: testLogger()})
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	for _, k := range []string{"x", "y", "z"} {
		if err := cli.Put(ctx, k, []byte("kv-"+k), client.ReplicateConfig{Replicas: 1}); err != nil {
			t.Fatal(err)
		}
	}
	if err := cli.PinKVSession(ctx, "conv-a"); !errors.Is(err, base.ErrSessionNotFound) {
		t.Fatalf("pin of an absent session: %v, want SESSION_NOT_FOUND", err)
	}
	errs, err := cli.AttachKVSession(ctx, "conv-a", []string{"x", "absent", "y"})
	if err != nil || errs[0] != nil || !errors.Is(errs[1], base.ErrObjectNotFound) || errs[2] != nil {
		t.Fatalf("attach: %v %v", errs, err)
	}
	if _, err := cli.AttachKVSession(ctx, "conv-b", []string{"y", "z"}); err != nil {
		t.Fatal(err)
	}
	if err := cli.PinKVSession(ctx, "conv-a"); err != nil {
		t.Fatal(err)
	}
	// The pin reached the worker's eviction order: x and y are session-pinned there, z not.
	sessionPinned := func(k string) bool {
		info, err := w.TestHooks().Engine().Info(k, 0)
		return err == nil && info.SessionPinned
	}
	if !sessionPinned("x") || !sessionPinned("y") || sessionPinned("z") {
		t.Fatalf("worker marks after pin: x=%t y=%t z=%t", sessionPinned("x"), sessionPinned("y"), sessionPinned("z"))
	}
	// Unpinning conv-b (which also holds y) leaves y marked: conv-a still pins it.
	if err := cli.PinKVSession(ctx, "conv-b"); err != nil {
		t.Fatal(err)
	}
	if err := cli.UnpinKVSession(ctx, "conv-b"); err != nil {
		t.Fatal(err)
	}
	if !sessionPinned("y") || sessionPinned("z") {
		t.Fatalf("after unpinning conv-b: y=%t z=%t", sessionPinned("y"), sessionPinned("z"))
	}

	c.transferLeadership(ctx)

	info, err := cli.KVSession(ctx, "conv-a")
	if err != nil || !info.Pinned || info.MemberCount != 2 || info.ID != "conv-a" {
		t.Fatalf("after the leader change: %+v %v", info, err)
	}
	var keys []string
	for cursor := ""; ; {
		page, err := cli.ListKVSessionKeys(ctx, "conv-b", cursor, 1)
		if err != nil {
			t.Fatal(err)
		}
		keys = append(keys, page.Keys...)
		if cursor = page.NextCursor; cursor == "" {
			break
		}
	}
	if !slices.Equal(keys, []string{"y", "z"}) {
		t.Fatalf("conv-b pages: %q", keys)
	}
	// Removal follows: y leaves both sessions; update keeps only x of conv-a.
	if err := cli.Remove(ctx, "y"); err != nil {
		t.Fatal(err)
	}
	if err := cli.UpdateKVSession(ctx, "conv-a", []string{"x", "absent"}); err != nil {
		t.Fatal(err)
	}
	if err := cli.UnpinKVSession(ctx, "conv-a"); err != nil {
		t.Fatal(err)
	}
	if sessionPinned("x") {
		t.Fatal("x still session-pinned on its worker after unpin")
	}
	if info, err := cli.KVSession(ctx, "conv-b"); err != nil || info.MemberCount != 1 {
		t.Fatalf("conv-b after removing y: %+v %v", info, err)
	}
	if err := cli.CloseKVSession(ctx, "conv-a"); err != nil {
		t.Fatal(err)
	}
	if _, err := cli.KVSession(ctx, "conv-a"); !errors.Is(err, base.ErrSessionNotFound) {
		t.Fatalf("closed session: %v", err)
	}
	if err := cli.CloseKVSession(ctx, "conv-a"); err != nil {
		t.Fatalf("close twice: %v", err)
	}
	if v, err := cli.Get(ctx, "x"); err != nil || string(v) != "kv-x" {
		t.Fatalf("close deleted the object: %q %v", v, err)
	}
	if _, err := cli.ListKVSessionKeys(ctx, "conv-b", "", 0); !errors.Is(err, base.ErrInvalidParams) {
		t.Fatalf("limit 0: %v", err)
	}
}
