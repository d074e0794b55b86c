package master

import (
	"errors"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/mooncake-go/mooncake/internal/base"
	"github.com/mooncake-go/mooncake/server/lifecycle"
)

// TestRepairMetrics: the repair counters count copies, failures and bytes, the lifecycle
// counters leaves and lost connections, the task counters tasks created and ended by type and
// status; the gauges read the master at scrape time.
func TestRepairMetrics(t *testing.T) {
	reg := prometheus.NewRegistry()
	var r repairMetrics
	r.register(reg, func() repairGauges {
		g := repairGauges{UnderReplicated: 5, DrainingReplicas: 2, Queued: 3, InFlight: 1, LostReplicas: 9, InvisibleObjects: 4}
		g.Tasks[base.TaskCopy][base.TaskPending], g.Tasks[base.TaskCopy][base.TaskFailed], g.Tasks[base.TaskMove][base.TaskSuccess] = 2, 1, 3
		return g
	})
	r.tasksCreated[base.TaskCopy].Add(3)
	r.tasksCreated[base.TaskMove].Add(3)
	r.taskEnded(lifecycle.TaskEnded{Type: base.TaskCopy, Status: base.TaskFailed})
	for range 3 {
		r.taskEnded(lifecycle.TaskEnded{Type: base.TaskMove, Status: base.TaskSuccess})
	}
	r.copy(100, nil)
	r.copy(50, nil)
	r.copy(70, errors.New("x"))
	r.leaves.Add(1)
	r.disconnects.Add(2)
	const want = `
# HELP master_repair_copies_total Object copies repair and drain made, worker to worker.
# TYPE master_repair_copies_total counter
master_repair_copies_total 2
# HELP master_repair_copy_failures_total Repair and drain copies that failed (planned again by the next scan).
# TYPE master_repair_copy_failures_total counter
master_repair_copy_failures_total 1
# HELP master_repair_copied_bytes_total Bytes repair and drain copied.
# TYPE master_repair_copied_bytes_total counter
master_repair_copied_bytes_total 150
# HELP master_under_replicated_objects Objects with a replica lost on a dead worker, at the last repair scan (leader only).
# TYPE master_under_replicated_objects gauge
master_under_replicated_objects 5
# HELP master_draining_replicas Replicas on draining workers, at the last repair scan (leader only).
# TYPE master_draining_replicas gauge
master_draining_replicas 2
# HELP master_repair_queued Repair and drain copies queued (leader only).
# TYPE master_repair_queued gauge
master_repair_queued 3
# HELP master_repair_in_flight Repair and drain copies running (leader only).
# TYPE master_repair_in_flight gauge
master_repair_in_flight 1
# HELP master_lost_replicas Replicas of dead workers the metadata keeps for re-adoption.
# TYPE master_lost_replicas gauge
master_lost_replicas 9
# HELP master_invisible_objects Objects whose every replica is on a dead worker (invisible until it returns).
# TYPE master_invisible_objects gauge
master_invisible_objects 4
# HELP master_worker_disconnects_total Workers whose connection to the leader closed without a leave or restart announcement (no new puts from then; dead after client_disconnect_grace unless they reconnect).
# TYPE master_worker_disconnects_total counter
master_worker_disconnects_total 2
# HELP master_worker_leaves_total Workers unmounted on purpose (an embedded client's close: LeaveWorker committed).
# TYPE master_worker_leaves_total counter
master_worker_leaves_total 1
# HELP master_tasks Copy and move tasks the leader holds (query_task answers them), by type and status: pending and processing ones, and ended ones until the oldest are forgotten past 4096 (leader only).
# TYPE master_tasks gauge
master_tasks{status="failed",type="copy"} 1
master_tasks{status="failed",type="move"} 0
master_tasks{status="pending",type="copy"} 2
master_tasks{status="pending",type="move"} 0
master_tasks{status="processing",type="copy"} 0
master_tasks{status="processing",type="move"} 0
master_tasks{status="success",type="copy"} 0
master_tasks{status="success",type="move"} 3
# HELP master_tasks_created_total Copy and move tasks created (create_copy_task, create_move_task), by type; a resent CreateTask creates none (leader only).
# TYPE master_tasks_created_total counter
master_tasks_created_total{type="copy"} 3
master_tasks_created_total{type="move"} 3
# HELP master_tasks_ended_total Copy and move tasks ended, by type and status (success or failed) (leader only).
# TYPE master_tasks_ended_total counter
master_tasks_ended_total{status="failed",type="copy"} 1
master_tasks_ended_total{status="failed",type="move"} 0
master_tasks_ended_total{status="success",type="copy"} 0
master_tasks_ended_total{status="success",type="move"} 3
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want)); err != nil {
		t.Fatal(err)
	}
}
