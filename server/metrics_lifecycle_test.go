package server

import (
	"testing"
	"time"

	"github.com/mooncake-go/mooncake/server/lifecycle"
	"github.com/mooncake-go/mooncake/server/master"
	"github.com/mooncake-go/mooncake/server/worker"
)

// workersByState scrapes master_workers from the leader's registry: the value of each state's
// series (every listed state must have one). nil while no master leads.
func workersByState(t *testing.T, c *testCluster) map[string]float64 {
	t.Helper()
	m := c.leaderOf()
	if m == nil {
		return nil
	}
	mfs, err := m.TestHooks().Registry().Gather()
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
	c := startMasters(t, 3, func(cfg *master.Config) {
		cfg.ClientTTL = time.Hour // only the connection's close makes the crashed worker dead
		cfg.ClientDisconnectGrace = 300 * time.Millisecond
	})
	c.addWorker(t.TempDir(), func(cfg *worker.Config) { cfg.WorkerID = "leaver"; cfg.Ephemeral = true })
	crash := c.addWorker("", func(cfg *worker.Config) { cfg.Test.NoLeavingBeat = true })
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
