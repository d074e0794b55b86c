package worker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mooncake-go/mooncake/dram"
	"github.com/mooncake-go/mooncake/internal/base"
	"github.com/mooncake-go/mooncake/nvme"
	"github.com/mooncake-go/mooncake/server/internal/admin"
	"github.com/mooncake-go/mooncake/server/rpcsrv"
	"github.com/mooncake-go/mooncake/tier"
	"github.com/mooncake-go/mooncake/transfer"
)

// Worker is one worker: a DRAM arena and (with RootFSDir) an NVMe store under a tier.Engine,
// a transfer server for the data calls (Write, Commit, Read, ReadRange, Drop), and a loop that
// registers with the masters and heartbeats the leader.
type Worker struct {
	cfg   Config
	log   *slog.Logger
	id    base.WorkerID
	dir   string // RootFSDir/<cluster_id>/<worker_id>, "" without RootFSDir
	arena *dram.Arena
	store *nvme.Store // nil without RootFSDir
	eng   *tier.Engine
	rpc   rpcsrv.Server
	adm   *admin.Server
	met   *workerMetrics
	cli   *transfer.Client // to the masters
	// attach holds the AttachWorker call to the leader (worker_leave.go).
	attach attachment
	now    func() time.Time

	// closing is set by Shutdown: new Writes are refused.
	closing atomic.Bool
	// resync asks the control loop to re-register (full inventory) at its next beat: set when
	// the engine lost objects (cache eviction, failed spill, corruption) the master still lists.
	resync atomic.Bool
	// reregister: the leader asked for a registration (new leader, unsettled reconciliation);
	// done at once, unlike resync.
	reregister atomic.Bool
	// registered counts successful registrations (tests wait on it).
	registered atomic.Int64
	// vouch says whether reads from kept lookups may be served (vouch.go).
	vouch vouch
	// leader is the master address (string) the control loop last heartbeated.
	leader atomic.Value
	// clientTTL is the cluster's client_ttl (nanoseconds) as the last heartbeat reply that
	// carried it said; 0 until one does (a master that predates the field never does). It
	// bounds the heartbeat calls (heartbeatTimeout).
	clientTTL atomic.Int64
	// beats counts successful heartbeats; every tenantSharesEvery-th refreshes the tenant
	// shares (worker_tenants.go).
	beats atomic.Int64
	// regCh is signalled after each successful registration (Registered).
	regCh chan struct{}
	// dropKick (cap 1) wakes the drop fetcher (dropFetchLoop): superseded versions hold
	// many bytes, or a put waits for them to be released.
	dropKick chan struct{}
	// dropFetch counts the drop fetcher's heartbeats and the drops they brought
	// (worker_drop_fetches_total, worker_drops_fetched_early_total).
	dropFetch struct{ fetches, drops atomic.Int64 }
	// testBeforeCommit, when set, runs in commitPending just before the tier commit (test
	// hook: a drop landing in that window; nil in production).
	testBeforeCommit atomic.Pointer[func(key string, v base.Version)]
	// testWritePhase, when set, runs in beginWrite when a first chunk's tier Put allocated
	// the object ("allocated") and when a chunk starts waiting for that Put ("waiting")
	// (test hook; nil in production).
	testWritePhase atomic.Pointer[func(phase, key string, v base.Version)]

	// pend is the write assembly: objects being written and drops remembered (writes.go).
	pend writes
	// shm holds the pins of ShmPin calls (worker_shm.go).
	shm shmLeases
	// pf holds the prefetches accepted and not yet done (worker_prefetch.go).
	pf prefetcher
	// stages holds the staging areas of same-host puts (worker_shmput.go).
	stages shmStages
	// share describes the arena to clients on this host when shared (immutable after
	// NewWorker; the arena's fd stays open until the arena closes, after the RPC server).
	share  dram.ShareInfo
	shared bool
	// gens is the copy-generation table clients on this host map with the arena (nil when
	// the arena is private or the table could not be made); bumped by the tier engine.
	gens *transfer.ShmGenTable

	stop chan struct{} // closed by Shutdown: stops the control and sweeper loops
	// ctx is cancelled by Shutdown: it ends master calls in flight.
	ctx      context.Context
	cancel   context.CancelFunc
	loops    sync.WaitGroup
	shutOnce sync.Once
	shutErr  error
}

// NewWorker starts a worker: it maps the arena, opens the NVMe tier (with RootFSDir), indexes
// what it holds, listens, registers with the masters (with its inventory) and heartbeats.
// Registration is retried in the background; NewWorker does not wait for a master.
//
// The steps run in this order, each after what it needs: listen (the id may derive from the
// bound address), identify, the arena, the NVMe store, the tier engine over both, the
// metrics, the clients to the masters, the transfer server, the admin HTTP server; only then
// do the goroutines start.
//
// Who releases what when a step fails: the deferred cleanup below cancels w.ctx, closes the
// listener and, through closeStores, whatever of the engine, NVMe store, arena, generation
// table and client to the masters was opened (closeStores skips what is nil). The attached
// connection's client (w.attach.cli) and the transfer server are left to the garbage
// collector: neither has dialled, served or started a goroutine before startLoops. Once
// startLoops has run, Shutdown releases everything.
func NewWorker(cfg Config) (*Worker, error) {
	cfg.EnsureDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	ln, err := listen(cfg)
	if err != nil {
		return nil, err
	}
	w := &Worker{cfg: cfg, now: time.Now, stop: make(chan struct{}), regCh: make(chan struct{}, 1), dropKick: make(chan struct{}, 1)}
	w.pend = newWrites()
	w.ctx, w.cancel = context.WithCancel(context.Background())
	ok := false
	defer func() {
		if !ok {
			w.cancel()
			ln.Close()
			w.closeStores()
		}
	}()
	if err := w.identify(ln.Addr().String()); err != nil {
		return nil, err
	}
	detached, err := w.openArena()
	if err != nil {
		return nil, err
	}
	lower, err := w.openNVMe()
	if err != nil {
		return nil, err
	}
	if err := w.openEngine(lower, detached); err != nil {
		return nil, err
	}
	w.newMetrics()
	if err := w.openClients(); err != nil {
		return nil, err
	}
	if err := w.newServer(ln); err != nil {
		return nil, err
	}
	if err := w.startAdmin(); err != nil {
		return nil, err
	}
	ok = true
	w.startLoops()
	return w, nil
}

// listen binds the worker's address on its transport before anything else is opened: the
// worker id may derive from the bound address (port 0).
func listen(cfg Config) (net.Listener, error) {
	tr, err := transfer.NewTransport(cfg.Protocol)
	if err != nil {
		return nil, err
	}
	ln, err := tr.Listen(cfg.Address)
	if err != nil {
		return nil, fmt.Errorf("server: worker listen on %s: %w", cfg.Address, err)
	}
	return ln, nil
}

// identify settles the worker id (resolveWorkerID, from the bound address) and the logger
// that carries it; every later step logs with it.
func (w *Worker) identify(bound string) error {
	id, err := resolveWorkerID(w.cfg, bound)
	if err != nil {
		return err
	}
	w.id = id
	w.cfg.WorkerID = w.id
	w.log = w.cfg.Logger.With("component", "worker", "worker_id", string(w.id))
	w.log.Info("worker starting", w.cfg.logAttrs()...)
	return nil
}

// openArena maps the DRAM arena and, when it is shared with clients on this host, makes the
// copy-generation table. It returns the engine's CopyDetached callback: the table's Bump, or
// nil without a table.
func (w *Worker) openArena() (detached func(string), err error) {
	cfg := w.cfg
	w.arena, err = dram.NewArena(dram.Options{Size: cfg.GlobalSegmentSize, HugePages: cfg.HugePages,
		Shared: !cfg.PrivateArena, Prefault: cfg.PrefaultArena, Populate: cfg.PopulateArena, Logger: cfg.Logger})
	if err != nil {
		return nil, fmt.Errorf("server: worker arena of %s: %w", base.Bytes(cfg.GlobalSegmentSize), err)
	}
	w.share, w.shared = w.arena.Share()
	if w.shared {
		// Without the table clients on this host still read through pins (ShmOpen leaves
		// the Gen fields out).
		if w.gens, err = transfer.NewShmGenTable(); err != nil {
			w.log.Warn("shared-memory reads will pin every object", "err", err)
		} else {
			detached = w.gens.Bump
		}
	}
	return detached, nil
}

// openNVMe opens the NVMe store under RootFSDir/<cluster_id>/<worker_id>; without RootFSDir
// it opens nothing and returns a nil tier.Lower (an untyped nil: a nil *nvme.Store in the
// interface would not read as "no lower tier").
func (w *Worker) openNVMe() (tier.Lower, error) {
	cfg := w.cfg
	if cfg.RootFSDir == "" {
		return nil, nil
	}
	w.dir = filepath.Join(cfg.RootFSDir, cfg.ClusterID, string(w.id))
	var err error
	w.store, err = nvme.Open(nvme.Options{Dir: w.dir, Capacity: cfg.SSDCapacity, Logger: cfg.Logger})
	if err != nil {
		return nil, fmt.Errorf("server: worker nvme tier in %s: %w", w.dir, err)
	}
	return w.store, nil
}

// openEngine opens the tier engine over the arena and lower (nil: DRAM only), which indexes
// what the NVMe store holds; its events reach the worker's drop fetcher, control loop, log
// and copy-generation table (detached).
func (w *Worker) openEngine(lower tier.Lower, detached func(string)) error {
	cfg := w.cfg
	var err error
	w.eng, err = tier.Open(tier.Options{
		Arena: w.arena, Lower: lower, Persistence: cfg.Persistence, Logger: cfg.Logger,
		HighWatermark: cfg.HighWatermark, LowWatermark: cfg.LowWatermark,
		// The master may list a replaced version until it commits the new one: keep it
		// until the master's drop says so (tier/supersede.go, writes.go).
		KeepSuperseded: true,
		// A put that finds DRAM full of superseded versions waits this long for their drops
		// (fetched at once: SupersededHeld) before it fails with "no space": a twentieth of
		// the put's deadline, 3 s by default (three heartbeats, should the fetch fail).
		SupersededWait: cfg.PendingWriteTimeout / 20,
		Events: tier.EventListener{
			SupersededHeld: func(int64) { w.kickDropFetch() },
			ObjectLost: func(m base.ObjectMeta, why string) {
				w.log.Debug("object lost; the master will be told at the next registration", "key", m.Key, "version", m.Version, "why", why)
				w.resync.Store(true)
			},
			BackgroundError: func(err error) { w.log.Warn("tier background error", "err", err) },
			CopyDetached:    detached,
		},
	})
	if err != nil {
		return fmt.Errorf("server: worker tier engine: %w", err)
	}
	return nil
}

// newMetrics makes the worker's registry with the memory and prefetch collectors (the
// connection and NVMe space collectors join in newServer). It sets the prefetch budget first,
// which the prefetch collectors report.
func (w *Worker) newMetrics() {
	w.met = newWorkerMetrics(w.stats)
	w.met.reg.MustRegister(workerMemoryCollector{w})
	w.pf.budget = w.cfg.PrefetchBudget
	w.met.reg.MustRegister(w.pf.collectors()...)
}

// openClients makes the two clients to the masters: w.cli for registrations and heartbeats
// (closed by closeStores), and the attached connection's (w.attach.cli, stopped by
// attach.stop in Shutdown).
func (w *Worker) openClients() error {
	cfg := w.cfg
	var err error
	w.cli, err = transfer.NewClient(transfer.ClientOptions{ClusterID: cfg.ClusterID, Logger: cfg.Logger, ConnsPerPeer: 1})
	if err != nil {
		return err
	}
	// The attached connection carries one call and nothing else; it is never resent.
	acli, err := transfer.NewClient(transfer.ClientOptions{ClusterID: cfg.ClusterID, Logger: cfg.Logger, ConnsPerPeer: 1, Retries: -1})
	if err != nil {
		return err
	}
	w.attach = attachment{cli: acli, done: make(chan struct{})}
	w.attach.ctx, w.attach.cancel = context.WithCancel(context.Background())
	return nil
}

// newServer makes the transfer server for the data calls on ln (served by startLoops) and
// registers its connection collector, and the NVMe space collector with an NVMe tier.
func (w *Worker) newServer(ln net.Listener) error {
	cfg := w.cfg
	sopts := transfer.ServerOptions{ClusterID: cfg.ClusterID, Logger: cfg.Logger, SendfileReads: cfg.TCPSendfile}
	cfg.Conns.Apply(&sopts)
	srv, err := transfer.NewServer(&workerHandler{w: w}, sopts)
	if err != nil {
		return err
	}
	w.met.reg.MustRegister(rpcsrv.NewConnCollector("worker", srv.Stats))
	if w.store != nil {
		w.met.reg.MustRegister(newNVMeSpaceCollector(w.store.Metrics))
	}
	w.rpc = rpcsrv.Server{Srv: srv, Ln: ln, Done: make(chan struct{})}
	return nil
}

// startAdmin starts the admin HTTP server (metrics, health, readiness, status, memory) on
// MetricsAddress; Shutdown closes it. It is the last step that can fail.
func (w *Worker) startAdmin() error {
	var err error
	w.adm, err = admin.Start(w.cfg.MetricsAddress, admin.Handlers{
		Reg:    w.met.reg,
		Health: func() error { return nil },
		Ready:  w.ready,
		Status: func() (any, error) { return w.status(), nil },
		Routes: w.memoryRoutes,
	}, w.log)
	if err != nil {
		return fmt.Errorf("server: worker metrics listen on %s: %w", w.cfg.MetricsAddress, err)
	}
	return nil
}

// startLoops starts serving and the background goroutines (docs/threads.md): once it runs,
// Shutdown owns every release. w.loops counts the control, sweeper, drop-fetch and warm-up
// loops, which Shutdown waits for first; attach.stop waits for attachLoop.
func (w *Worker) startLoops() {
	go w.rpc.Serve()
	w.loops.Add(3)
	go w.controlLoop()
	go w.sweepLoop()
	go w.dropFetchLoop()
	go w.attachLoop()
	if w.cfg.WarmUp && w.store != nil {
		w.loops.Add(1)
		go w.warmUp()
	}
	inv := w.eng.Metrics()
	w.log.Info("worker started", "address", w.Addr(), "metrics_address", w.adm.Addr(), "arena_mode", w.arena.Mode().String(),
		"dram_objects", inv.DRAM.Objects, "nvme_objects", inv.NVMe.Objects, "nvme_dir", w.dir)
}

// closeStores closes the engine, the NVMe store and the arena, in that order (each after what
// uses it), then the client to the masters. Safe on a partly built worker.
func (w *Worker) closeStores() error {
	var errs []error
	if w.eng != nil {
		errs = append(errs, w.eng.Close())
	}
	if w.store != nil {
		errs = append(errs, w.store.Close())
	}
	if w.arena != nil {
		errs = append(errs, w.arena.Close())
	}
	if w.gens != nil {
		w.gens.Close() // after the engine: its last Bump is done
	}
	if w.cli != nil {
		errs = append(errs, w.cli.Close())
	}
	return errors.Join(errs...)
}

// resolveWorkerID picks the worker's id: the configured one; else one persisted under
// RootFSDir by an earlier run with the same configured address; else one derived from the
// address ("w-127.0.0.1-12300"), or from the bound address plus a random suffix when the
// configured port is 0 (so two workers never share an id), persisted when RootFSDir is set.
func resolveWorkerID(cfg Config, bound string) (base.WorkerID, error) {
	if cfg.WorkerID != "" {
		return cfg.WorkerID, nil
	}
	var idFile string
	if cfg.RootFSDir != "" {
		idFile = filepath.Join(cfg.RootFSDir, cfg.ClusterID, "worker_id."+sanitizeID(cfg.Address))
		if b, err := os.ReadFile(idFile); err == nil {
			id := base.WorkerID(strings.TrimSpace(string(b)))
			if err := base.ValidateWorkerID(id); err != nil {
				return "", fmt.Errorf("server: worker id in %s: %w", idFile, err)
			}
			return id, nil
		} else if !errors.Is(err, os.ErrNotExist) {
			return "", fmt.Errorf("server: read worker id: %w", err)
		}
	}
	id := "w-" + sanitizeID(cfg.Address)
	if _, port, _ := net.SplitHostPort(cfg.Address); port == "0" {
		id = "w-" + sanitizeID(bound) + "-" + fmt.Sprintf("%08x", uint32(time.Now().UnixNano()))
	}
	if len(id) > base.MaxWorkerIDLen {
		id = id[:base.MaxWorkerIDLen]
	}
	if idFile != "" {
		if err := os.MkdirAll(filepath.Dir(idFile), 0o750); err != nil {
			return "", fmt.Errorf("server: worker dir: %w", err)
		}
		tmp := idFile + ".tmp"
		if err := os.WriteFile(tmp, []byte(id+"\n"), 0o640); err != nil {
			return "", fmt.Errorf("server: persist worker id: %w", err)
		}
		if err := os.Rename(tmp, idFile); err != nil {
			return "", fmt.Errorf("server: persist worker id: %w", err)
		}
	}
	return base.WorkerID(id), nil
}

// sanitizeID maps s onto the characters base.ValidateWorkerID allows.
func sanitizeID(s string) string {
	b := []byte(s)
	for i, c := range b {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-') {
			b[i] = '-'
		}
	}
	return string(b)
}

// Addr returns the bound data address.
func (w *Worker) Addr() string { return w.rpc.Ln.Addr().String() }

// MetricsAddr returns the bound metrics address, "" when there is none.
func (w *Worker) MetricsAddr() string { return w.adm.Addr() }

// ID returns the worker's id.
func (w *Worker) ID() base.WorkerID { return w.id }

// Registered is signalled after each successful registration with a leader. It holds one
// signal: a registration nobody waited for is kept until a receive takes it. The composer
// (package server) waits on it for readiness.
func (w *Worker) Registered() <-chan struct{} { return w.regCh }

// Shutdown is the SIGTERM path. The rough workflow:
//
//  1. refuse new Writes (ErrUnavailable), stop the control loop (no more regular heartbeats
//     or registrations), then send the leader one final heartbeat with Leaving set (bounded
//     by ctx and a heartbeat timeout; a failure is logged, not returned). The worker is not
//     unregistered: the leader keeps it, and its replicas, listed for the master's
//     WorkerRestartGrace (default 2 min) instead of ClientTTL, places no new puts on it, and
//     ends the grace when it registers again; without the final heartbeat (an unreachable
//     leader, a master that predates the field) it is marked dead soon after step 2.
//     An Ephemeral worker unmounts instead (LeaveWorker, bounded by leaveTimeout): when that
//     returns, the leader places nothing here and objects only it held are gone;
//  2. end the attachment to the leader (its connection closes; told first, the leader takes
//     it as no loss);
//  3. stop accepting connections and drain the calls in flight (reads finish their sends)
//     until ctx ends, then close the connections;
//  4. abort pending writes (never committed, so never acknowledged);
//  5. with an NVMe tier, SpillAll: move DRAM objects to NVMe until ctx ends, so a restart
//     finds them there;
//  6. stop the admin HTTP server;
//  7. close the tier engine, the NVMe store (syncing it) and the arena.
//
// It is safe to call more than once; later calls return the first result.
func (w *Worker) Shutdown(ctx context.Context) error {
	w.shutOnce.Do(func() {
		w.closing.Store(true)
		close(w.stop)
		w.cancel()
		w.loops.Wait()
		if w.cfg.Ephemeral && !w.cfg.Test.NoLeavingBeat {
			w.leave(ctx)
		} else {
			w.announceLeaving(ctx)
		}
		w.attach.stop()
		var errs []error
		if err := w.rpc.Shutdown(ctx); err != nil {
			errs = append(errs, fmt.Errorf("rpc: %w", err))
		}
		w.pf.stop()
		w.pend.abortAll()
		// The transfer server is shut down: its connections' ends already ended their leases;
		// this ends any left (and refuses new ones) before SpillAll and the engine's Close.
		w.shm.closeAll()
		w.stages.closeAll()
		if w.store != nil {
			start := time.Now()
			before := w.eng.Metrics()
			err := w.eng.SpillAll(ctx)
			after := w.eng.Metrics()
			w.log.Info("spilled DRAM to NVMe before exit", "objects", after.Spills-before.Spills,
				"bytes", base.Bytes(after.SpillBytes-before.SpillBytes).String(), "took", time.Since(start), "err", err)
			if err != nil {
				errs = append(errs, fmt.Errorf("spill: %w", err))
			}
		}
		if err := w.adm.Close(ctx); err != nil {
			errs = append(errs, fmt.Errorf("admin http: %w", err))
		}
		if err := w.closeStores(); err != nil {
			errs = append(errs, err)
		}
		w.shutErr = errors.Join(errs...)
		w.log.Info("worker stopped", "err", w.shutErr)
	})
	return w.shutErr
}

// ShmLeases returns how many objects clients on this host hold pinned for shared-memory
// reads (leases not yet released; the worker_shm_leases gauge).
func (w *Worker) ShmLeases() int { return w.shm.count() }

// ShmPutStages returns how many staging areas of same-host puts are open (one per client on
// this host that put here; the worker_shm_put_stages gauge).
func (w *Worker) ShmPutStages() int { return w.stages.count() }

// stats is the snapshot the worker's gauges read.
func (w *Worker) stats() workerStats {
	m := w.eng.Metrics()
	as := w.arena.Stats()
	s := workerStats{
		ArenaUsed: as.Used, ArenaCapacity: as.Capacity, ArenaPopulated: as.Populated, Fragmentation: as.Fragmentation,
		HugePageMode: w.arena.Mode().String(),
		DRAMBytes:    m.DRAM.Bytes, DRAMObjects: m.DRAM.Objects, NVMeBytes: m.NVMe.Bytes, NVMeObjects: m.NVMe.Objects,
		Evictions: map[string]int64{"watermark": m.EvictionsWatermark, "pressure": m.EvictionsPressure},
		Spills:    m.Spills, SpillBytes: m.SpillBytes, Promotions: m.Promotions, PendingWrites: m.PendingWrites.Objects,
		ShmLeases: int64(w.shm.count()), ShmPutStages: int64(w.stages.count()),
		Superseded: m.Superseded, SupersededRestored: m.Restored, SupersededWaits: m.SupersededWaits,
		DropFetches: w.dropFetch.fetches.Load(), DropsFetchedEarly: w.dropFetch.drops.Load(),
		TenantNVMeBytes: m.TenantNVMeBytes, NVMeQuotaEvictions: m.NVMeQuotaEvictions, NVMeQuotaDrops: m.NVMeQuotaDrops,
	}
	if w.store != nil {
		nm := w.store.Metrics()
		s.NVMeCapacity = nm.Capacity
		s.NVMeCorruptions = nm.Corruptions
	}
	return s
}

// WorkerLocalStatus is the worker's /api/v1/status.
type WorkerLocalStatus struct {
	ID                string  `json:"id"`
	Address           string  `json:"address"`
	ClusterID         string  `json:"cluster_id"`
	Leader            string  `json:"leader_address"`
	Registered        bool    `json:"registered"`
	Persistence       string  `json:"persistence"`
	ArenaMode         string  `json:"arena_mode"`
	DRAMUsedBytes     int64   `json:"dram_used_bytes"`
	DRAMCapacityBytes int64   `json:"dram_capacity_bytes"`
	DRAMObjects       int64   `json:"dram_objects"`
	NVMeUsedBytes     int64   `json:"nvme_used_bytes"`
	NVMeCapacityBytes int64   `json:"nvme_capacity_bytes"`
	NVMeObjects       int64   `json:"nvme_objects"`
	PendingWrites     int64   `json:"pending_writes"`
	Fragmentation     float64 `json:"fragmentation"`
	// ShmLeases counts objects pinned by clients on this host (shared-memory reads).
	ShmLeases int64 `json:"shm_leases"`
}

func (w *Worker) status() WorkerLocalStatus {
	s := w.stats()
	st := WorkerLocalStatus{ID: string(w.id), Address: w.Addr(), ClusterID: w.cfg.ClusterID, Registered: w.registered.Load() > 0,
		Persistence: w.cfg.Persistence.String(), ArenaMode: s.HugePageMode,
		DRAMUsedBytes: s.DRAMBytes, DRAMCapacityBytes: s.ArenaCapacity, DRAMObjects: s.DRAMObjects,
		NVMeUsedBytes: s.NVMeBytes, NVMeCapacityBytes: s.NVMeCapacity, NVMeObjects: s.NVMeObjects,
		PendingWrites: s.PendingWrites, Fragmentation: s.Fragmentation, ShmLeases: s.ShmLeases}
	if l, ok := w.leader.Load().(string); ok {
		st.Leader = l
	}
	return st
}

// warmUp loads NVMe objects into DRAM after a restart (docs/threads.md: "warm-up"). It stops
// early when Shutdown cancels w.ctx.
func (w *Worker) warmUp() {
	defer w.loops.Done()
	start := time.Now()
	n, err := w.eng.WarmUp(w.ctx, 0)
	w.log.Info("warmed DRAM from NVMe", "objects", n, "took", time.Since(start), "err", err)
}
