package client_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mooncake-go/mooncake/client"
	"github.com/mooncake-go/mooncake/internal/base"
	"github.com/mooncake-go/mooncake/internal/testutil"
	"github.com/mooncake-go/mooncake/transfer"
)

// TestCopyAndMoveTasks: the client's task calls against a master and three workers: a copy
// to w2 and a move from w1 to w3 end in SUCCESS, Describe shows where the replicas went, and
// bad requests fail with the sentinels the docs name.
func TestCopyAndMoveTasks(t *testing.T) {
	ip := startInproc(t, 3, 16<<20)
	c := connect(t, ip)
	ctx := context.Background()
	val := bytes.Repeat([]byte("task"), 5000)
	if err := c.Put(ctx, "k", val, client.ReplicateConfig{PreferredWorker: "w1"}); err != nil {
		t.Fatal(err)
	}
	holders := func() []base.WorkerID {
		info, err := c.Describe(ctx, "k")
		if err != nil {
			t.Fatal(err)
		}
		var ids []base.WorkerID
		for _, r := range info.Replicas {
			ids = append(ids, r.WorkerID)
		}
		slices.Sort(ids)
		return ids
	}
	wait := func(id base.TaskID, typ base.TaskType) {
		t.Helper()
		testutil.WaitFor(t, fmt.Sprintf("task %v to succeed", id), 30*time.Second, func() error {
			ti, err := c.QueryTask(ctx, id)
			if err != nil {
				t.Fatal(err)
			}
			switch ti.Status {
			case base.TaskSuccess:
				if ti.Type != typ || ti.Key != "k" || ti.ID != id || ti.AssignedClient == "" || ti.Created.IsZero() {
					t.Fatalf("task ended as %+v", ti)
				}
				return nil
			case base.TaskFailed:
				t.Fatalf("task %+v did not succeed", ti)
			}
			return fmt.Errorf("task %+v", ti)
		})
	}
	id, err := c.CreateCopyTask(ctx, "k", []string{"w2"})
	if err != nil {
		t.Fatal(err)
	}
	wait(id, base.TaskCopy)
	if got := holders(); !slices.Equal(got, []base.WorkerID{"w1", "w2"}) {
		t.Fatalf("after the copy to w2: replicas on %v", got)
	}
	id, err = c.CreateMoveTask(ctx, "k", "w1", "w3")
	if err != nil {
		t.Fatal(err)
	}
	wait(id, base.TaskMove)
	if got := holders(); !slices.Equal(got, []base.WorkerID{"w2", "w3"}) {
		t.Fatalf("after the move from w1 to w3: replicas on %v", got)
	}
	if got, err := c.Get(ctx, "k"); err != nil || !bytes.Equal(got, val) {
		t.Fatalf("get after the move: %v", err)
	}

	if _, err := c.CreateCopyTask(ctx, "absent", []string{"w2"}); !errors.Is(err, base.ErrObjectNotFound) {
		t.Errorf("copy of an absent key: %v", err)
	}
	if _, err := c.CreateCopyTask(ctx, "k", []string{"w9"}); !errors.Is(err, base.ErrSegmentNotFound) {
		t.Errorf("copy to an unknown worker: %v", err)
	}
	if _, err := c.CreateMoveTask(ctx, "k", "w2", "w2"); !errors.Is(err, base.ErrInvalidParams) {
		t.Errorf("move onto its source: %v", err)
	}
	if _, err := c.QueryTask(ctx, base.TaskID{Hi: 9, Lo: 9}); !errors.Is(err, base.ErrObjectNotFound) {
		t.Errorf("query of an unknown task: %v", err)
	}
}

// TestCreateTaskResent: the client names each task it creates, so its resend after a lost
// answer (a proxy cuts the connection instead of passing on the first CreateTask answer)
// gets the task the first attempt created: the master served the call twice and created one
// task, which copies once.
func TestCreateTaskResent(t *testing.T) {
	ip := startInproc(t, 2, 16<<20)
	var cuts atomic.Int32
	proxy := testutil.CutAnswers(t, ip.master.Addr(), func(op uint8) bool {
		return transfer.Op(op) == transfer.OpCreateTask && cuts.CompareAndSwap(0, 1)
	})
	ctx := context.Background()
	c, err := client.Connect(ctx, client.Config{MasterAddresses: []string{proxy}, Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	waitActive(t, c, 2)
	val := bytes.Repeat([]byte("resent"), 3000)
	if err := c.Put(ctx, "k", val, client.ReplicateConfig{PreferredWorker: "w1"}); err != nil {
		t.Fatal(err)
	}
	id, err := c.CreateCopyTask(ctx, "k", []string{"w2"})
	if err != nil {
		t.Fatal(err)
	}
	if cuts.Load() != 1 {
		t.Fatal("the proxy never cut a CreateTask answer: nothing was resent")
	}
	testutil.WaitFor(t, "the task to succeed", 30*time.Second, func() error {
		ti, err := c.QueryTask(ctx, id)
		if err != nil || ti.Status == base.TaskFailed {
			t.Fatalf("task %+v, %v", ti, err)
		}
		if ti.Status != base.TaskSuccess {
			return fmt.Errorf("task %+v", ti)
		}
		return nil
	})
	if req, fail := ip.master.TestHooks().Calls("create_copy_task"); req != 2 || fail != 0 {
		t.Fatalf("the master served CreateTask %d times (%d failed), want 2 (a resend)", req, fail)
	}
	mfs, err := ip.master.TestHooks().Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	created := -1.0
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			if mf.GetName() == "master_tasks_created_total" && m.GetLabel()[0].GetValue() == "copy" {
				created = m.GetCounter().GetValue()
			}
		}
	}
	if created != 1 {
		t.Fatalf("master_tasks_created_total{type=\"copy\"} = %v, want 1", created)
	}
	if info, err := c.Describe(ctx, "k"); err != nil || len(info.Replicas) != 2 {
		t.Fatalf("k after its copy: %+v, %v", info, err)
	}
}
