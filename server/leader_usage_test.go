package server

import (
	"bytes"
	"fmt"
	"testing"
	"time"

	"github.com/mooncake-go/mooncake/server/worker"
)

// TestNewLeaderEstimatesWorkerUse: a master that becomes leader does not take the workers for
// empty until they heartbeat to it: their DRAM use starts at the bytes of the replicas the
// FSM lists on them.
func TestNewLeaderEstimatesWorkerUse(t *testing.T) {
	c := startMasters(t, 1, nil)
	w := c.addWorker("", func(cfg *worker.Config) {
		cfg.GlobalSegmentSize = 16 << 20
		cfg.HeartbeatInterval = time.Hour // no heartbeat overwrites the estimate during the test
	})
	d := newDriver(t, c.masterAddrs())
	for i := range 3 {
		if err := d.put(fmt.Sprintf("k%d", i), bytes.Repeat([]byte{1}, 1<<20), 1, false); err != nil {
			t.Fatal(err)
		}
	}
	m := c.masters[0]
	m.TestHooks().SetLeader(false)
	m.TestHooks().SetLeader(true) // as after an election: worker soft state rebuilt from the FSM
	ws, ok := m.TestHooks().LifecycleWorker(w.ID())
	if !ok || ws.Usage.DRAMUsed != 3<<20 || ws.Usage.DRAMCapacity != 16<<20 {
		t.Fatalf("new leader's view of %s: %+v, want 3 MiB used of 16 MiB", w.ID(), ws)
	}
}
