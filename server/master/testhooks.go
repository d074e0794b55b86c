package master

import (
	"github.com/go-zeromq/zmq4"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/mooncake-go/mooncake/internal/base"
	"github.com/mooncake-go/mooncake/raftmeta"
	"github.com/mooncake-go/mooncake/server/lifecycle"
	"github.com/mooncake-go/mooncake/transfer"
)

// TestHooks reach into a master for the cluster tests of package server, which build masters
// and workers together and so cannot be tests of this package (master never imports worker).
// Nothing else may use them: they bypass the master's calls and locks' discipline.
type TestHooks struct{ m *Master }

// TestHooks returns the master's test hooks.
func (m *Master) TestHooks() TestHooks { return TestHooks{m} }

// Node is the master's raft node.
func (h TestHooks) Node() *raftmeta.Node { return h.m.node }

// Status is the status document, as the status call answers it from this master.
func (h TestHooks) Status() Status { return h.m.status() }

// SetLeader moves the leader's soft state into or out of leadership, as an election does.
func (h TestHooks) SetLeader(leader bool) { h.m.setLeader(leader) }

// LifecycleWorker is the leader's soft state about worker id (false when it has none).
func (h TestHooks) LifecycleWorker(id base.WorkerID) (lifecycle.Worker, bool) {
	h.m.mu.Lock()
	defer h.m.mu.Unlock()
	return h.m.mu.lc.Worker(id)
}

// RegisterSessions counts the paged registration sessions the leader holds, and their bytes.
func (h TestHooks) RegisterSessions() (n int, bytes int64) {
	h.m.mu.Lock()
	defer h.m.mu.Unlock()
	return h.m.mu.lc.Sessions()
}

// RegisterPages counts the pages of paged registrations this master accepted.
func (h TestHooks) RegisterPages() int64 { return h.m.regPages.Load() }

// RegisterObjectOverhead is what one inventory entry adds to its key's bytes in a page.
func (TestHooks) RegisterObjectOverhead() int { return registerObjectOverhead }

// Calls returns the request and failure counts of the call whose metric stem is name
// ("put_start", "batch_put_end", "get_replica_list", ...; master_<name>_requests_total).
func (h TestHooks) Calls(name string) (requests, failures uint64) {
	for op := range numMasterOps {
		if masterOpNames[op][0] == name {
			c := &h.m.met.ops[op]
			return c.Requests.Load(), c.Failures.Load()
		}
	}
	panic("master: no call with metric stem " + name)
}

// Registry is the registry the master's /metrics serves.
func (h TestHooks) Registry() *prometheus.Registry { return h.m.met.reg }

// WorkerStatsTotals are the workers' stats sections summed by the leader.
func (h TestHooks) WorkerStatsTotals() transfer.WorkerStats { return h.m.met.mc.workers.totals() }

// KVAddr is the KV event publisher's bound endpoint.
func (h TestHooks) KVAddr() string { return h.m.kv.addr }

// KVSubscribed reports whether the KV event publisher's socket has a subscription.
func (h TestHooks) KVSubscribed() bool { return len(h.m.kv.sock.(zmq4.Topics).Topics()) > 0 }

// MuteKV makes the KV event publisher pass over batches without sending them (true) or
// send again (false).
func (h TestHooks) MuteKV(mute bool) { h.m.kv.testMute.Store(mute) }

// KVStatus is the KV event publisher's part of the status document.
func (h TestHooks) KVStatus() map[string]any { return h.m.kv.status() }

// Crash stops serving calls and closes the raft node at once, as a killed process would,
// without the graceful shutdown (the master is unusable afterwards; Shutdown is not needed).
func (h TestHooks) Crash() error {
	_ = h.m.rpc.Srv.Close()
	<-h.m.rpc.Done
	return h.m.node.Close()
}

// NoSeriesDescs are the declarations of Mooncake's metrics this master exports with no series
// yet (segment and tenant ones), as strings.
func (TestHooks) NoSeriesDescs() []string {
	return []string{descNoFSegAllocated.String(), descNoFSegCapacity.String(), descTenantRejects.String()}
}
