package server

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/mooncake-go/mooncake/internal/base"
	"github.com/mooncake-go/mooncake/server/master"
	"github.com/mooncake-go/mooncake/server/worker"
)

// DefaultReadyTimeout bounds WaitReady when its context has no deadline: a fresh master
// elects itself in about a second, and a worker's registration reconciles its inventory.
const DefaultReadyTimeout = 30 * time.Second

// Config names the services one process runs: a master, a worker, or both (standalone).
// Each service's own config is validated by its constructor.
type Config struct {
	// Master configures the master; nil runs none.
	Master *master.Config
	// Worker configures the worker; nil runs none. With a master in the same process and no
	// MasterAddresses of its own, the worker registers with that master.
	Worker *worker.Config
	// ExportWorkerMetrics, with both services, adds the worker's series to the master's
	// /metrics, so the worker needs no metrics port of its own (`mooncake standalone`).
	// A failure to export is logged by the caller, not fatal: see Servers.ExportErr.
	ExportWorkerMetrics bool
}

// Servers are the services Start built. Either may be nil (Config named it nil).
type Servers struct {
	Master *master.Master
	Worker *worker.Worker
	// ExportErr is why the worker's metrics are not on the master's /metrics, when
	// Config.ExportWorkerMetrics asked for it and it failed; nil otherwise.
	ExportErr error
}

// Start builds the services cfg names: the master first, then the worker (registered with
// that master when both run). It does not wait for readiness: call WaitReady. On an error
// nothing it started is left running.
func Start(cfg Config) (*Servers, error) {
	if cfg.Master == nil && cfg.Worker == nil {
		return nil, fmt.Errorf("%w: server: neither a master nor a worker to start", base.ErrInvalidParams)
	}
	s := &Servers{}
	if cfg.Master != nil {
		m, err := master.NewMaster(*cfg.Master)
		if err != nil {
			return nil, err
		}
		s.Master = m
	}
	if cfg.Worker != nil {
		wc := *cfg.Worker
		if s.Master != nil && len(wc.MasterAddresses) == 0 {
			wc.MasterAddresses = []string{s.Master.Addr()}
		}
		w, err := worker.NewWorker(wc)
		if err != nil {
			if s.Master != nil {
				_ = s.Master.Shutdown(context.Background())
			}
			return nil, err
		}
		s.Worker = w
	}
	if cfg.ExportWorkerMetrics && s.Master != nil && s.Worker != nil {
		s.ExportErr = ExportWorkerMetrics(s.Master, s.Worker)
	}
	return s, nil
}

// WaitReady waits until the worker has registered with a leader (so a put can be placed on
// it), bounded by ctx, or by DefaultReadyTimeout when ctx has no deadline. It takes the
// worker's registration signal (worker.Worker.Registered). Without a worker it returns nil
// at once: a master alone is ready when it serves.
func (s *Servers) WaitReady(ctx context.Context) error {
	if s.Worker == nil {
		return nil
	}
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, DefaultReadyTimeout)
		defer cancel()
	}
	select {
	case <-s.Worker.Registered():
		return nil
	case <-ctx.Done():
		return fmt.Errorf("%w: worker %s did not register with a leader: %w", base.ErrTimeout, s.Worker.ID(), ctx.Err())
	}
}

// Shutdown stops the worker first (spilling DRAM to NVMe while the master still runs), then
// the master. Each gets what is left of ctx.
func (s *Servers) Shutdown(ctx context.Context) error {
	var errs []error
	if s.Worker != nil {
		errs = append(errs, s.Worker.Shutdown(ctx))
	}
	if s.Master != nil {
		errs = append(errs, s.Master.Shutdown(ctx))
	}
	return errors.Join(errs...)
}

// ExportWorkerMetrics adds a worker's metrics to a master's /metrics, for a process that
// runs both: the worker then needs no metrics port of its own. Call it once per worker.
func ExportWorkerMetrics(m *master.Master, w *worker.Worker) error {
	if err := m.ExportMetrics(w.Collectors()...); err != nil {
		return fmt.Errorf("server: exporting worker %s's metrics: %w", w.ID(), err)
	}
	return nil
}
