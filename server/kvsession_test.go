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

// TestKVSessionsPerTenant checks that KV sessions are per tenant: two tenants and the default
// one use the same session id and the same keys, and each attaches, lists, reads, pins and
// closes only its own session and objects; another tenant's session is SESSION_NOT_FOUND.
func TestKVSessionsPerTenant(t *testing.T) {
	c := startMasters(t, 1, nil)
	w := c.addWorker("", nil)
	ctx, cancel := context.WithTimeout(context.Background(), testWait)
	defer cancel()
	a, b, def := connectTenant(t, c, "team-a"), connectTenant(t, c, "team-b"), connectTenant(t, c, "")
	const id = "conv"
	for _, k := range []string{"k1", "k2"} {
		if err := a.Put(ctx, k, []byte("a-"+k), client.ReplicateConfig{Replicas: 1}); err != nil {
			t.Fatal(err)
		}
	}
	if err := b.Put(ctx, "k1", []byte("b-k1"), client.ReplicateConfig{Replicas: 1}); err != nil {
		t.Fatal(err)
	}
	// b has no k2 and the default tenant no object: their k2 and k1 are absent, though a's exist.
	if errs, err := a.AttachKVSession(ctx, id, []string{"k1", "k2"}); err != nil || errs[0] != nil || errs[1] != nil {
		t.Fatalf("a attach: %v %v", errs, err)
	}
	if err := b.PinKVSession(ctx, id); !errors.Is(err, base.ErrSessionNotFound) {
		t.Fatalf("b pins a's session: %v, want SESSION_NOT_FOUND", err)
	}
	if _, err := def.KVSession(ctx, id); !errors.Is(err, base.ErrSessionNotFound) {
		t.Fatalf("the default tenant reads a's session: %v, want SESSION_NOT_FOUND", err)
	}
	if _, err := b.ListKVSessionKeys(ctx, id, "", 10); !errors.Is(err, base.ErrSessionNotFound) {
		t.Fatalf("b lists a's session: %v, want SESSION_NOT_FOUND", err)
	}
	if errs, err := b.AttachKVSession(ctx, id, []string{"k1", "k2"}); err != nil || errs[0] != nil || !errors.Is(errs[1], base.ErrObjectNotFound) {
		t.Fatalf("b attach: %v %v", errs, err)
	}
	if errs, err := def.AttachKVSession(ctx, id, []string{"k1"}); err != nil || !errors.Is(errs[0], base.ErrObjectNotFound) {
		t.Fatalf("default attach: %v %v", errs, err)
	}
	list := func(cli *client.Client) []string {
		t.Helper()
		var keys []string
		for cursor := ""; ; {
			page, err := cli.ListKVSessionKeys(ctx, id, cursor, 1)
			if err != nil {
				t.Fatal(err)
			}
			keys = append(keys, page.Keys...)
			if cursor = page.NextCursor; cursor == "" {
				return keys
			}
		}
	}
	if got := list(a); !slices.Equal(got, []string{"k1", "k2"}) {
		t.Fatalf("a lists %q", got)
	}
	if got := list(b); !slices.Equal(got, []string{"k1"}) {
		t.Fatalf("b lists %q", got)
	}
	// Pinning a's session marks a's objects only; b's session stays unpinned.
	if err := a.PinKVSession(ctx, id); err != nil {
		t.Fatal(err)
	}
	ia, err := a.KVSession(ctx, id)
	if err != nil || ia.ID != id || !ia.Pinned || ia.MemberCount != 2 {
		t.Fatalf("a's session: %+v %v", ia, err)
	}
	ib, err := b.KVSession(ctx, id)
	if err != nil || ib.ID != id || ib.Pinned || ib.MemberCount != 1 {
		t.Fatalf("b's session: %+v %v", ib, err)
	}
	sessionPinned := func(stored string) bool {
		info, err := w.TestHooks().Engine().Info(stored, 0)
		return err == nil && info.SessionPinned
	}
	aK1, _ := base.TenantKey("team-a", "k1")
	bK1, _ := base.TenantKey("team-b", "k1")
	if !sessionPinned(aK1) || sessionPinned(bK1) {
		t.Fatalf("worker marks: a's k1 %t, b's k1 %t", sessionPinned(aK1), sessionPinned(bK1))
	}
	// b's update and close touch b's session only.
	if err := b.UpdateKVSession(ctx, id, []string{"k2"}); err != nil {
		t.Fatal(err)
	}
	if _, err := b.KVSession(ctx, id); !errors.Is(err, base.ErrSessionNotFound) {
		t.Fatalf("b's session after an update keeping none of its keys: %v", err)
	}
	if err := b.CloseKVSession(ctx, id); err != nil {
		t.Fatal(err)
	}
	if got := list(a); !slices.Equal(got, []string{"k1", "k2"}) {
		t.Fatalf("a lists %q after b's update and close", got)
	}
	if err := a.UpdateKVSession(ctx, id, []string{"k2"}); err != nil {
		t.Fatal(err)
	}
	if got := list(a); !slices.Equal(got, []string{"k2"}) {
		t.Fatalf("a lists %q after its update", got)
	}
	if err := a.CloseKVSession(ctx, id); err != nil {
		t.Fatal(err)
	}
	if _, err := a.KVSession(ctx, id); !errors.Is(err, base.ErrSessionNotFound) {
		t.Fatalf("a's session after close: %v", err)
	}
}
