package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"time"

	"github.com/mooncake-go/mooncake/dram"
	"github.com/mooncake-go/mooncake/internal/base"
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
	// Persistence is the worker's default mode (see WorkerConfig). Default spill with
	// RootFSDir, else cache.
	Persistence base.Persistence
	// SSDCapacity bounds the NVMe tier. Default nvme's.
	SSDCapacity int64
	// ClusterID. Default base.DefaultClusterID.
	ClusterID string
	// HugePages chooses the arena's page mode. Default dram.HugePagesAuto.
	HugePages dram.HugePages
	// PrivateArena keeps the worker's arena private (WorkerConfig.PrivateArena): clients on
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
	master *Master
	worker *Worker
}

// NewStandalone starts the master, then the worker registered with it, and waits until the
// worker is registered (an error wrapping base.ErrTimeout after 30 s).
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
	mc := MasterConfig{ID: DefaultMasterID, DataDir: filepath.Join(cfg.DataDir, "master"), RPCAddress: cfg.RPCAddress,
		RaftAddress: "127.0.0.1:0", MetricsAddress: cfg.MetricsAddress, ClusterID: cfg.ClusterID, Logger: cfg.Logger}
	m, err := NewMaster(mc)
	if err != nil {
		return nil, err
	}
	wc := WorkerConfig{WorkerID: cfg.WorkerID, ClusterID: cfg.ClusterID, MasterAddresses: []string{m.Addr()},
		Address: cfg.WorkerAddress, MetricsAddress: cfg.WorkerMetricsAddress, GlobalSegmentSize: cfg.GlobalSegmentSize,
		RootFSDir: cfg.RootFSDir, Persistence: cfg.Persistence, SSDCapacity: cfg.SSDCapacity, HugePages: cfg.HugePages,
		PrivateArena: cfg.PrivateArena, Logger: cfg.Logger}
	w, err := NewWorker(wc)
	if err != nil {
		_ = m.Shutdown(context.Background())
		return nil, err
	}
	s := &Standalone{master: m, worker: w}
	select {
	case <-w.regCh:
	case <-time.After(30 * time.Second):
		_ = s.Shutdown(context.Background())
		return nil, fmt.Errorf("%w: standalone worker did not register with its master within 30s", base.ErrTimeout)
	}
	return s, nil
}

// Master returns the master.
func (s *Standalone) Master() *Master { return s.master }

// Worker returns the worker.
func (s *Standalone) Worker() *Worker { return s.worker }

// Addr returns the master's client address (what clients connect to).
func (s *Standalone) Addr() string { return s.master.Addr() }

// Shutdown stops the worker first (spilling DRAM to NVMe while the master still runs), then
// the master. Each gets what is left of ctx.
func (s *Standalone) Shutdown(ctx context.Context) error {
	return errors.Join(s.worker.Shutdown(ctx), s.master.Shutdown(ctx))
}
