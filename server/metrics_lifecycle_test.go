package server

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/mooncake-go/mooncake/server/lifecycle"
)

// TestRepairMetrics: the repair counters count copies, failures and bytes, the lifecycle
// counters leaves and lost connections; the gauges read the master at scrape time.
func TestRepairMetrics(t *testing.T) {
	reg := prometheus.NewRegistry()
	var r repairMetrics
	r.register(reg, func() repairGauges {
		return repairGauges{UnderReplicated: 5, DrainingReplicas: 2, Queued: 3, InFlight: 1, LostReplicas: 9, InvisibleObjects: 4}
	})
	r.copy(100, nil)
	r.copy(50, nil)
	r.copy(70, errors.New("x"))
	r.leaves.Add(1)
	r.disconnects.Add(2)
	const want = `
# HELP master_repair_copies_total Object copies repair and drain made, worker to worker.
# TYPE master_repair_copies_total counter
master_repair_copies_total 2
# HELP master_repair_copy_failures_total Repair and drain copies that failed (planned again by the next scan).
# TYPE master_repair_copy_failures_total counter
master_repair_copy_failures_total 1
# HELP master_repair_copied_bytes_total Bytes repair and drain copied.
# TYPE master_repair_copied_bytes_total counter
master_repair_copied_bytes_total 150
# HELP master_under_replicated_objects Objects with a replica lost on a dead worker, at the last repair scan (leader only).
# TYPE master_under_replicated_objects gauge
master_under_replicated_objects 5
# HELP master_draining_replicas Replicas on draining workers, at the last repair scan (leader only).
# TYPE master_draining_replicas gauge
master_draining_replicas 2
# HELP master_repair_queued Repair and drain copies queued (leader only).
# TYPE master_repair_queued gauge
master_repair_queued 3
# HELP master_repair_in_flight Repair and drain copies running (leader only).
# TYPE master_repair_in_flight gauge
master_repair_in_flight 1
# HELP master_lost_replicas Replicas of dead workers the metadata keeps for re-adoption.
# TYPE master_lost_replicas gauge
master_lost_replicas 9
# HELP master_invisible_objects Objects whose every replica is on a dead worker (invisible until it returns).
# TYPE master_invisible_objects gauge
master_invisible_objects 4
# HELP master_worker_disconnects_total Workers whose connection to the leader closed without a leave or restart announcement (no new puts from then; dead after client_disconnect_grace unless they reconnect).
# TYPE master_worker_disconnects_total counter
master_worker_disconnects_total 2
# HELP master_worker_leaves_total Workers unmounted on purpose (an embedded client's close: LeaveWorker committed).
# TYPE master_worker_leaves_total counter
master_worker_leaves_total 1
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want)); err != nil {
		t.Fatal(err)
	}
}

// workersByState scrapes master_workers from the leader's registry: the value of each state's
// series (every listed state must have one). nil while no master leads.
func workersByState(t *testing.T, c *testCluster) map[string]float64 {
	t.Helper()
	m := c.leaderOf()
	if m == nil {
		return nil
	}
	mfs, err := m.met.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, mf := range mfs {
		if mf.GetName() != "master_workers" {
			continue
		}
		for _, s := range mf.GetMetric() {
			got[s.GetLabel()[0].GetValue()] = s.GetGauge().GetValue()
		}
	}
	for _, st := range lifecycle.ListedStates() {
		if _, ok := got[st.String()]; !ok {
			t.Fatalf("master_workers has no series for state %s: %v", st, got)
		}
	}
	return got
}

// TestWorkersByStateGauge: the leader's master_workers{state} follows the lifecycle: three
// alive workers; one leaves on purpose (left), one crashes (unreachable, then dead).
func TestWorkersByStateGauge(t *testing.T) {
	c := startMasters(t, 3, func(cfg *MasterConfig) {
		cfg.ClientTTL = time.Hour // only the connection's close makes the crashed worker dead
		cfg.ClientDisconnectGrace = 300 * time.Millisecond
	})
	c.addWorker(t.TempDir(), func(cfg *WorkerConfig) { cfg.WorkerID = "leaver"; cfg.Ephemeral = true })
	crash := c.addWorker("", func(cfg *WorkerConfig) { cfg.testNoLeavingBeat = true })
	c.addWorker("", nil)
	want := func(what string, alive, left, dead float64) {
		t.Helper()
		eventually(t, what, func() bool {
			g := workersByState(t, c)
			return g != nil && g["alive"] == alive && g["left"] == left && g["dead"] == dead
		})
	}
	want("three alive", 3, 0, 0)
	eventually(t, "the crashing worker attached", func() bool { return attached(c, crash.ID()) })
	c.stopWorker(0)
	want("one left", 2, 1, 0)
	c.stopWorker(1)
	want("one dead", 1, 1, 1)
	if g := workersByState(t, c); g["unreachable"] != 0 || g["registering"] != 0 {
		t.Fatalf("master_workers after the crash: %v", g)
	}
}
