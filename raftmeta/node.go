package raftmeta

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
	raftboltdb "github.com/hashicorp/raft-boltdb/v2"
	"go.etcd.io/bbolt"

	"github.com/mooncake-go/mooncake/internal/base"
)

// The Node's lifecycle (Open, Bootstrap, Close) and leadership (Leader, LeaderCh, the
// goroutine that follows elections and registers the masters' addresses). Writes through raft
// are in node_apply.go, local reads in node_read.go, the FSM's raft side in fsm_raft.go.

// logCacheEntries is the number of the most recent raft log entries kept in memory in front of
// bolt (raft.LogCache). A PutEnd of one object is ~100 bytes and one of 64 objects ~4-7 KB, so
// it holds well under a megabyte in practice; the bound is logCacheEntries x MaxCommandBytes
// (256 MiB) if every recent entry were a maximal batch. 64 covers what the leader sends in one
// round of AppendEntries to a follower that keeps up and what a follower applies per commit;
// a follower further behind reads from bolt as before.
const logCacheEntries = 64

// Node is one master's replica of the metadata: a raft server with its FSM. All methods are
// goroutine-safe.
type Node struct {
	cfg   Config
	log   *slog.Logger
	fsm   *fsm
	raft  *raft.Raft
	trans *raft.NetworkTransport
	store *raftboltdb.BoltStore

	// leaderCh receives true when this node becomes leader and false when it stops, latest
	// value wins (buffer 1, older values are replaced), as raft.LeaderCh does.
	leaderCh chan bool

	// peers is the initial membership: Config.Peers, or what Bootstrap was given (which may
	// run while raft already elects, hence the lock). registerMasters reads it.
	peers struct {
		mu   sync.Mutex // protects list
		list []Peer
	}

	// barrierTerm is the last term in which this node, as leader, saw a Barrier complete: from
	// then on its FSM holds every entry committed before its term. A new leader's FSM may lag
	// the log (hashicorp/raft applies earlier-term entries only once the leader commits in its
	// own term), so VerifyLeader waits for a barrier once per term.
	barrierTerm atomic.Uint64

	ver struct {
		mu   sync.Mutex // protects term and next
		term uint64     // the term the counter belongs to
		next uint64     // next counter value in term
	}

	// waiting counts goroutines blocked on a raft future (waitFuture). Close lets them finish
	// before shutting raft down: raft never answers a future still queued in one of its
	// buffered channels (VerifyLeader's, for one) when it shuts down.
	waiting struct {
		mu      sync.Mutex    // protects n and drained
		n       int           // goroutines waiting on a future
		drained chan struct{} // set by Close; closed when n drops to 0
	}

	// obs counts leader changes and commit latencies (obs.go).
	obs nodeObs

	closeOnce sync.Once
	closeErr  error
	closed    chan struct{} // closed by Close; stops the background goroutine
	wg        sync.WaitGroup
}

// Open starts a node. With a DataDir that holds no raft state and a non-empty Peers it
// bootstraps a new cluster of Peers; with existing state it resumes and never bootstraps again
// (Peers is then ignored: membership lives in the log).
func Open(cfg Config) (*Node, error) {
	cfg.EnsureDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(cfg.DataDir, 0o750); err != nil {
		return nil, fmt.Errorf("raftmeta: data dir: %w", err)
	}
	n := &Node{
		cfg:      cfg,
		log:      cfg.Logger.With("component", "raftmeta", "id", cfg.ID),
		fsm:      newFSM(),
		leaderCh: make(chan bool, 1),
		closed:   make(chan struct{}),
	}
	n.peers.list = slices.Clone(cfg.Peers)
	hl := newHCLogger(cfg.Logger, "raft")
	var err error
	n.store, err = raftboltdb.New(raftboltdb.Options{Path: filepath.Join(cfg.DataDir, "raft.db"), NoSync: cfg.NoSync, BoltOptions: boltOptions()})
	if err != nil {
		return nil, fmt.Errorf("raftmeta: open log store: %w", err)
	}
	snaps, err := raft.NewFileSnapshotStoreWithLogger(cfg.DataDir, cfg.RetainSnapshots, hl.Named("snapshot"))
	if err != nil {
		n.store.Close()
		return nil, fmt.Errorf("raftmeta: open snapshot store: %w", err)
	}
	n.trans, err = raft.NewTCPTransportWithConfig(cfg.RaftAddr, nil, transportConfig(hl))
	if err != nil {
		n.store.Close()
		return nil, fmt.Errorf("raftmeta: raft transport on %s: %w", cfg.RaftAddr, err)
	}
	existing, err := raft.HasExistingState(n.store, n.store, snaps)
	if err != nil {
		n.closeStores()
		return nil, fmt.Errorf("raftmeta: inspect data dir: %w", err)
	}
	rc := cfg.raftConfig()
	var trans raft.Transport = n.trans
	if cfg.WrapTransport != nil {
		trans = cfg.WrapTransport(n.trans)
	}
	// NB: raft reads every entry back from its LogStore after writing it: the leader to send
	// it to each follower (replicateTo), a follower to apply it once committed (processLogs).
	// From bolt each read is a read transaction plus a msgpack decode (12% of the CPU of a
	// three-node BenchmarkCommit); the cache answers them from the entries just written. It
	// is not a second copy of the log: the same *raft.Log values raft already holds. Under
	// it, timedLogStore times each write (LogStoreLatency).
	logs, err := raft.NewLogCache(logCacheEntries, timedLogStore{LogStore: n.store, obs: &n.obs})
	if err != nil {
		n.closeStores()
		return nil, fmt.Errorf("raftmeta: log cache: %w", err)
	}
	n.raft, err = raft.NewRaft(rc, n.fsm, logs, n.store, snaps, trans)
	if err != nil {
		n.closeStores()
		return nil, fmt.Errorf("raftmeta: start raft: %w", err)
	}
	obsCh, observer := n.newLeaderObserver()
	n.wg.Add(1)
	go n.watchLeadership(obsCh, observer)
	if !existing && len(cfg.Peers) > 0 {
		peers := slices.Clone(cfg.Peers)
		for i := range peers {
			if n.selfOnPortZero(peers[i]) {
				peers[i].RaftAddr = n.RaftAddr()
			}
		}
		if err := n.Bootstrap(peers); err != nil {
			n.Close()
			return nil, err
		}
	}
	if existing && len(cfg.Peers) > 0 {
		n.warnPeersIgnored(cfg.Peers)
	}
	if existing {
		n.electIfSoleVoter()
	}
	n.log.Info("raftmeta: node started", "raft_addr", n.RaftAddr(), "existing_state", existing)
	return n, nil
}

// selfOnPortZero reports whether p is this node configured on port 0 (standalone, tests): it is
// at whatever address the transport bound (Node.RaftAddr).
func (n *Node) selfOnPortZero(p Peer) bool {
	return p.ID == n.cfg.ID && strings.HasSuffix(p.RaftAddr, ":0")
}

// warnPeersIgnored logs, once at start, when the configured peers differ from the raft
// configuration the data directory holds: the peers only bootstrap a new directory, so a
// directory kept from another cluster (other members or addresses) wins silently otherwise,
// and such a node can follow a leader while its own configuration names peers that do not
// exist (it then never elects a leader after a failover).
func (n *Node) warnPeersIgnored(peers []Peer) {
	have, err := n.Servers()
	if err != nil {
		return
	}
	// This node configured on port 0 is at whatever address it bound: compare the other
	// members only.
	selfAny := slices.ContainsFunc(peers, n.selfOnPortZero)
	key := func(ps []Peer) []string {
		out := make([]string, 0, len(ps))
		for _, p := range ps {
			if selfAny && p.ID == n.cfg.ID {
				continue
			}
			out = append(out, p.ID+"="+p.RaftAddr)
		}
		slices.Sort(out)
		return out
	}
	if want, got := key(peers), key(have); !slices.Equal(want, got) {
		n.log.Warn("raftmeta: --peers differs from the raft configuration in the data directory, which wins (peers only bootstrap a new directory; membership changes go through master add/remove)",
			"peers", strings.Join(want, ","), "configuration", strings.Join(got, ","), "data_dir", n.cfg.DataDir)
	}
}

// Bootstrap makes peers the first configuration of a new cluster. Open calls it for
// Config.Peers; call it directly when the addresses are known only after every node listens
// (tests with port 0). Every peer may be bootstrapped with the same list.
//
// A node that has raft state by the time Bootstrap runs is left as it is and Bootstrap returns
// nil: when peers are bootstrapped one after another, the first ones can elect a leader that
// replicates the configuration to this node before its own Bootstrap, which is the outcome
// bootstrapping wanted. It never overwrites state (a restart never re-bootstraps).
func (n *Node) Bootstrap(peers []Peer) error {
	var conf raft.Configuration
	for _, p := range peers {
		conf.Servers = append(conf.Servers, raft.Server{Suffrage: raft.Voter, ID: raft.ServerID(p.ID), Address: raft.ServerAddress(p.RaftAddr)})
	}
	if err := n.raft.BootstrapCluster(conf).Error(); err != nil {
		if !errors.Is(err, raft.ErrCantBootstrap) {
			return fmt.Errorf("raftmeta: bootstrap: %w", err)
		}
		n.log.Info("raftmeta: bootstrap skipped: the node already has raft state (a leader reached it first)")
	}
	n.peers.mu.Lock()
	n.peers.list = slices.Clone(peers)
	n.peers.mu.Unlock()
	n.electIfSoleVoter()
	return nil
}

// transportConfig is the raft TCP transport's configuration: a pool of 3 connections per
// peer, a 10s I/O timeout, and no pipelined replication.
//
// NB: MaxRPCsInFlight 1 turns hashicorp/raft's pipeline replication off (each AppendEntries
// waits for its answer). With pipelining (the default, 2 in flight) raft v1.7.3 can deadlock
// a follower's replication goroutine: when a follower answers Success=false or a newer term
// (routine after a leader change), pipelineDecode returns and stops reading the pipeline's
// unbuffered doneCh, while pipelineReplicate may still send once more and park in
// netPipeline.AppendEntries (inprogressCh) behind decodeResponses (parked on doneCh); the
// pipeline's deferred Close never runs. That follower then gets heartbeats but no entries
// until the leader restarts, and raft.Shutdown waits on the stuck goroutine forever. We hit
// it in server's 3-master leader-change test under load (hung once in 26 runs); see
// hashicorp/raft#612 and grafana/pyroscope#5518, which turned pipelining off for the same
// dump. The transport's own docs (hashicorp/raft#541) measured little throughput gain from
// pipelining once raft batches entries, which ours do (MaxAppendEntries 256).
func transportConfig(hl hclog.Logger) *raft.NetworkTransportConfig {
	return &raft.NetworkTransportConfig{
		MaxPool:         3,
		Timeout:         10 * time.Second,
		MaxRPCsInFlight: 1,
		Logger:          hl.Named("transport"),
	}
}

// boltOptions are the options raft.db is opened with: bbolt's defaults, except that the
// freelist is not written at each commit (NoFreelistSync) and is kept as a hash map, as etcd
// opens its bolt files.
//
// NB: this changes no durability: a commit still fsyncs its pages before its meta page, and
// the freelist is derived data, rebuilt at open by a scan of the file (raft.db is the log
// since the last snapshot plus TrailingLogs: milliseconds). With it every commit of the
// raft log also allocated, encoded, wrote and fsynced a freelist page besides the log's own
// (docs/benchmarks.md, "The master's CPU per put"). Compatible both ways: a file written this
// way opens in a build that syncs the freelist (bbolt rebuilds it, then writes it at its first
// commit), and one written by such a build opens here (TestLogFileCompatible).
func boltOptions() *bbolt.Options {
	o := *bbolt.DefaultOptions
	o.NoFreelistSync = true
	o.FreelistType = bbolt.FreelistMapType
	return &o
}

func (n *Node) closeStores() {
	if n.trans != nil {
		n.trans.Close()
	}
	if n.store != nil {
		n.store.Close()
	}
}

// Close stops the node: raft shuts down (in-flight Applies fail with base.ErrClosed), then the
// transport and the log store close. It is idempotent.
func (n *Node) Close() error {
	n.closeOnce.Do(func() {
		// 1. Stop the background goroutine's loop and fail new calls (callers waiting on a
		// future return base.ErrClosed now); 2. give raft up to a heartbeat timeout to answer
		// the futures already handed to it, so no waiter is stranded by shutdown; 3. shut raft
		// down, which fails whatever is still pending, waiting at most CloseTimeout (see
		// shutdownRaft); 4. wait for the background goroutine; 5. close the transport and the
		// log store, which raft no longer uses (after a timed-out step 3 its stuck goroutines
		// get errors from them from then on; closing still frees the port and the file lock).
		close(n.closed)
		n.drainWaiters(n.cfg.HeartbeatTimeout)
		n.closeErr = n.shutdownRaft(n.cfg.CloseTimeout)
		n.wg.Wait()
		// Close the pooled outgoing connections too: NetworkTransport.Close only stops the
		// listener, and a peer's handler goroutine reading one of our connections exits only
		// when we close it.
		n.trans.CloseStreams()
		if err := n.trans.Close(); err != nil && n.closeErr == nil {
			n.closeErr = fmt.Errorf("raftmeta: transport close: %w", err)
		}
		if err := n.store.Close(); err != nil && n.closeErr == nil {
			n.closeErr = fmt.Errorf("raftmeta: log store close: %w", err)
		}
	})
	return n.closeErr
}

// shutdownRaft shuts raft down and waits up to d for its goroutines to stop. Past d it logs
// every goroutine's stack at Error and returns an error wrapping base.ErrTimeout; raft's
// goroutines (and the one waiting for them) are left running: nothing can stop a goroutine
// parked inside raft, and a loud error with the stacks beats a silent hang (a leak check or
// the operator sees both).
func (n *Node) shutdownRaft(d time.Duration) error {
	done := make(chan error, 1)
	go func() { done <- n.raft.Shutdown().Error() }()
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case err := <-done:
		if err != nil {
			return fmt.Errorf("raftmeta: raft shutdown: %w", err)
		}
		return nil
	case <-t.C:
		n.log.Error("raftmeta: raft shutdown stuck; closing the transport and log store anyway; every goroutine's stack follows",
			"waited", d, "goroutines", allStacks())
		return fmt.Errorf("raftmeta: raft shutdown did not finish within %s (goroutine stacks logged): %w", d, base.ErrTimeout)
	}
}

// allStacks returns the stacks of every goroutine, as a SIGQUIT would print them.
func allStacks() string {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) || len(buf) >= 64<<20 {
			return string(buf[:n])
		}
		buf = make([]byte, 2*len(buf))
	}
}

// drainWaiters waits up to d for every waitFuture goroutine to get its answer.
func (n *Node) drainWaiters(d time.Duration) {
	n.waiting.mu.Lock()
	if n.waiting.n == 0 {
		n.waiting.mu.Unlock()
		return
	}
	ch := make(chan struct{})
	n.waiting.drained = ch
	n.waiting.mu.Unlock()
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ch:
	case <-t.C:
		n.log.Warn("raftmeta: closing with raft operations still pending")
	}
}

// ID returns this node's id.
func (n *Node) ID() string { return n.cfg.ID }

// RaftAddr returns the address the raft transport listens on (with the real port when the
// configured port was 0).
func (n *Node) RaftAddr() string { return string(n.trans.LocalAddr()) }

// IsLeader reports whether this node is the raft leader now. A leader may be deposed at any
// moment: use VerifyLeader before a linearizable read.
func (n *Node) IsLeader() bool { return n.raft.State() == raft.Leader }

// Leader returns the current leader's id and client RPC address as this node knows them
// (both empty while no leader is known; the address empty until the leader's RegisterMaster
// reached this node).
func (n *Node) Leader() (id, rpcAddr string) {
	_, lid := n.raft.LeaderWithID()
	if lid == "" {
		return "", ""
	}
	n.fsm.mu.RLock()
	addr := n.fsm.st.masters[string(lid)]
	n.fsm.mu.RUnlock()
	return string(lid), addr
}

// LeaderCh delivers true when this node becomes leader and false when it stops being leader.
// Only the latest transition is kept if the receiver is slow. There is one channel per node:
// one consumer (the server) should read it.
func (n *Node) LeaderCh() <-chan bool { return n.leaderCh }

// WaitLeader waits until this node knows a leader and returns its id.
func (n *Node) WaitLeader(ctx context.Context) (string, error) {
	ch := make(chan raft.Observation, 4)
	obs := raft.NewObserver(ch, false, func(o *raft.Observation) bool {
		_, ok := o.Data.(raft.LeaderObservation)
		return ok
	})
	n.raft.RegisterObserver(obs)
	defer n.raft.DeregisterObserver(obs)
	for {
		if _, id := n.raft.LeaderWithID(); id != "" {
			return string(id), nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return "", fmt.Errorf("raftmeta: no leader: %w", ctx.Err())
		case <-n.closed:
			return "", fmt.Errorf("raftmeta: %w", base.ErrClosed)
		}
	}
}

// watchLeadership forwards raft's leadership changes to LeaderCh and, on each election won,
// registers this master's RPC address (and that of every bootstrap peer that has one and is
// still a member; see registerMasters) in the masters table, so followers can redirect clients
// here. It registers before it signals LeaderCh.
func (n *Node) watchLeadership(obsCh <-chan raft.Observation, observer *raft.Observer) {
	defer n.wg.Done()
	defer n.raft.DeregisterObserver(observer)
	for {
		select {
		case <-n.closed:
			return
		case <-obsCh:
			n.obs.leaderChanges.Add(1)
		case leader := <-n.raft.LeaderCh():
			n.log.Info("raftmeta: leadership changed", "leader", leader, "term", n.raft.CurrentTerm())
			// Latest value wins: drop an unread older value, then send.
			select {
			case <-n.leaderCh:
			default:
			}
			if leader {
				// Catch the FSM up before telling the server, so its first reads as leader
				// see every committed entry.
				ctx, cancel := context.WithTimeout(context.Background(), 10*n.cfg.HeartbeatTimeout)
				err := n.ensureBarrier(ctx)
				cancel()
				if err != nil {
					n.log.Warn("raftmeta: barrier after election", "err", err)
				}
				// Before telling the server: its first Status as leader lists every master
				// with its current address (usually nothing to commit).
				n.registerMasters()
			}
			n.leaderCh <- leader
		}
	}
}

// registerMasters proposes RegisterMaster for this node and configured peers whose address
// in the FSM differs. Bootstrap peers no longer in the raft configuration (removed at run
// time) are skipped: Config.Peers is only the initial membership. It gives up when leadership
// is lost (the next leader does it) and retries other failures a few times.
func (n *Node) registerMasters() {
	members := map[string]bool{}
	if servers, err := n.Servers(); err == nil {
		for _, s := range servers {
			members[s.ID] = true
		}
	}
	want := map[string]string{}
	n.peers.mu.Lock()
	peers := n.peers.list
	n.peers.mu.Unlock()
	for _, p := range peers {
		if p.RPCAddr != "" && members[p.ID] {
			want[p.ID] = p.RPCAddr
		}
	}
	if n.cfg.RPCAddr != "" {
		want[n.cfg.ID] = n.cfg.RPCAddr
	}
	for id, addr := range want {
		n.fsm.mu.RLock()
		have := n.fsm.st.masters[id]
		n.fsm.mu.RUnlock()
		if have == addr {
			continue
		}
		for attempt := 0; ; attempt++ {
			ctx, cancel := context.WithTimeout(context.Background(), 10*n.cfg.HeartbeatTimeout)
			_, err := n.Apply(ctx, RegisterMaster{ID: id, RPCAddr: addr})
			cancel()
			if err == nil {
				break
			}
			if errors.Is(err, base.ErrNotLeader) || errors.Is(err, base.ErrClosed) || attempt >= 3 {
				n.log.Warn("raftmeta: register master address", "master", id, "rpc_addr", addr, "err", err)
				return
			}
			select {
			case <-n.closed:
				return
			case <-time.After(n.cfg.HeartbeatTimeout):
			}
		}
	}
}
