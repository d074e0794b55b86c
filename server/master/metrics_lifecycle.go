package master

import (
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
)

// repairMetrics are the master's lifecycle metrics (docs/metrics.md): repair and drain
// copies and bytes, workers unmounted and connections lost as counters, and at scrape time
// the objects below their replica count, the repair queue, and what the metadata keeps for
// dead workers.
type repairMetrics struct {
	copies, failures, bytes atomic.Uint64
	// leaves counts workers unmounted (LeaveWorker committed); disconnects, workers made
	// unreachable by the close of their attached connection.
	leaves, disconnects atomic.Uint64
}

// repairGauges is what the gauges read at scrape time.
type repairGauges struct {
	UnderReplicated, DrainingReplicas int
	Queued, InFlight                  int
	LostReplicas, InvisibleObjects    int64
}

// register adds the metrics to reg; gauges calls back into the master at scrape time (cheap,
// goroutine-safe).
func (r *repairMetrics) register(reg *prometheus.Registry, gauges func() repairGauges) {
	counter := func(name, help string, v *atomic.Uint64) prometheus.Collector {
		return prometheus.NewCounterFunc(prometheus.CounterOpts{Name: name, Help: help},
			func() float64 { return float64(v.Load()) })
	}
	gauge := func(name, help string, f func(repairGauges) float64) prometheus.Collector {
		return prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: name, Help: help},
			func() float64 { return f(gauges()) })
	}
	reg.MustRegister(
		counter("master_repair_copies_total", "Object copies repair and drain made, worker to worker.", &r.copies),
		counter("master_repair_copy_failures_total", "Repair and drain copies that failed (planned again by the next scan).", &r.failures),
		counter("master_repair_copied_bytes_total", "Bytes repair and drain copied.", &r.bytes),
		counter("master_worker_leaves_total", "Workers unmounted on purpose (an embedded client's close: LeaveWorker committed).", &r.leaves),
		counter("master_worker_disconnects_total", "Workers whose connection to the leader closed without a leave or restart announcement (no new puts from then; dead after client_disconnect_grace unless they reconnect).", &r.disconnects),
		gauge("master_under_replicated_objects", "Objects with a replica lost on a dead worker, at the last repair scan (leader only).",
			func(g repairGauges) float64 { return float64(g.UnderReplicated) }),
		gauge("master_draining_replicas", "Replicas on draining workers, at the last repair scan (leader only).",
			func(g repairGauges) float64 { return float64(g.DrainingReplicas) }),
		gauge("master_repair_queued", "Repair and drain copies queued (leader only).",
			func(g repairGauges) float64 { return float64(g.Queued) }),
		gauge("master_repair_in_flight", "Repair and drain copies running (leader only).",
			func(g repairGauges) float64 { return float64(g.InFlight) }),
		gauge("master_lost_replicas", "Replicas of dead workers the metadata keeps for re-adoption.",
			func(g repairGauges) float64 { return float64(g.LostReplicas) }),
		gauge("master_invisible_objects", "Objects whose every replica is on a dead worker (invisible until it returns).",
			func(g repairGauges) float64 { return float64(g.InvisibleObjects) }),
	)
}

// copy counts one finished copy of size bytes that ended with err.
func (r *repairMetrics) copy(size int64, err error) {
	if err != nil {
		r.failures.Add(1)
		return
	}
	r.copies.Add(1)
	r.bytes.Add(uint64(size))
}
