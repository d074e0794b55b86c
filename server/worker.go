package server

import (
	"context"
	"fmt"

	"github.com/mooncake-go/mooncake/internal/base"
)

// Worker is one worker: the DRAM arena and NVMe tier behind the data RPC service.
type Worker struct{}

// NewWorker starts a worker and registers it with the masters.
func NewWorker(cfg WorkerConfig) (*Worker, error) {
	cfg.EnsureDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return nil, fmt.Errorf("%w: server: worker not wired yet", base.ErrNotSupported)
}

// Addr returns the bound RPC address.
func (w *Worker) Addr() string { return "" }

// MetricsAddr returns the bound metrics address, "" when there is none.
func (w *Worker) MetricsAddr() string { return "" }

// ID returns the worker's id.
func (w *Worker) ID() base.WorkerID { return "" }

// Shutdown stops the worker (SIGTERM path).
func (w *Worker) Shutdown(ctx context.Context) error { return nil }
