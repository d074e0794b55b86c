package client_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/mooncake-go/mooncake/client"
	"github.com/mooncake-go/mooncake/internal/base"
	"github.com/mooncake-go/mooncake/internal/testutil"
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
