package master

import (
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/mooncake-go/mooncake/internal/base"
	"github.com/mooncake-go/mooncake/server/lifecycle"
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
	// tasksCreated counts the copy and move tasks this master created as leader, by type
	// (indexed by base.TaskType; a resent CreateTask creates none); tasksEnded those that
	// ended (lifecycle.TaskEnded), by type and outcome ([0] success, [1] failed).
	tasksCreated [lifecycle.NumTaskTypes]atomic.Uint64
	tasksEnded   [lifecycle.NumTaskTypes][2]atomic.Uint64
}

// repairGauges is what the gauges read at scrape time.
type repairGauges struct {
	UnderReplicated, DrainingReplicas int
	Queued, InFlight                  int
	LostReplicas, InvisibleObjects    int64
	// Tasks counts the tasks the leader holds, by type and status (lifecycle.TaskCounts).
	Tasks lifecycle.TaskCounts
}

// taskTypeLabels and taskStatusLabels are the label values of base.TaskType and
// base.TaskStatus, indexed by their numbers (Mooncake's TaskType and TaskStatus names, lower
// case).
var (
	taskTypeLabels   = [lifecycle.NumTaskTypes]string{base.TaskCopy: "copy", base.TaskMove: "move"}
	taskStatusLabels = [lifecycle.NumTaskStatuses]string{base.TaskPending: "pending", base.TaskProcessing: "processing",
		base.TaskSuccess: "success", base.TaskFailed: "failed"}
	descTasksCreated = prometheus.NewDesc("master_tasks_created_total",
		"Copy and move tasks created (create_copy_task, create_move_task), by type; a resent CreateTask creates none (leader only).", []string{"type"}, nil)
	descTasksEnded = prometheus.NewDesc("master_tasks_ended_total",
		"Copy and move tasks ended, by type and status (success or failed) (leader only).", []string{"type", "status"}, nil)
	descTasks = prometheus.NewDesc("master_tasks",
		"Copy and move tasks the leader holds (query_task answers them), by type and status: pending and processing ones, and ended ones until the oldest are forgotten past 4096 (leader only).",
		[]string{"type", "status"}, nil)
)

// taskCollector exports the task counters and, at scrape time, master_tasks.
type taskCollector struct {
	r      *repairMetrics
	gauges func() repairGauges
}

func (c taskCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- descTasksCreated
	ch <- descTasksEnded
	ch <- descTasks
}

func (c taskCollector) Collect(ch chan<- prometheus.Metric) {
	tasks := c.gauges().Tasks
	for typ, tl := range taskTypeLabels {
		ch <- prometheus.MustNewConstMetric(descTasksCreated, prometheus.CounterValue, float64(c.r.tasksCreated[typ].Load()), tl)
		for i, st := range []base.TaskStatus{base.TaskSuccess, base.TaskFailed} {
			ch <- prometheus.MustNewConstMetric(descTasksEnded, prometheus.CounterValue, float64(c.r.tasksEnded[typ][i].Load()), tl, taskStatusLabels[st])
		}
		for st, sl := range taskStatusLabels {
			ch <- prometheus.MustNewConstMetric(descTasks, prometheus.GaugeValue, float64(tasks[typ][st]), tl, sl)
		}
	}
}

// taskEnded counts a task that ended.
func (r *repairMetrics) taskEnded(e lifecycle.TaskEnded) {
	if int(e.Type) >= lifecycle.NumTaskTypes {
		return
	}
	i := 0
	if e.Status == base.TaskFailed {
		i = 1
	}
	r.tasksEnded[e.Type][i].Add(1)
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
		taskCollector{r: r, gauges: gauges},
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
