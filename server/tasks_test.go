package server

import (
	"context"
	"errors"
	"maps"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/mooncake-go/mooncake/internal/base"
	"github.com/mooncake-go/mooncake/internal/testutil"
	"github.com/mooncake-go/mooncake/server/lifecycle"
	"github.com/mooncake-go/mooncake/server/master"
	"github.com/mooncake-go/mooncake/server/worker"
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

// scrapeSeries reads series (a name with its labels, as the text format writes them) from the
// master's /metrics.
func scrapeSeries(t *testing.T, m *master.Master, series ...string) map[string]float64 {
	t.Helper()
	code, body := httpGet(t, "http://"+m.MetricsAddr()+"/metrics")
	if code != 200 {
		t.Fatalf("/metrics: %d", code)
	}
	out := map[string]float64{}
	for _, line := range strings.Split(body, "\n") {
		for _, s := range series {
			if v, ok := strings.CutPrefix(line, s+" "); ok {
				f, err := strconv.ParseFloat(v, 64)
				if err != nil {
					t.Fatalf("%q: %v", line, err)
				}
				out[s] = f
			}
		}
	}
	for _, s := range series {
		if _, ok := out[s]; !ok {
			t.Fatalf("/metrics has no series %s", s)
		}
	}
	return out
}

// awaitTask queries task id until it ends and returns its last state.
func awaitTask(t *testing.T, d *driver, id base.TaskID) transfer.QueryTaskResponse {
	t.Helper()
	var q transfer.QueryTaskResponse
	eventually(t, "the task ends", func() bool {
		if err := d.call(&transfer.QueryTaskRequest{ID: id}, &q); err != nil {
			t.Fatal(err)
		}
		return q.Status == base.TaskSuccess || q.Status == base.TaskFailed
	})
	return q
}

// TestCreateTaskResend: CreateTask is safe to resend. A proxy in front of the master cuts the
// connection instead of passing on the first CreateTask answer; the transfer client sends
// the call again on a new connection and gets the task the first one created: the master
// served two requests (Mooncake's counter) and created one task (ours), which copies once.
// The same id with another key is refused; a request without an id (an older client) gets
// one the leader chooses. The task metrics count copies and moves by type and outcome.
func TestCreateTaskResend(t *testing.T) {
	c := startMasters(t, 1, nil)
	wa := c.addWorker(t.TempDir(), nil)
	wb := c.addWorker(t.TempDir(), nil)
	d := newDriver(t, c.masterAddrs())
	rng := rand.New(rand.NewPCG(20, 1))
	k, k2 := value(rng, 40<<10), value(rng, 3000)
	if err := d.putOn("k", k, wa.ID()); err != nil {
		t.Fatal(err)
	}
	if err := d.putOn("k2", k2, wa.ID()); err != nil {
		t.Fatal(err)
	}
	var cuts atomic.Int32
	proxy := testutil.CutAnswers(t, c.masters[0].Addr(), func(op uint8) bool {
		return transfer.Op(op) == transfer.OpCreateTask && cuts.CompareAndSwap(0, 1)
	})
	cli, err := transfer.NewClient(transfer.ClientOptions{Logger: testLogger()})
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	ctx, cancel := context.WithTimeout(context.Background(), testWait)
	defer cancel()
	req := &transfer.CreateTaskRequest{Type: base.TaskCopy, Key: "k", Targets: []string{string(wb.ID())}, ID: base.TaskID{Hi: 20, Lo: 1}}
	var resp transfer.CreateTaskResponse
	if err := cli.Call(ctx, proxy, req, &resp); err != nil || resp.ID != req.ID {
		t.Fatalf("CreateTask through the cutting proxy: %+v, %v", resp, err)
	}
	if cuts.Load() != 1 {
		t.Fatal("the proxy never cut a CreateTask answer: nothing was resent")
	}
	if q := awaitTask(t, d, req.ID); q.Status != base.TaskSuccess {
		t.Fatalf("the resent task ended as %+v", q)
	}
	d.mustGet("k", k, 2)
	// Sent again once the task is done: still the same task, nothing queued.
	if err := d.call(req, &resp); err != nil || resp.ID != req.ID {
		t.Fatalf("CreateTask resent after its task ended: %+v, %v", resp, err)
	}
	bad := *req
	bad.Key = "k2"
	if err := d.call(&bad, &resp); !errors.Is(err, base.ErrInvalidParams) {
		t.Fatalf("the same task id on another key: %v", err)
	}
	// An older client's request (no id): the leader chooses one. A move of k2 from wa to wb.
	if err := d.call(&transfer.CreateTaskRequest{Type: base.TaskMove, Key: "k2", Source: string(wa.ID()), Targets: []string{string(wb.ID())}}, &resp); err != nil ||
		resp.ID == (base.TaskID{}) || resp.ID == req.ID {
		t.Fatalf("CreateTask without an id: %+v, %v", resp, err)
	}
	if q := awaitTask(t, d, resp.ID); q.Status != base.TaskSuccess {
		t.Fatalf("the move ended as %+v", q)
	}
	want := map[string]float64{
		// The first CreateTask, its resend after the cut, the resend after the end, the
		// refused one; one move.
		"master_create_copy_task_requests_total":                 4,
		"master_create_copy_task_failures_total":                 1,
		"master_create_move_task_requests_total":                 1,
		`master_tasks_created_total{type="copy"}`:                1,
		`master_tasks_created_total{type="move"}`:                1,
		`master_tasks_ended_total{status="success",type="copy"}`: 1,
		`master_tasks_ended_total{status="success",type="move"}`: 1,
		`master_tasks_ended_total{status="failed",type="copy"}`:  0,
		`master_tasks{status="success",type="copy"}`:             1,
		`master_tasks{status="success",type="move"}`:             1,
		`master_tasks{status="pending",type="copy"}`:             0,
	}
	got := scrapeSeries(t, c.masters[0], append(slices.Collect(maps.Keys(want)), "master_query_task_requests_total")...)
	for s, v := range want {
		if got[s] != v {
			t.Errorf("%s = %v, want %v", s, got[s], v)
		}
	}
	if got["master_query_task_requests_total"] < 2 {
		t.Errorf("master_query_task_requests_total = %v: the queries were not counted", got["master_query_task_requests_total"])
	}
}

// TestTaskFailsWhenTargetUnmounts: a copy task whose target segment (an embedded client's
// worker) unmounts while the copy is in flight ends FAILED, and QueryTask answers Mooncake's
// QueryTaskResponse for it: type, key, status PROCESSING while the copy runs and FAILED after,
// created and updated times, the worker that copies, and the reason naming the target. The
// object stays where it was; the metrics count the failure.
func TestTaskFailsWhenTargetUnmounts(t *testing.T) {
	copying := make(chan lifecycle.CopyOrder, 1)
	hold := make(chan struct{})
	c := startMasters(t, 1, func(cfg *master.Config) {
		cfg.Test.BeforeCopy = func(o lifecycle.CopyOrder) {
			select {
			case copying <- o: // the first copy waits for the test
				<-hold
			default:
			}
		}
	})
	released := false
	release := func() {
		if !released {
			released = true
			close(hold)
		}
	}
	t.Cleanup(release) // before the cluster's shutdown, which waits for the copies
	wa := c.addWorker(t.TempDir(), nil)
	wt := c.addWorker("", func(cfg *worker.Config) { cfg.WorkerID = "embedded-target"; cfg.Ephemeral = true })
	d := newDriver(t, c.masterAddrs())
	v := value(rand.New(rand.NewPCG(20, 2)), 20<<10)
	if err := d.putOn("k", v, wa.ID()); err != nil {
		t.Fatal(err)
	}
	id := base.TaskID{Hi: 20, Lo: 3}
	var resp transfer.CreateTaskResponse
	if err := d.call(&transfer.CreateTaskRequest{Type: base.TaskCopy, Key: "k", Targets: []string{string(wt.ID())}, ID: id}, &resp); err != nil {
		t.Fatal(err)
	}
	o := <-copying
	if o.Task != id || o.To != wt.ID() || o.Src != wa.ID() {
		t.Fatalf("copy order %+v", o)
	}
	var q transfer.QueryTaskResponse
	if err := d.call(&transfer.QueryTaskRequest{ID: id}, &q); err != nil || q.Status != base.TaskProcessing {
		t.Fatalf("task while its copy runs: %+v, %v", q, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), testWait)
	defer cancel()
	if err := wt.Shutdown(ctx); err != nil { // an ephemeral worker unmounts (LeaveWorker)
		t.Fatal(err)
	}
	release()
	q = awaitTask(t, d, id)
	if q.Status != base.TaskFailed || q.Type != base.TaskCopy || q.Key != "k" || q.AssignedClient != string(wa.ID()) ||
		q.CreatedMs <= 0 || q.UpdatedMs < q.CreatedMs || !strings.Contains(q.Message, string(wt.ID())) {
		t.Fatalf("task whose target unmounted: %+v", q)
	}
	d.mustGet("k", v, 1)
	got := scrapeSeries(t, c.masters[0], `master_tasks_ended_total{status="failed",type="copy"}`, `master_tasks{status="failed",type="copy"}`,
		`master_tasks_created_total{type="copy"}`)
	if got[`master_tasks_ended_total{status="failed",type="copy"}`] != 1 || got[`master_tasks{status="failed",type="copy"}`] != 1 ||
		got[`master_tasks_created_total{type="copy"}`] != 1 {
		t.Fatalf("task metrics after the failure: %v", got)
	}
}
