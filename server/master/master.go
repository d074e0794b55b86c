package master

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/raft"

	"github.com/mooncake-go/mooncake/internal/base"
	"github.com/mooncake-go/mooncake/raftmeta"
	"github.com/mooncake-go/mooncake/server/internal/admin"
	"github.com/mooncake-go/mooncake/server/lifecycle"
	"github.com/mooncake-go/mooncake/server/rpcsrv"
	"github.com/mooncake-go/mooncake/transfer"
)

// Bounds of the leader's soft state. Each is a memory bound, not a tuning knob.
const (
	// maxDropsPerHeartbeat bounds the drop list in one heartbeat reply; the rest waits for
	// the next beat (a worker heartbeats every second).
	maxDropsPerHeartbeat = 4096
	// maxQueuedDrops bounds the drops queued for one worker. Past it the queue is cleared and
	// the worker is asked to re-register: its inventory reconciliation finds every orphan.
	maxQueuedDrops = 1 << 20
	// maxRegisterReplyDrops and maxRegisterReplyDropBytes bound the drop list of one
	// registration reply (about 5 MiB with 64-byte keys; the byte bound rules with long keys)
	// so the reply always fits the body limit. The rest is queued for the worker's heartbeats
	// (queueDropLocked; past maxQueuedDrops the worker is asked to register again).
	maxRegisterReplyDrops     = 1 << 16
	maxRegisterReplyDropBytes = 16 << 20
	// reconcileLockBatch is how many inventory entries registration's reconciliation checks
	// per hold of m.mu.
	reconcileLockBatch = 4096
	// registerObjectOverhead estimates the leader's heap per accumulated inventory entry
	// beyond its key bytes (base.ObjectMeta is 40 bytes: string header, version, size,
	// checksum), for the byte bounds of lifecycle.SessionLimits.
	registerObjectOverhead = 48
	// applyTimeout bounds one raft commit made by the leader's own loops.
	applyTimeout = 10 * time.Second
	// registerMasterTimeout bounds a follower's RegisterMaster call to the leader (one per
	// leader-loop tick until its address is in the masters table).
	registerMasterTimeout = 2 * time.Second
)

// commitContext is what a client call's commit waits with when the leader must act on its
// result (the drops owed for what a removal or an upsert took away): the caller's values but
// not its cancellation, bounded by applyTimeout. A caller that goes away mid-commit (its
// connection closed, its process gone) does not stop the entry, which may commit anyway
// (raftmeta.Node.Apply); waiting for it keeps its drops from being lost, which would leave
// the worker holding the bytes, and vouching for kept reads of them, until it re-registers.
func commitContext(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(ctx), applyTimeout)
}

// Master is one master: a raftmeta.Node holding the metadata, a transfer server answering
// the master calls, the leader's soft state (reservations, worker liveness and usage, drops
// owed to workers), and the admin HTTP server.
type Master struct {
	cfg  Config
	log  *slog.Logger
	node *raftmeta.Node
	rpc  rpcsrv.Server
	adm  *admin.Server
	met  *masterMetrics
	// kv is the KV event publisher, nil when disabled (kvevents.go).
	kv *kvPublisher
	// cli calls the leader from a follower (RegisterMaster; used only by the leader loop),
	// workers for memory reports (memory_master.go) and source workers for repair copies
	// (master_lifecycle.go); closed by Shutdown after the loop and the copies stopped.
	cli *transfer.Client
	// regRefusedBy is the RPC address of a leader that refused RegisterMaster with
	// INVALID_PARAMS (one that predates the call closes the connection and logs a warning
	// each time): registerSelf does not call it again until another master leads. Leader
	// loop only.
	regRefusedBy string

	// now is the clock; time.Now except in tests.
	now func() time.Time

	// mu guards the leader's soft state below. Lock order: mu is never held across a raft
	// Apply or an RPC; callers copy what they need, unlock, then apply.
	mu struct {
		sync.Mutex
		// lc is the worker lifecycle state machine (package lifecycle): whether this node
		// leads and since when, every worker's state, liveness, usage, reserved bytes and
		// drops owed, and the repair and drain queue. The Master drives it (lifecycle.go).
		lc *lifecycle.Machine
		// rng draws placements (the lifecycle machine takes it as an input).
		rng *rand.Rand
		// leaderGone is closed when this leadership ends (setLeader(false)), ending the
		// AttachWorker calls it holds; a new one is made for each leadership (nil while not
		// leading).
		leaderGone chan struct{}
	}
	// regPages counts the pages of paged registrations this master accepted (tests read it).
	regPages atomic.Int64

	// repair runs the copies the lifecycle machine orders (master_lifecycle.go).
	repair repairDriver
	rmet   repairMetrics
	// jobs are the drain jobs of Mooncake's /api/v1/drain_jobs (http_admin.go).
	jobs drainJobs

	stop     chan struct{} // closed by Shutdown: stops the leader loop
	loopDone chan struct{} // closed when the leader loop returns
	shutOnce sync.Once
	shutErr  error
}

// ensureLeader reports whether this node leads, and if so makes sure the leader soft state is
// set up: the leader loop does it when LeaderCh fires, but a call may arrive first.
func (m *Master) ensureLeader() bool {
	if !m.node.IsLeader() {
		return false
	}
	m.setLeader(true)
	return true
}

// notLeader returns the NOT_LEADER error naming the current leader.
func (m *Master) notLeader() error {
	id, addr := m.node.Leader()
	return &raftmeta.NotLeaderError{LeaderID: id, LeaderRPCAddr: addr}
}

// soleVoterWait bounds how long NewMaster waits for a sole voter to elect itself (a few
// milliseconds normally; raft's own election timeout is 1 s).
const soleVoterWait = 5 * time.Second

// NewMaster starts a master: it listens on cfg.RPCAddress, opens (or bootstraps) raft under
// cfg.DataDir, serves the master calls, and starts the leader loop and the admin HTTP server.
// With no Peers the master bootstraps a single-voter cluster of itself (standalone); with
// Join it bootstraps nothing and waits to be added by a leader.
func NewMaster(cfg Config) (*Master, error) {
	cfg.EnsureDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	log := cfg.Logger.With("component", "master", "id", cfg.ID)
	log.Info("master starting", cfg.logAttrs()...)
	if cfg.RaftNoSync {
		log.Warn("raft_fsync is off: acknowledged puts survive master process crashes, not an OS crash or power loss of a quorum of master hosts")
	}
	m := &Master{cfg: cfg, log: log, now: time.Now, stop: make(chan struct{}), loopDone: make(chan struct{})}
	lcfg := lifecycle.Config{ClientTTL: cfg.ClientTTL, RestartGrace: cfg.WorkerRestartGrace, ConnGrace: cfg.ClientDisconnectGrace,
		MaxDropsPerHeartbeat: maxDropsPerHeartbeat, MaxQueuedDrops: maxQueuedDrops, PutTimeout: cfg.PutTimeout,
		HighWatermark: cfg.EvictionHighWatermarkRatio, Repair: cfg.Repair}
	if cfg.Test.Lifecycle != nil {
		cfg.Test.Lifecycle(&lcfg)
	}
	m.mu.lc = lifecycle.New(lcfg)
	m.mu.rng = rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 0x6d6f6f6e63616b65))
	m.met = newMasterMetrics(m.stats)
	m.met.mc = newMooncakeMasterMetrics(m)
	m.met.reg.MustRegister(modelCollector{m})
	m.rmet.register(m.met.reg, m.repairGauges)
	m.repair.ctx, m.repair.cancel = context.WithCancel(context.Background())

	tr, err := transfer.NewTransport(rpcsrv.DefaultProtocol)
	if err != nil {
		return nil, err
	}
	ln, err := tr.Listen(cfg.RPCAddress)
	if err != nil {
		return nil, fmt.Errorf("server: master listen on %s: %w", cfg.RPCAddress, err)
	}
	rpcAddr := ln.Addr().String()
	node, err := openNode(cfg, rpcAddr)
	if err != nil {
		ln.Close()
		return nil, err
	}
	m.node = node
	sopts := transfer.ServerOptions{ClusterID: cfg.ClusterID, Logger: cfg.Logger}
	cfg.Conns.Apply(&sopts)
	srv, err := transfer.NewServer(&masterHandler{m: m}, sopts)
	if err != nil {
		ln.Close()
		node.Close()
		return nil, err
	}
	m.cli, err = transfer.NewClient(transfer.ClientOptions{ClusterID: cfg.ClusterID, Logger: cfg.Logger, ConnsPerPeer: 1})
	if err != nil {
		ln.Close()
		node.Close()
		return nil, err
	}
	if m.kv, err = startKVPublisher(cfg.KVEvents, node, log); err != nil {
		ln.Close()
		m.cli.Close()
		node.Close()
		return nil, err
	}
	m.met.reg.MustRegister(rpcsrv.NewConnCollector("master", srv.Stats))
	m.rpc = rpcsrv.Server{Srv: srv, Ln: ln, Done: make(chan struct{})}
	go m.rpc.Serve()
	m.adm, err = admin.Start(cfg.MetricsAddress, admin.Handlers{
		Reg:       m.met.reg,
		Health:    m.health,
		Ready:     m.ready,
		Status:    func() (any, error) { return m.status(), nil },
		Dashboard: true,
		Routes:    m.adminRoutes,
		HealthKV:  m.healthFields,
	}, log)
	if err != nil {
		_ = m.rpc.Shutdown(context.Background())
		m.cli.Close()
		m.kv.close()
		node.Close()
		return nil, fmt.Errorf("server: metrics listen on %s: %w", cfg.MetricsAddress, err)
	}
	go m.leaderLoop()
	log.Info("master started", "rpc_address", rpcAddr, "raft_address", node.RaftAddr(), "metrics_address", m.adm.Addr())
	return m, nil
}

// openNode opens this master's raft node, with cfg's peers and test hooks, and answers rpcAddr
// as its RPC address. A master with no peers that is not joining bootstraps a cluster of
// itself. A sole voter is waited for until it has elected itself (bounded, logged).
func openNode(cfg Config, rpcAddr string) (*raftmeta.Node, error) {
	rc := raftmeta.Config{ID: cfg.ID, RaftAddr: cfg.RaftAddress, RPCAddr: rpcAddr, DataDir: cfg.DataDir, Peers: cfg.Peers,
		NoSync: cfg.RaftNoSync, Logger: cfg.Logger}
	if cfg.Test.Raft != nil {
		cfg.Test.Raft(&rc)
	}
	node, err := raftmeta.Open(rc)
	if err != nil {
		return nil, err
	}
	if len(cfg.Peers) == 0 && !cfg.Test.NoBootstrap && !cfg.Join {
		// A single-voter cluster of this master. Bootstrap fails harmlessly when the data dir
		// already holds raft state (a restart).
		err := node.Bootstrap([]raftmeta.Peer{{ID: cfg.ID, RaftAddr: node.RaftAddr(), RPCAddr: rpcAddr}})
		if err != nil && !errors.Is(err, raft.ErrCantBootstrap) {
			node.Close()
			return nil, err
		}
	}
	if node.SoleVoter() {
		// Ready means ready: a lone master (standalone, a lone mooncake_master) elects itself
		// within milliseconds, so it returns as the leader rather than as a follower that
		// answers "no leader" for a moment. Bounded: a stuck election is logged, not fatal.
		wctx, cancel := context.WithTimeout(context.Background(), soleVoterWait)
		if _, err := node.WaitLeader(wctx); err != nil {
			cfg.Logger.Warn("the sole voter has not elected itself yet; clients wait for it", "waited", soleVoterWait, "err", err)
		}
		cancel()
	}
	return node, nil
}

// Addr returns the bound RPC address.
func (m *Master) Addr() string { return m.rpc.Ln.Addr().String() }

// MetricsAddr returns the bound metrics address, "" when there is none.
func (m *Master) MetricsAddr() string { return m.adm.Addr() }

// ID returns the master's raft id.
func (m *Master) ID() string { return m.cfg.ID }

// IsLeader reports whether this master is the raft leader.
func (m *Master) IsLeader() bool { return m.node.IsLeader() }

// Shutdown stops the master. The rough workflow:
//
//  1. stop the leader loop (no more liveness checks, expiries or summary lines), cancel the
//     repair copies in flight and wait for them, then close the client they and
//     registerSelf use;
//  2. stop accepting RPC connections and drain the calls in flight (until ctx ends, then
//     close the connections);
//  3. stop the admin HTTP server;
//  4. if this master leads, hand leadership to another voter (bounded by ctx), so the
//     cluster has a leader again at once instead of after an election timeout;
//  5. stop the KV event publisher (after the transfer, so what this leader committed is
//     sent);
//  6. close raft (the log and snapshots stay in DataDir for the next start).
//
// It is safe to call more than once; later calls return the first result.
func (m *Master) Shutdown(ctx context.Context) error {
	m.shutOnce.Do(func() {
		close(m.stop)
		<-m.loopDone
		m.repair.cancel()
		m.repair.wg.Wait()
		var errs []error
		if err := m.cli.Close(); err != nil {
			errs = append(errs, fmt.Errorf("leader client: %w", err))
		}
		if err := m.rpc.Shutdown(ctx); err != nil {
			errs = append(errs, fmt.Errorf("rpc: %w", err))
		}
		if err := m.adm.Close(ctx); err != nil {
			errs = append(errs, fmt.Errorf("admin http: %w", err))
		}
		if m.node.IsLeader() {
			if servers, err := m.node.Servers(); err == nil && len(servers) > 1 {
				if err := m.node.LeadershipTransfer(ctx); err != nil {
					m.log.Warn("leadership transfer before shutdown failed", "err", err)
				}
			}
		}
		m.kv.close()
		if err := m.node.Close(); err != nil {
			errs = append(errs, fmt.Errorf("raft: %w", err))
		}
		m.shutErr = errors.Join(errs...)
		m.log.Info("master stopped", "err", m.shutErr)
	})
	return m.shutErr
}

// health is /health: healthy when this master knows a leader.
func (m *Master) health() error {
	if id, _ := m.node.Leader(); id == "" {
		return fmt.Errorf("%w: no raft leader known", base.ErrUnavailable)
	}
	return nil
}

// leaderLoop is the master's one background goroutine (docs/threads.md). It owns the
// transitions of the leader soft state, worker liveness (MarkWorkerLost), reservation expiry,
// the periodic summary line and, on a follower, registering this master's RPC address with
// the leader (registerSelf).
func (m *Master) leaderLoop() {
	defer close(m.loopDone)
	tickEvery := min(time.Second, max(m.cfg.ClientTTL/4, 10*time.Millisecond), max(m.cfg.PutTimeout/4, 10*time.Millisecond),
		max(m.cfg.ClientDisconnectGrace/4, 10*time.Millisecond))
	tick := time.NewTicker(tickEvery)
	defer tick.Stop()
	summary := time.NewTicker(m.cfg.SummaryInterval)
	defer summary.Stop()
	for {
		select {
		case <-m.stop:
			return
		case leader := <-m.node.LeaderCh():
			m.setLeader(leader)
		case <-tick.C:
			if !m.node.IsLeader() {
				m.setLeader(false)
				m.registerSelf()
				continue
			}
			m.setLeader(true)
			m.seedDefaultTenantQuota()
			m.lifecycleTick()
			m.expireReservations()
			m.expireRegSessions()
			if f := m.cfg.Test.AfterLeaderTick; f != nil {
				f(m)
			}
		case <-summary.C:
			m.logSummary()
		}
	}
}

// setLeader moves the soft state into or out of leadership. On becoming leader every active
// worker gets a full ClientTTL from now to heartbeat, and is asked to re-register (resync) so
// its inventory reconciles anything the previous leader owed it. Restart graces are soft
// state too: a worker that announced leaving to the previous leader gets ClientTTL from this
// election like every other.
func (m *Master) setLeader(leader bool) {
	m.mu.Lock()
	cur, _ := m.mu.lc.Leader()
	m.mu.Unlock()
	if cur == leader {
		return
	}
	segs := m.node.Segments()
	now := m.now()
	m.mu.Lock()
	defer m.mu.Unlock()
	// Reservations and paged registrations start over with the new leader (the machine
	// resets them on both transitions).
	if !leader {
		m.mu.lc.StepDown()
		if m.mu.leaderGone != nil {
			close(m.mu.leaderGone)
			m.mu.leaderGone = nil
		}
		m.log.Info("no longer leader")
		return
	}
	// Every active worker gets a full deadline from now and is asked to re-register; until
	// its first heartbeat its DRAM use is estimated from the FSM (lifecycle.BecomeLeader).
	m.mu.lc.BecomeLeader(now, segs)
	m.mu.leaderGone = make(chan struct{})
	m.log.Info("became leader", "workers", len(segs))
}
