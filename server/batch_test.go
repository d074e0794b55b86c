package server

import (
	"context"
	"errors"
	"testing"

	"github.com/mooncake-go/mooncake/internal/base"
	"github.com/mooncake-go/mooncake/transfer"
)

// TestBatchCalls drives the batch forms: per-item errors, one commit per BatchPutEnd.
func TestBatchCalls(t *testing.T) {
	c := startMasters(t, 1, nil)
	c.addWorker("", nil)
	d := newDriver(t, c.masterAddrs())
	if err := d.put("dup", []byte("first"), 1, false); err != nil {
		t.Fatal(err)
	}
	keys := []string{"a", "dup", "b"}
	vals := [][]byte{[]byte("va"), []byte("vdup"), []byte("vb")}
	req := &transfer.BatchPutStartRequest{}
	for i, k := range keys {
		req.Items = append(req.Items, transfer.PutStartRequest{Object: base.Object{ObjectMeta: base.ObjectMeta{Key: k,
			Size: int64(len(vals[i]))}}})
	}
	ps := &transfer.BatchPutStartResponse{}
	if err := d.call(req, ps); err != nil {
		t.Fatal(err)
	}
	if ps.Items[1].Err.Code != base.CodeObjectAlreadyExists || ps.Items[0].Err.Code != base.CodeOK || ps.Items[2].Err.Code != base.CodeOK {
		t.Fatalf("batch put start items: %+v", ps.Items)
	}
	end := &transfer.BatchPutEndRequest{}
	for _, i := range []int{0, 2} {
		it := ps.Items[i]
		r := it.Replicas[0]
		if err := d.cli.Write(context.Background(), r.Address, transfer.WriteRequest{Key: keys[i], Version: it.Version}, vals[i]); err != nil {
			t.Fatal(err)
		}
		end.Items = append(end.Items,
			transfer.PutEndRequest{Object: base.Object{ObjectMeta: base.ObjectMeta{Key: keys[i], Version: it.Version,
				Size: int64(len(vals[i])), Checksum: base.Checksum(vals[i])}, Replicas: []base.WorkerID{r.WorkerID}}})
	}
	// An item never started fails alone.
	end.Items = append(end.Items, transfer.PutEndRequest{Object: base.Object{ObjectMeta: base.ObjectMeta{Key: "never",
		Version: 99, Size: 1, Checksum: 1}}})
	br := transfer.NewBatchResponse(transfer.OpBatchPutEnd, nil)
	if err := d.call(end, br); err != nil {
		t.Fatal(err)
	}
	if br.Items[0].Code != base.CodeOK || br.Items[1].Code != base.CodeOK || br.Items[2].Code != base.CodeInvalidVersion {
		t.Fatalf("batch put end items: %+v", br.Items)
	}
	bl := &transfer.BatchLookupResponse{}
	if err := d.call(&transfer.BatchLookupRequest{Keys: []string{"a", "missing", "b"}}, bl); err != nil {
		t.Fatal(err)
	}
	if bl.Items[0].Err.Code != base.CodeOK || bl.Items[1].Err.Code != base.CodeObjectNotFound || bl.Items[2].Checksum != base.Checksum(vals[2]) {
		t.Fatalf("batch lookup: %+v", bl.Items)
	}
	be := &transfer.BatchExistsResponse{}
	if err := d.call(&transfer.BatchExistsRequest{Keys: []string{"a", "missing", "dup"}}, be); err != nil {
		t.Fatal(err)
	}
	if !be.Exists[0] || be.Exists[1] || !be.Exists[2] {
		t.Fatalf("batch exists: %v", be.Exists)
	}
	brm := transfer.NewBatchResponse(transfer.OpBatchRemove, nil)
	if err := d.call(&transfer.BatchRemoveRequest{Keys: []string{"a", "missing"}}, brm); err != nil {
		t.Fatal(err)
	}
	if brm.Items[0].Code != base.CodeOK || brm.Items[1].Code != base.CodeObjectNotFound {
		t.Fatalf("batch remove: %+v", brm.Items)
	}
	if _, err := d.lookup("a"); !errors.Is(err, base.ErrObjectNotFound) {
		t.Fatalf("after batch remove: %v", err)
	}
	d.mustGet("b", vals[2], 1)
	// The counters saw the batches.
	h := c.masters[0].TestHooks()
	putEnds, putEndFails := h.Calls("batch_put_end")
	lookups, _ := h.Calls("batch_get_replica_list")
	if putEnds != 1 || putEndFails != 1 || lookups != 1 {
		t.Fatalf("batch counters: put_end %d/%d lookup %d", putEnds, putEndFails, lookups)
	}
}
