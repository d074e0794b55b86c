package client_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"

	"github.com/mooncake-go/mooncake/client"
	"github.com/mooncake-go/mooncake/internal/base"
	"github.com/mooncake-go/mooncake/transfer"
)

// layered returns keys objects of layers ranges of page bytes each, distinct per byte.
func layered(keys, layers, page int) [][]byte {
	out := make([][]byte, keys)
	for k := range out {
		out[k] = make([]byte, layers*page)
		for i := range out[k] {
			out[k][i] = byte(i*7 + k*13 + i/page)
		}
	}
	return out
}

// A put session written layer by layer (layers in a random order, from several goroutines,
// ranges larger than a stripe) is invisible until its end, then whole on both replicas; a get
// session reads it back by ranges.
func TestPutSessionLayers(t *testing.T) {
	const nkeys, layers, page = 4, 12, 48 << 10
	ip := startInproc(t, 2, 16<<20)
	c := connectWith(t, ip, client.Config{StripeSize: 16 << 10})
	ctx := context.Background()
	vals := layered(nkeys, layers, page)
	keys := make([]string, nkeys)
	sizes := make([]int64, nkeys)
	for i := range keys {
		keys[i], sizes[i] = fmt.Sprint("sess-", i), int64(layers*page)
	}
	for i, err := range c.PutSessionStart(ctx, keys, sizes, client.ReplicateConfig{Replicas: 2}) {
		if err != nil {
			t.Fatalf("start %s: %v", keys[i], err)
		}
	}
	var wg sync.WaitGroup
	errc := make(chan error, layers)
	for _, l := range rand.Perm(layers) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ranges := make([][]client.PutRange, nkeys)
			for k := range ranges {
				ranges[k] = []client.PutRange{{Offset: int64(l * page), Src: vals[k][l*page : (l+1)*page]}}
			}
			n, errs := c.PutSessionWrite(ctx, keys, ranges)
			for k := range keys {
				if errs[k] != nil || n[k] != page {
					errc <- fmt.Errorf("layer %d key %d: %d bytes, %v", l, k, n[k], errs[k])
				}
			}
		}()
	}
	wg.Wait()
	close(errc)
	for err := range errc {
		t.Fatal(err)
	}
	if ok, err := c.Exists(ctx, keys[0]); err != nil || ok {
		t.Fatalf("before the end: exists %v, %v", ok, err)
	}
	for i, err := range c.PutSessionEnd(ctx, keys) {
		if err != nil {
			t.Fatalf("end %s: %v", keys[i], err)
		}
	}
	for k, key := range keys {
		got, err := c.Get(ctx, key)
		if err != nil || !bytes.Equal(got, vals[k]) {
			t.Fatalf("get %s: %d bytes, %v", key, len(got), err)
		}
	}
	// The session is gone after its end.
	if errs := c.PutSessionEnd(ctx, keys[:1]); !errors.Is(errs[0], base.ErrInvalidParams) {
		t.Fatalf("second end: %v", errs[0])
	}

	for i, err := range c.GetSessionStart(ctx, append(keys, "missing")) {
		if (i < nkeys) != (err == nil) || (i == nkeys && !errors.Is(err, base.ErrObjectNotFound)) {
			t.Fatalf("get start %d: %v", i, err)
		}
	}
	dst := make([][]byte, nkeys)
	for l := range layers {
		ranges := make([][]client.GetRange, nkeys)
		for k := range ranges {
			if dst[k] == nil {
				dst[k] = make([]byte, layers*page)
			}
			// Two ranges per layer, the second first.
			half := page / 2
			ranges[k] = []client.GetRange{
				{Offset: int64(l*page + half), Dst: dst[k][l*page+half : (l+1)*page]},
				{Offset: int64(l * page), Dst: dst[k][l*page : l*page+half]},
			}
		}
		n, errs := c.GetSessionRead(ctx, keys, ranges)
		for k := range keys {
			if errs[k] != nil || n[k] != page {
				t.Fatalf("read layer %d key %d: %d, %v", l, k, n[k], errs[k])
			}
		}
	}
	for k := range keys {
		if !bytes.Equal(dst[k], vals[k]) {
			t.Fatalf("get session of %s read other bytes", keys[k])
		}
	}
	// A key with no session (never started, or ended) is refused.
	one := [][]client.GetRange{{{Offset: 0, Dst: make([]byte, 8)}}}
	if _, errs := c.GetSessionRead(ctx, []string{"missing"}, one); !errors.Is(errs[0], base.ErrInvalidParams) {
		t.Fatalf("read without a session: %v", errs[0])
	}
	if _, errs := c.GetSessionRead(ctx, keys[:1], [][]client.GetRange{{{Offset: int64(layers*page) - 4, Dst: make([]byte, 8)}}}); !errors.Is(errs[0], base.ErrInvalidParams) {
		t.Fatalf("range past the end: %v", errs[0])
	}
	c.GetSessionEnd(keys)
	if _, errs := c.GetSessionRead(ctx, keys[1:2], one); !errors.Is(errs[0], base.ErrInvalidParams) {
		t.Fatalf("read after GetSessionEnd: %v", errs[0])
	}
}

// Bad calls fail with clear errors, and a revoked session frees its space at once: an object
// as large as the arena fits again right after.
func TestPutSessionErrorsAndRevoke(t *testing.T) {
	const arena = 4 << 20
	ip := startInproc(t, 1, arena)
	c := connect(t, ip)
	ctx := context.Background()
	size := int64(arena * 3 / 4)
	src := val(int(size), 9)
	rc := client.ReplicateConfig{}

	if _, errs := c.PutSessionWrite(ctx, []string{"none"}, [][]client.PutRange{{{Src: src[:8]}}}); !errors.Is(errs[0], base.ErrInvalidParams) {
		t.Fatalf("write without a session: %v", errs[0])
	}
	if errs := c.PutSessionStart(ctx, []string{"a", "a"}, []int64{size, size}, rc); errs[0] != nil || !errors.Is(errs[1], base.ErrObjectAlreadyExists) {
		t.Fatalf("start twice: %v", errs)
	}
	if _, errs := c.PutSessionWrite(ctx, []string{"a"}, [][]client.PutRange{{{Offset: size - 4, Src: src[:8]}}}); !errors.Is(errs[0], base.ErrInvalidParams) {
		t.Fatalf("range past the end: %v", errs[0])
	}
	// Half the object written: the end refuses it and keeps it for revoke.
	if n, errs := c.PutSessionWrite(ctx, []string{"a"}, [][]client.PutRange{{{Src: src[:size/2]}}}); errs[0] != nil || n[0] != size/2 {
		t.Fatalf("write: %d, %v", n[0], errs[0])
	}
	if errs := c.PutSessionEnd(ctx, []string{"a"}); !errors.Is(errs[0], base.ErrInvalidParams) {
		t.Fatalf("end with a gap: %v", errs[0])
	}
	// No room for a second object of that size while the session holds its reservation.
	if err := c.Put(ctx, "b", src, rc); !errors.Is(err, base.ErrNoSpace) {
		t.Fatalf("put beside the session: %v", err)
	}
	if errs := c.PutSessionRevoke(ctx, []string{"a"}); errs[0] != nil {
		t.Fatalf("revoke: %v", errs[0])
	}
	if errs := c.PutSessionRevoke(ctx, []string{"a"}); !errors.Is(errs[0], base.ErrInvalidParams) {
		t.Fatalf("revoke twice: %v", errs[0])
	}
	if ok, err := c.Exists(ctx, "a"); err != nil || ok {
		t.Fatalf("revoked key: exists %v, %v", ok, err)
	}
	if err := c.Put(ctx, "b", src, rc); err != nil {
		t.Fatalf("put after the revoke: %v", err)
	}
	// A key stored already cannot be started (no upsert).
	if errs := c.PutSessionStart(ctx, []string{"b"}, []int64{8}, rc); !errors.Is(errs[0], base.ErrObjectAlreadyExists) {
		t.Fatalf("start of a stored key: %v", errs[0])
	}
	if errs := c.PutSessionStart(ctx, []string{"c"}, []int64{0}, rc); !errors.Is(errs[0], base.ErrInvalidParams) {
		t.Fatalf("start of size 0: %v", errs[0])
	}

	// A client closed mid-session drops it: nothing visible, the space free at once.
	if err := c.Remove(ctx, "b"); err != nil {
		t.Fatal(err)
	}
	c2 := connect(t, ip)
	if errs := c2.PutSessionStart(ctx, []string{"d"}, []int64{size}, rc); errs[0] != nil {
		t.Fatalf("start: %v", errs[0])
	}
	if _, errs := c2.PutSessionWrite(ctx, []string{"d"}, [][]client.PutRange{{{Src: src[:size/2]}}}); errs[0] != nil {
		t.Fatalf("write: %v", errs[0])
	}
	if err := c2.Close(); err != nil {
		t.Fatal(err)
	}
	if err := c.Put(ctx, "e", src, rc); err != nil {
		t.Fatalf("put after the client with a session closed: %v", err)
	}
	if ok, err := c.Exists(ctx, "d"); err != nil || ok {
		t.Fatalf("key of a closed client's session: exists %v, %v", ok, err)
	}
}

// SessionCommit, the worker call a session's end makes, is safe to resend: a version the
// worker committed answers its checksum again; a version it never held is OBJECT_NOT_FOUND.
func TestSessionCommitResend(t *testing.T) {
	ip := startInproc(t, 1, 4<<20)
	c := connect(t, ip)
	ctx := context.Background()
	v := val(10000, 3)
	if errs := c.PutSessionStart(ctx, []string{"s"}, []int64{int64(len(v))}, client.ReplicateConfig{}); errs[0] != nil {
		t.Fatal(errs[0])
	}
	if _, errs := c.PutSessionWrite(ctx, []string{"s"}, [][]client.PutRange{{{Offset: 5000, Src: v[5000:]}, {Src: v[:5000]}}}); errs[0] != nil {
		t.Fatal(errs[0])
	}
	if errs := c.PutSessionEnd(ctx, []string{"s"}); errs[0] != nil {
		t.Fatal(errs[0])
	}
	info, err := c.Describe(ctx, "s")
	if err != nil || info.Checksum != base.Checksum(v) {
		t.Fatalf("describe: %+v, %v; want checksum %#x", info, err, base.Checksum(v))
	}
	tc, err := transfer.NewClient(transfer.ClientOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer tc.Close()
	var resp transfer.SessionCommitResponse
	if err := tc.Call(ctx, ip.workers[0].Addr(), &transfer.SessionCommitRequest{Key: "s", Version: info.Version}, &resp); err != nil ||
		resp.Checksum != info.Checksum || resp.Size != int64(len(v)) {
		t.Fatalf("resent SessionCommit: %+v, %v", resp, err)
	}
	err = tc.Call(ctx, ip.workers[0].Addr(), &transfer.SessionCommitRequest{Key: "never", Version: info.Version + 100}, &resp)
	if !errors.Is(err, base.ErrObjectNotFound) {
		t.Fatalf("SessionCommit of nothing: %v", err)
	}
}
