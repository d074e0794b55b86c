package worker

import (
	"cmp"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/mooncake-go/mooncake/internal/base"
	"github.com/mooncake-go/mooncake/tier"
	"github.com/mooncake-go/mooncake/transfer"
)

// TestHooks reach into a worker for the cluster tests of package server, which build masters
// and workers together and so cannot be tests of this package (worker never imports master).
// Nothing else may use them: they bypass the worker's calls.
type TestHooks struct{ w *Worker }

// TestHooks returns the worker's test hooks.
func (w *Worker) TestHooks() TestHooks { return TestHooks{w} }

// PendingWrite names one write assembled but not committed: a key at a version.
type PendingWrite struct {
	Key     string
	Version base.Version
}

// Engine is the worker's tier engine.
func (h TestHooks) Engine() *tier.Engine { return h.w.eng }

// Status is the worker's own status document (/api/v1/status).
func (h TestHooks) Status() WorkerLocalStatus { return h.w.status() }

// BeginWrite starts assembling a write of req's object as a Write call would, n bytes of
// its payload to come; the sink takes them.
func (h TestHooks) BeginWrite(req *transfer.WriteRequest, n int64) (transfer.WriteSink, error) {
	return h.w.beginWrite(req, n)
}

// PendingWrites lists the writes assembled and not committed, by key, then version.
func (h TestHooks) PendingWrites() []PendingWrite {
	h.w.pend.Lock()
	defer h.w.pend.Unlock()
	var out []PendingWrite
	for _, k := range slices.Collect(maps.Keys(h.w.pend.m)) {
		out = append(out, PendingWrite{Key: k.key, Version: k.v})
	}
	slices.SortFunc(out, func(a, b PendingWrite) int {
		return cmp.Or(strings.Compare(a.Key, b.Key), cmp.Compare(a.Version, b.Version))
	})
	return out
}

// Drop drops key at version v (0: every version) as a heartbeat reply's drop does.
func (h TestHooks) Drop(key string, v base.Version) error { return h.w.drop(key, v) }

// Dropped reports whether a drop of key at v is remembered (a Write arriving for it is refused).
func (h TestHooks) Dropped(key string, v base.Version) bool {
	h.w.pend.Lock()
	defer h.w.pend.Unlock()
	return h.w.pend.droppedLocked(pendKey{key, v})
}

// SetBeforeCommit sets (nil: clears) a hook run just before each tier commit.
func (h TestHooks) SetBeforeCommit(f *func(key string, v base.Version)) {
	h.w.testBeforeCommit.Store(f)
}

// DropsFetchedEarly counts the drops brought by heartbeats sent early to fetch them.
func (h TestHooks) DropsFetchedEarly() int64 { return h.w.dropFetch.drops.Load() }

// HeartbeatRounds counts the control loop's successful heartbeat rounds (one beat each, or
// several back to back while the leader owes more drops than one answer carries).
func (h TestHooks) HeartbeatRounds() int64 { return h.w.beats.Load() }

// Registrations counts the worker's successful registrations.
func (h TestHooks) Registrations() int64 { return h.w.registered.Load() }

// Reregister makes the worker register again at its next heartbeat.
func (h TestHooks) Reregister() { h.w.reregister.Store(true) }

// Leader is the address of the master the worker last found leading ("" while none).
func (h TestHooks) Leader() string {
	l, _ := h.w.leader.Load().(string)
	return l
}

// HeartbeatTimeout bounds one heartbeat call (a share of the master's client_ttl).
func (h TestHooks) HeartbeatTimeout() time.Duration { return h.w.heartbeatTimeout() }

// BreakAttachment closes the connection of the worker's AttachWorker call to the leader, as
// a network reset would; the process lives on and attaches again.
func (h TestHooks) BreakAttachment() { h.w.attach.cli.ClosePeer(h.Leader()) }

// ShmLeases counts the shared-memory leases clients hold.
func (h TestHooks) ShmLeases() int { return h.w.shm.count() }

// ShmPutStages counts the staging areas open for same-host puts.
func (h TestHooks) ShmPutStages() int { return h.w.stages.count() }

// RPCStats are the data server's connection counters.
func (h TestHooks) RPCStats() transfer.ServerStats { return h.w.rpc.Srv.Stats() }

// ShmPutStageSize is the size of one staging area; ShmPutMaxStages bounds the areas open.
const (
	ShmPutStageSize = shmPutStageSize
	ShmPutMaxStages = shmPutMaxStages
)

// InventoryPages splits an inventory into the pages of one registration, with the
// production bounds.
func (TestHooks) InventoryPages(inv []base.ObjectMeta) [][]base.ObjectMeta {
	return inventoryPages(inv, registerPageObjects, registerPageBytes)
}
