package server

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"math/rand/v2"
	"net/http"
	"strings"
	"testing"

	"github.com/mooncake-go/mooncake/internal/base"
	"github.com/mooncake-go/mooncake/server/memory"
	"github.com/mooncake-go/mooncake/transfer"
)

// memoryReportOf asks the leader for the memory report through the Memory call.
func memoryReportOf(t *testing.T, d *driver) memory.MemoryReport {
	t.Helper()
	resp := &transfer.JSONResponse{Call: transfer.OpMemory}
	if err := d.call(transfer.NewEmpty(transfer.OpMemory), resp); err != nil {
		t.Fatal(err)
	}
	var r memory.MemoryReport
	if err := json.Unmarshal(resp.JSON, &r); err != nil {
		t.Fatal(err)
	}
	return r
}

// TestMemoryCluster: three masters, two workers. A model registered through any master and
// objects put with their tokens (a single PutEnd and a BatchPutEnd, two replicas each) give an
// expected report with both workers in it; after the leader stops, the new leader reports the
// same tokens (models and tokens are in raft) and a follower refuses Memory with NOT_LEADER.
func TestMemoryCluster(t *testing.T) {
	const bpt = 57344
	c := startMasters(t, 3, nil)
	c.addWorker("", nil)
	c.addWorker("", nil)
	d := newDriver(t, c.masterAddrs())
	if err := d.call(&transfer.ModelAddRequest{Name: "qwen2-7b", BytesPerToken: bpt, Description: "4 x 128 x 2 x 2 x 28"}, transfer.NewEmpty(transfer.OpModelAdd)); err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	cfg := base.PutConfig{Replicas: 2}
	start := func(key string, tokens int64) transfer.PutEndRequest {
		val := value(rng, int(tokens*bpt))
		ps := &transfer.PutStartResponse{}
		if err := d.call(&transfer.PutStartRequest{Object: base.Object{ObjectMeta: base.ObjectMeta{Key: key,
			Size: int64(len(val))}}, Config: cfg},
			ps); err != nil {
			t.Fatal(err)
		}
		sum := base.Checksum(val)
		var ids []base.WorkerID
		for _, r := range ps.Replicas {
			if err := d.cli.Write(context.Background(), r.Address, transfer.WriteRequest{Key: key, Version: ps.Version, Checksum: sum}, val); err != nil {
				t.Fatal(err)
			}
			ids = append(ids, r.WorkerID)
		}
		return transfer.PutEndRequest{Object: base.Object{ObjectMeta: base.ObjectMeta{Key: key, Version: ps.Version,
			Size: int64(len(val)), Checksum: sum}, Replicas: ids, Tokens: tokens, Model: "qwen2-7b"}, Config: cfg}
	}
	one := start("single", 8)
	if err := d.call(&one, transfer.NewEmpty(transfer.OpPutEnd)); err != nil {
		t.Fatal(err)
	}
	batch := &transfer.BatchPutEndRequest{Items: []transfer.PutEndRequest{start("b0", 4), start("b1", 16)}}
	resp := transfer.NewBatchResponse(transfer.OpBatchPutEnd, nil)
	if err := d.call(batch, resp); err != nil {
		t.Fatal(err)
	}
	for _, it := range resp.Items {
		if err := it.Err(); err != nil {
			t.Fatal(err)
		}
	}
	const tokens = 8 + 4 + 16
	check := func(what string) {
		t.Helper()
		var r memory.MemoryReport
		eventually(t, what, func() bool {
			r = memoryReportOf(t, d)
			return r.Verdict == memory.VerdictExpected && r.Tokens == tokens && len(r.Workers) == 2 && r.Workers[0].Error == "" && r.Workers[1].Error == ""
		})
		if r.ExpectedBytes != 2*tokens*bpt || r.Cluster.CommittedLogical != 2*tokens*bpt {
			t.Fatalf("%s: expected %d, workers hold %d; want %d", what, r.ExpectedBytes, r.Cluster.CommittedLogical, 2*tokens*bpt)
		}
	}
	check("report with two workers")

	old := c.leaderOf()
	for i, m := range c.masters {
		if m == old {
			if err := m.Shutdown(context.Background()); err != nil {
				t.Fatal(err)
			}
			c.masters[i] = nil
		}
	}
	d.leader = ""
	check("report from the new leader")
	for _, m := range c.masters {
		if m != nil && !m.IsLeader() {
			err := d.cli.Call(context.Background(), m.Addr(), transfer.NewEmpty(transfer.OpMemory), &transfer.JSONResponse{Call: transfer.OpMemory})
			var nl *transfer.NotLeaderError
			if !errors.As(err, &nl) {
				t.Fatalf("a follower's Memory: %v, want NOT_LEADER", err)
			}
		}
	}
}

// TestWorkerMemoryMetrics scrapes a worker with an NVMe tier: the memory gauges are there and
// no name is registered twice (a scrape with a duplicate fails with 500).
func TestWorkerMemoryMetrics(t *testing.T) {
	c := startMasters(t, 1, nil)
	w := c.addWorker(t.TempDir(), nil)
	resp, err := http.Get("http://" + w.MetricsAddr() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("scrape: %d: %s", resp.StatusCode, body)
	}
	for _, want := range []string{"worker_process_rss_bytes", "worker_go_heap_bytes", "worker_arena_touched_bytes", "worker_held_bytes",
		"worker_nvme_reclaimable_bytes", `worker_hits_total{tier="nvme"}`, "worker_nvme_used_bytes"} {
		if !strings.Contains(string(body), want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
	resp2, err := http.Get("http://" + w.MetricsAddr() + "/api/v1/memory")
	if err != nil {
		t.Fatal(err)
	}
	defer resp2.Body.Close()
	var wm memory.WorkerMemory
	if err := json.NewDecoder(resp2.Body).Decode(&wm); err != nil || wm.ID != string(w.ID()) || wm.ArenaCapacity != 32<<20 || wm.RSS <= 0 {
		t.Fatalf("worker /api/v1/memory: %+v %v", wm, err)
	}
}
