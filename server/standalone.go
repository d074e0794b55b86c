package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"

	"github.com/mooncake-go/mooncake/dram"
	"github.com/mooncake-go/mooncake/internal/base"
	"github.com/mooncake-go/mooncake/server/master"
	"github.com/mooncake-go/mooncake/server/worker"
)

// StandaloneConfig configures one master (a single-voter raft cluster) and one worker in one
// process, as `mooncake standalone` runs them. A zero field takes the default its comment names.
type StandaloneConfig struct {
	// DataDir holds the master's raft state under DataDir/master. Default "./mooncake-data".
	DataDir string
	// RPCAddress is the master's client address. Default "127.0.0.1:50051".
	RPCAddress string
	// MetricsAddress serves the master's /metrics, /health, /api/v1/status and dashboard.
	// Default "" (none).
	MetricsAddress string
	// WorkerAddress is the worker's data address. Default "127.0.0.1:0" (a free port).
	WorkerAddress string
	// WorkerMetricsAddress serves the worker's /metrics. Default "" (none).
	WorkerMetricsAddress string
	// GlobalSegmentSize is the worker's DRAM arena. Default 1 GiB.
	GlobalSegmentSize int64
	// RootFSDir holds the worker's NVMe tier. Default "": DRAM only.
	RootFSDir string
	// Persistence is the worker's default mode (see worker.Config). Default spill with
	// RootFSDir, else cache.
	Persistence base.Persistence
	// SSDCapacity bounds the NVMe tier. Default nvme's.
	SSDCapacity int64
	// ClusterID. Default base.DefaultClusterID.
	ClusterID string
	// HugePages chooses the arena's page mode. Default dram.HugePagesAuto.
	HugePages dram.HugePages
	// PrivateArena keeps the worker's arena private (worker.Config.PrivateArena): clients on
	// this host then read over TCP instead of shared memory.
	PrivateArena bool
	// WorkerID names the worker. Default "standalone-worker": the same across restarts, so the
	// NVMe directory and the replicas survive a restart whatever port the worker gets.
	WorkerID base.WorkerID
	// Logger receives every log line. Default slog.Default().
	Logger *slog.Logger
}

// Standalone is a master and a worker in one process.
type Standalone struct {
	master *master.Master
	worker *worker.Worker
}

// NewStandalone starts the master, then the worker registered with it (Start), and waits until
// the worker is registered (WaitReady) (an error wrapping base.ErrTimeout after 30 s).
func NewStandalone(cfg StandaloneConfig) (*Standalone, error) {
	if cfg.DataDir == "" {
		cfg.DataDir = "./mooncake-data"
	}
	if cfg.WorkerID == "" {
		cfg.WorkerID = "standalone-worker"
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	mc := master.Config{ID: master.DefaultMasterID, DataDir: filepath.Join(cfg.DataDir, "master"), RPCAddress: cfg.RPCAddress,
		RaftAddress: "127.0.0.1:0", MetricsAddress: cfg.MetricsAddress, ClusterID: cfg.ClusterID, Logger: cfg.Logger}
	wc := worker.Config{WorkerID: cfg.WorkerID, ClusterID: cfg.ClusterID,
		Address: cfg.WorkerAddress, MetricsAddress: cfg.WorkerMetricsAddress, GlobalSegmentSize: cfg.GlobalSegmentSize,
		RootFSDir: cfg.RootFSDir, Persistence: cfg.Persistence, SSDCapacity: cfg.SSDCapacity, HugePages: cfg.HugePages,
		PrivateArena: cfg.PrivateArena, Logger: cfg.Logger}
	srv, err := Start(Config{Master: &mc, Worker: &wc})
	if err != nil {
		return nil, err
	}
	s := &Standalone{master: srv.Master, worker: srv.Worker}
	ctx, cancel := context.WithTimeout(context.Background(), DefaultReadyTimeout)
	defer cancel()
	if err := srv.WaitReady(ctx); err != nil {
		_ = s.Shutdown(context.Background())
		return nil, fmt.Errorf("%w: standalone worker did not register with its master within 30s", base.ErrTimeout)
	}
	return s, nil
}

// Master returns the master.
func (s *Standalone) Master() *master.Master { return s.master }

// Worker returns the worker.
func (s *Standalone) Worker() *worker.Worker { return s.worker }

// Addr returns the master's client address (what clients connect to).
func (s *Standalone) Addr() string { return s.master.Addr() }

// Shutdown stops the worker first (spilling DRAM to NVMe while the master still runs), then
// the master. Each gets what is left of ctx.
func (s *Standalone) Shutdown(ctx context.Context) error {
	return errors.Join(s.worker.Shutdown(ctx), s.master.Shutdown(ctx))
}
