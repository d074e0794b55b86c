package client_test

import (
	"bytes"
	"context"
	"errors"
	"testing"

	"github.com/mooncake-go/mooncake/client"
	"github.com/mooncake-go/mooncake/internal/base"
)

// The calls of into.go against real in-process servers.

func TestServerBatchGetInto(t *testing.T) {
	ip := startInproc(t, 2, 64<<20)
	c := connect(t, ip)
	ctx := context.Background()
	keys := []string{"a", "b", "missing", "c", "small"}
	vals := map[string][]byte{"a": val(100, 1), "b": val(5<<20, 2), "c": val(64<<10, 3), "small": val(1000, 4)}
	for k, v := range vals {
		if err := c.Put(ctx, k, v, client.ReplicateConfig{}); err != nil {
			t.Fatal(err)
		}
	}
	bufs := [][]byte{make([]byte, 200), make([]byte, 5<<20), make([]byte, 10), make([]byte, 64<<10), make([]byte, 999)}
	sizes, errs := c.BatchGetInto(ctx, keys, bufs)
	for i, k := range keys {
		switch k {
		case "missing":
			if !errors.Is(errs[i], base.ErrObjectNotFound) {
				t.Fatalf("%s: %v", k, errs[i])
			}
		case "small":
			if !errors.Is(errs[i], base.ErrInvalidParams) {
				t.Fatalf("%s: a buffer one byte short: %v", k, errs[i])
			}
		default:
			if errs[i] != nil || sizes[i] != len(vals[k]) || !bytes.Equal(bufs[i][:sizes[i]], vals[k]) {
				t.Fatalf("%s: %d %v", k, sizes[i], errs[i])
			}
		}
	}
	if _, errs := c.BatchGetInto(ctx, keys, bufs[:2]); !errors.Is(errs[0], base.ErrInvalidParams) {
		t.Fatalf("mismatched lengths: %v", errs)
	}

	// GetWith and BatchGetWith hand the size to the allocator.
	var asked int64
	n, err := c.GetWith(ctx, "b", func(size int64) ([]byte, error) { asked = size; return make([]byte, size), nil })
	if err != nil || n != 5<<20 || asked != 5<<20 {
		t.Fatalf("%d %d %v", n, asked, err)
	}
	boom := errors.New("no memory")
	if _, err := c.GetWith(ctx, "a", func(int64) ([]byte, error) { return nil, boom }); !errors.Is(err, boom) {
		t.Fatalf("allocator error: %v", err)
	}
	got := make([][]byte, 2)
	sizes, errs = c.BatchGetWith(ctx, []string{"c", "a"}, func(i int, size int64) ([]byte, error) {
		got[i] = make([]byte, size)
		return got[i], nil
	})
	if errs[0] != nil || errs[1] != nil || !bytes.Equal(got[0], vals["c"]) || !bytes.Equal(got[1], vals["a"]) || sizes[1] != 100 {
		t.Fatalf("%v %v", sizes, errs)
	}
}

func TestServerBatchGetRanges(t *testing.T) {
	ip := startInproc(t, 2, 64<<20)
	c := connect(t, ip)
	ctx := context.Background()
	v1, v2 := val(1<<20, 5), val(300, 6)
	if err := c.Put(ctx, "r1", v1, client.ReplicateConfig{Replicas: 2}); err != nil {
		t.Fatal(err)
	}
	if err := c.Put(ctx, "r2", v2, client.ReplicateConfig{}); err != nil {
		t.Fatal(err)
	}
	reads := []client.RangeRead{
		{Key: "r1", Offset: 0, Dst: make([]byte, 8)},
		{Key: "r1", Offset: 4096, Dst: make([]byte, 100000)},
		{Key: "r2", Offset: 290, Dst: make([]byte, 10)},
		{Key: "r2", Offset: 295, Dst: make([]byte, 10)}, // past the end
		{Key: "nope", Offset: 0, Dst: make([]byte, 1)},
		{Key: "r1", Offset: -1, Dst: make([]byte, 1)},
		{Key: "", Offset: 0, Dst: make([]byte, 1)},
	}
	errs := c.BatchGetRanges(ctx, reads)
	for i, want := range [][]byte{v1[:8], v1[4096 : 4096+100000], v2[290:]} {
		if errs[i] != nil || !bytes.Equal(reads[i].Dst, want) {
			t.Fatalf("range %d: %v", i, errs[i])
		}
	}
	for i, want := range []error{base.ErrInvalidParams, base.ErrObjectNotFound, base.ErrInvalidParams, base.ErrInvalidKey} {
		if !errors.Is(errs[3+i], want) {
			t.Fatalf("range %d: %v, want %v", 3+i, errs[3+i], want)
		}
	}
}

func TestServerPartsUpsertDescribe(t *testing.T) {
	ip := startInproc(t, 2, 64<<20)
	c := connect(t, ip)
	ctx := context.Background()
	parts := [][]byte{val(10, 1), val(5<<20, 2), val(3, 3)}
	if err := c.PutParts(ctx, "p", parts, client.ReplicateConfig{Replicas: 2}); err != nil {
		t.Fatal(err)
	}
	got, err := c.Get(ctx, "p")
	if err != nil || !bytes.Equal(got, bytes.Join(parts, nil)) {
		t.Fatalf("put parts: %v", err)
	}
	// A plain put of an existing key fails; an upsert replaces it.
	if err := c.PutParts(ctx, "p", parts[:1], client.ReplicateConfig{}); !errors.Is(err, base.ErrObjectAlreadyExists) {
		t.Fatalf("put over an existing key: %v", err)
	}
	if err := c.PutParts(ctx, "p", parts[:1], client.ReplicateConfig{Upsert: true}); err != nil {
		t.Fatal(err)
	}
	if got, err := c.Get(ctx, "p"); err != nil || !bytes.Equal(got, parts[0]) {
		t.Fatalf("after upsert: %v", err)
	}
	errs := c.BatchPutParts(ctx, []string{"q1", "q2", "p"}, [][][]byte{parts, parts[1:], parts[2:]}, client.ReplicateConfig{Upsert: true})
	for i, err := range errs {
		if err != nil {
			t.Fatalf("batch put parts %d: %v", i, err)
		}
	}
	if got, err := c.Get(ctx, "q2"); err != nil || !bytes.Equal(got, bytes.Join(parts[1:], nil)) {
		t.Fatalf("q2: %v", err)
	}
	if got, err := c.Get(ctx, "p"); err != nil || !bytes.Equal(got, parts[2]) {
		t.Fatalf("p after batch upsert: %v", err)
	}
	if errs := c.BatchPutParts(ctx, []string{"x"}, nil, client.ReplicateConfig{}); !errors.Is(errs[0], base.ErrInvalidParams) {
		t.Fatalf("mismatched lengths: %v", errs)
	}

	info, err := c.Describe(ctx, "q1")
	if err != nil || info.Size != int64(len(bytes.Join(parts, nil))) || len(info.Replicas) != 1 || info.Version == 0 {
		t.Fatalf("%+v %v", info, err)
	}
	ids := map[base.WorkerID]bool{}
	for _, w := range ip.workers {
		ids[w.ID()] = true
	}
	if r := info.Replicas[0]; !ids[r.WorkerID] || r.Address == "" {
		t.Fatalf("replica %+v is not one of the workers", r)
	}
	if _, err := c.Describe(ctx, "nope"); !errors.Is(err, base.ErrObjectNotFound) {
		t.Fatalf("describe a missing key: %v", err)
	}
}
