package main

import (
	"context"
	"fmt"
	"io"
	"path/filepath"
	"strings"

	"github.com/mooncake-go/mooncake/client"
	"github.com/mooncake-go/mooncake/internal/base"
	"github.com/mooncake-go/mooncake/raftmeta"
	"github.com/mooncake-go/mooncake/server"
	"github.com/mooncake-go/mooncake/server/config"
	"github.com/mooncake-go/mooncake/server/master"
	"github.com/mooncake-go/mooncake/server/worker"
)

func (e *env) masterConfig(s masterSettings) master.Config {
	peers := make([]raftmeta.Peer, len(s.Peers))
	for i, p := range s.Peers {
		peers[i] = raftmeta.Peer{ID: p.ID, RaftAddr: p.RaftAddr, RPCAddr: p.RPCAddr}
	}
	if len(peers) == 1 && peers[0].ID == s.ID {
		peers = nil // this master alone: the server bootstraps a single voter
	}
	grace := s.WorkerRestartGrace
	if grace == 0 {
		// No grace: the server takes 0 as "the default", and a grace at or under ClientTTL
		// gives none.
		grace = s.ClientTTL
	}
	cfg := master.Config{
		ID: s.ID, DataDir: s.DataDir, RPCAddress: s.RPCAddress, RaftAddress: s.RaftAddress,
		MetricsAddress: s.MetricsAddress, Peers: peers, ClusterID: s.ClusterID, ClientTTL: s.ClientTTL,
		EvictionHighWatermarkRatio: s.EvictionHighWatermarkRatio, EvictionRatio: s.EvictionRatio,
		PutTimeout: s.PutTimeout, MaxValueSize: s.MaxValueSize, WorkerRestartGrace: grace, Join: s.Join, Logger: e.logger(),
		ClientDisconnectGrace: s.ClientDisconnectGrace,
		RootFSDir:             s.RootFSDir, NoSummary: s.NoSummary, Conns: s.Conns, RaftNoSync: s.RaftNoSync, KVEvents: s.KVEvents,
	}
	config.Pass(&s.flags, &cfg) // the settings that need no composing, by name
	return cfg
}

func (e *env) workerConfig(s workerSettings) worker.Config {
	cfg := worker.Config{
		WorkerID: s.WorkerID, ClusterID: s.ClusterID, MasterAddresses: s.MasterAddresses, Address: s.Address,
		MetricsAddress: s.MetricsAddress, GlobalSegmentSize: s.GlobalSegmentSize, RootFSDir: s.RootFSDir,
		Persistence: s.Persistence, SSDCapacity: s.SSDCapacity, Protocol: s.Protocol, HugePages: s.HugePages,
		PrefaultArena: s.PrefaultArena, PopulateArena: s.PopulateArena, WarmUp: s.WarmUp, PrivateArena: s.PrivateArena, TCPSendfile: s.TCPSendfile, Conns: s.Conns, Logger: e.logger(),
		HighWatermark: s.HighWatermark, LowWatermark: s.LowWatermark, PrefetchBudget: s.PrefetchBudget,
	}
	config.Pass(&s.flags, &cfg) // the settings that need no composing, by name
	return cfg
}

// runMaster serves until ctx ends (SIGTERM or SIGINT), then shuts down gracefully. The
// server logs its effective configuration once at start.
func runMaster(ctx context.Context, e *env, s masterSettings) error {
	mc := e.masterConfig(s)
	srv, err := server.Start(server.Config{Master: &mc})
	if err != nil {
		return fmt.Errorf("master %s: %w", s.ID, err)
	}
	m := srv.Master
	fmt.Fprintf(e.stdout, "mooncake master %s ready: rpc %s, metrics %s\n", s.ID, m.Addr(), metricsURL(m.MetricsAddr()))
	if e.mooncakeLines {
		printMooncakeMasterLines(e, m)
	}
	if s.Join {
		fmt.Fprintf(e.stdout, "joining: unless it is a member already, add it from any host with\n  %s master add --id %s --raft_address %s --rpc_address %s --master_server_address <a master>\n",
			cliName(e.argv0), s.ID, s.RaftAddress, m.Addr())
	}
	<-ctx.Done()
	e.logger().Info("signal received, shutting down", "master", s.ID)
	sctx, cancel := shutdownCtx(config.WorkerDefaults.ShutdownTimeout)
	defer cancel()
	return m.Shutdown(sctx)
}

// runWorker serves until ctx ends; on SIGTERM the worker spills its DRAM objects to the NVMe
// tier within --shutdown_timeout before it exits.
func runWorker(ctx context.Context, e *env, s workerSettings) error {
	wc := e.workerConfig(s)
	srv, err := server.Start(server.Config{Worker: &wc})
	if err != nil {
		return fmt.Errorf("worker: %w", err)
	}
	w := srv.Worker
	fmt.Fprintf(e.stdout, "mooncake worker %s ready: data %s, metrics %s, DRAM %s, NVMe %s\n", w.ID(), w.Addr(),
		metricsURL(w.MetricsAddr()), base.Bytes(s.GlobalSegmentSize), nvmeDesc(s))
	if e.mooncakeLines {
		fmt.Fprintf(e.stdout, "Starting real client service on %s\n", w.Addr())
	}
	<-ctx.Done()
	e.logger().Info("signal received, shutting down", "worker", w.ID(), "limit", s.ShutdownTimeout)
	sctx, cancel := shutdownCtx(s.ShutdownTimeout)
	defer cancel()
	return w.Shutdown(sctx)
}

// runStandalone runs one master (a single raft voter) and one worker in this process.
func runStandalone(ctx context.Context, e *env, ms masterSettings, ws workerSettings) error {
	ms.DataDir = filepath.Join(ms.DataDir, "master")
	mc, wc := e.masterConfig(ms), e.workerConfig(ws)
	wc.MasterAddresses = nil // the composer registers the worker with this process's master
	srv, err := server.Start(server.Config{Master: &mc, Worker: &wc, ExportWorkerMetrics: true})
	if err != nil {
		return fmt.Errorf("standalone: %w", err)
	}
	m, w := srv.Master, srv.Worker
	rctx, rcancel := context.WithTimeout(ctx, registerTimeout)
	defer rcancel()
	if err := srv.WaitReady(rctx); err != nil {
		sctx, cancel := shutdownCtx(config.WorkerDefaults.ShutdownTimeout)
		defer cancel()
		_ = srv.Shutdown(sctx)
		return fmt.Errorf("standalone: %w", err)
	}
	if srv.ExportErr != nil {
		e.logger().Warn("standalone: the worker's metrics are not exported", "err", srv.ExportErr)
	}
	printStandaloneHelp(e.stdout, e.argv0, m.Addr(), m.MetricsAddr(), w.Addr(), ws)
	<-ctx.Done()
	e.logger().Info("signal received, shutting down: worker first (spilling DRAM), then master")
	sctx, cancel := shutdownCtx(ws.ShutdownTimeout)
	defer cancel()
	werr := w.Shutdown(sctx)
	mctx, mcancel := shutdownCtx(config.WorkerDefaults.ShutdownTimeout)
	defer mcancel()
	merr := m.Shutdown(mctx)
	if werr != nil {
		return fmt.Errorf("standalone worker shutdown: %w", werr)
	}
	return merr
}

// registerTimeout bounds how long standalone waits for its worker to register (the master
// elects itself first, about a second).
const registerTimeout = server.DefaultReadyTimeout

func metricsURL(addr string) string {
	if addr == "" {
		return "off"
	}
	return "http://" + addr + "/metrics"
}

// nvmeDesc is the banner's word on the NVMe tier: where it is, how large, and whether objects
// outlive a restart.
func nvmeDesc(s workerSettings) string {
	if s.RootFSDir == "" {
		return "none (DRAM only, persistence cache: objects are lost on a restart)"
	}
	p := s.Persistence
	if p == base.PersistenceDefault {
		p = base.PersistenceSpill
	}
	capacity := "90% of the free disk"
	if s.SSDCapacity > 0 {
		capacity = base.Bytes(s.SSDCapacity).String()
	}
	kept := "objects kept across restarts"
	if p == base.PersistenceCache {
		kept = "objects lost on a restart"
	}
	return fmt.Sprintf("%s, up to %s (persistence %s: %s)", s.RootFSDir, capacity, p, kept)
}

// cliName is how the user runs this binary: "go run ./cmd/mooncake" under `go run`, else the
// command as typed.
func cliName(argv0 string) string {
	if argv0 == "" || strings.Contains(argv0, "go-build") {
		return "go run ./cmd/mooncake"
	}
	return argv0
}

// printStandaloneHelp prints the exact lines to put and get from another terminal.
func printStandaloneHelp(w io.Writer, argv0, masterAddr, metricsAddr, workerAddr string, ws workerSettings) {
	cli := cliName(argv0)
	export := ""
	if masterAddr != client.DefaultMasterAddress {
		export = "  export " + envMaster + "=" + masterAddr + "\n"
	}
	fmt.Fprintf(w, `mooncake standalone is ready
  master   %s   (metrics %s)
  worker   %s   (DRAM %s, NVMe %s)

In another terminal:
%s  echo hello > /tmp/hello.txt
  %s put hello /tmp/hello.txt
  %s get hello
  %s ls
  %s status
  %s rm hello
Stop with Ctrl-C.
`, masterAddr, metricsURL(metricsAddr), workerAddr, base.Bytes(ws.GlobalSegmentSize), nvmeDesc(ws), export, cli, cli, cli, cli, cli)
}
