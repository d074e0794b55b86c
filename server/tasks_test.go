package server

import (
	"errors"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/mooncake-go/mooncake/internal/base"
	"github.com/mooncake-go/mooncake/transfer"
)

// TestCopyAndMoveTasks: three workers; a copy task adds a replica on a named worker (by id,
// and by address), a move task moves one; each is followed to SUCCESS with QueryTask and
// every replica reads back the bytes put. Bad requests get Mooncake's codes.
func TestCopyAndMoveTasks(t *testing.T) {
	c := startMasters(t, 1, nil)
	wa := c.addWorker(t.TempDir(), nil)
	wb := c.addWorker(t.TempDir(), nil)
	wc := c.addWorker(t.TempDir(), nil)
	d := newDriver(t, c.masterAddrs())
	rng := rand.New(rand.NewPCG(20, 3))
	k, k2, anchor := value(rng, 70<<10), value(rng, 300), value(rng, 10)
	for key, v := range map[string][]byte{"k": k, "k2": k2} {
		if err := d.putOn(key, v, wa.ID()); err != nil {
			t.Fatal(err)
		}
	}
	if err := d.putOn("anchor", anchor, wc.ID()); err != nil {
		t.Fatal(err)
	}
	lr, err := d.lookup("anchor")
	if err != nil {
		t.Fatal(err)
	}
	wcAddr := lr.Replicas[0].Address

	run := func(req *transfer.CreateTaskRequest) {
		t.Helper()
		var id transfer.CreateTaskResponse
		if err := d.call(req, &id); err != nil {
			t.Fatalf("create task %+v: %v", req, err)
		}
		if id.ID == (base.TaskID{}) {
			t.Fatal("task id (0, 0): Mooncake's failure value")
		}
		var q transfer.QueryTaskResponse
		eventually(t, "the task ends", func() bool {
			if err := d.call(&transfer.QueryTaskRequest{ID: id.ID}, &q); err != nil {
				t.Fatal(err)
			}
			return q.Status == base.TaskSuccess || q.Status == base.TaskFailed
		})
		if q.Status != base.TaskSuccess || q.Type != req.Type || q.Key != req.Key || q.CreatedMs == 0 ||
			q.UpdatedMs < q.CreatedMs || q.AssignedClient == "" {
			t.Fatalf("task %+v ended as %+v", req, q)
		}
	}
	holders := func(key string) []base.WorkerID {
		lr, err := d.lookup(key)
		if err != nil {
			t.Fatal(err)
		}
		var ids []base.WorkerID
		for _, r := range lr.Replicas {
			ids = append(ids, r.WorkerID)
		}
		slices.Sort(ids)
		return ids
	}

	// Copy k to wb by id, k2 to wc by address: two replicas each, both readable.
	run(&transfer.CreateTaskRequest{Type: base.TaskCopy, Key: "k", Targets: []string{string(wb.ID())}})
	d.mustGet("k", k, 2)
	run(&transfer.CreateTaskRequest{Type: base.TaskCopy, Key: "k2", Targets: []string{wcAddr}})
	d.mustGet("k2", k2, 2)
	if got := holders("k2"); !slices.Equal(got, sorted(wa.ID(), wc.ID())) {
		t.Fatalf("k2 on %v after its copy to wc", got)
	}

	// Move k's replica on wa to wc: k is on wb and wc.
	run(&transfer.CreateTaskRequest{Type: base.TaskMove, Key: "k", Source: string(wa.ID()), Targets: []string{string(wc.ID())}})
	if got := holders("k"); !slices.Equal(got, sorted(wb.ID(), wc.ID())) {
		t.Fatalf("k on %v after its move from wa to wc", got)
	}
	d.mustGet("k", k, 2)

	for _, tc := range []struct {
		req  transfer.CreateTaskRequest
		want error
	}{
		{transfer.CreateTaskRequest{Type: base.TaskCopy, Key: "nokey", Targets: []string{string(wb.ID())}}, base.ErrObjectNotFound},
		{transfer.CreateTaskRequest{Type: base.TaskCopy, Key: "k", Targets: []string{"nobody"}}, base.ErrSegmentNotFound},
		{transfer.CreateTaskRequest{Type: base.TaskCopy, Key: "k", Targets: []string{string(wb.ID())}}, base.ErrObjectAlreadyExists},
		{transfer.CreateTaskRequest{Type: base.TaskCopy, Key: "k"}, base.ErrInvalidParams},
		{transfer.CreateTaskRequest{Type: base.TaskMove, Key: "k", Source: string(wa.ID()), Targets: []string{string(wa.ID())}}, base.ErrObjectNotFound},
		{transfer.CreateTaskRequest{Type: base.TaskMove, Key: "k", Source: "nobody", Targets: []string{string(wa.ID())}}, base.ErrSegmentNotFound},
		{transfer.CreateTaskRequest{Type: 7, Key: "k", Targets: []string{string(wa.ID())}}, base.ErrInvalidParams},
	} {
		if err := d.call(&tc.req, &transfer.CreateTaskResponse{}); !errors.Is(err, tc.want) {
			t.Errorf("create task %+v: %v, want %v", tc.req, err, tc.want)
		}
	}
	if err := d.call(&transfer.QueryTaskRequest{ID: base.TaskID{Hi: 1, Lo: 2}}, &transfer.QueryTaskResponse{}); !errors.Is(err, base.ErrObjectNotFound) {
		t.Errorf("query of an unknown task: %v", err)
	}
}

func sorted(ids ...base.WorkerID) []base.WorkerID {
	slices.Sort(ids)
	return ids
}
