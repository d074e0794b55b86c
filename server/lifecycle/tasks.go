package lifecycle

import (
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/mooncake-go/mooncake/internal/base"
)

// Copy and move tasks (Mooncake's create_copy_task, create_move_task, query_task): explicit
// copy orders on the repair queue, named by a task id the driver chooses. A copy task adds a
// replica on each target (AddReplicas); a move task copies to its target and then drops the
// source's replica (MoveReplicas with From = the source, as a drain does). Tasks are soft
// state: a new leadership starts with none (query_task then answers not found).

// Task is one copy or move task as query_task reports it.
type Task struct {
	ID      base.TaskID
	Type    base.TaskType
	Key     string
	Version base.Version
	Source  base.WorkerID // a move's source
	// Assigned is the worker that copies (its first copy's source): Mooncake's
	// assigned_client.
	Assigned base.WorkerID
	Targets  []base.WorkerID // a copy's targets; a move's one target
	Status   base.TaskStatus
	// Created is when it was created; Updated when its status last changed (the time of the
	// event; for a commit, of the last event that handed out copies).
	Created, Updated time.Time
	// Message is the first failure's error (Failed), else "".
	Message string
	// open counts its orders not finished yet.
	open int
}

// TaskObject is the object a task copies, as the driver read it from the metadata.
type TaskObject struct {
	Key      string
	Version  base.Version
	Size     int64
	Replicas []base.WorkerID // live
}

type orderKey struct {
	key string
	to  base.WorkerID
}

// CreateTask queues the copies of a task: one order per target (a move has exactly one
// target and a source that holds a live replica). addrs names every active worker's
// address. Targets must be placeable (alive, not draining) and not hold the object. Errors:
// base.ErrInvalidParams (no target, a move with another count, an id already used, a target
// named twice or equal to the source), base.ErrObjectNotFound (no live replica, or the
// source holds none), base.ErrSegmentNotFound (a target not placeable),
// base.ErrObjectAlreadyExists (a target holds it), base.ErrUnavailable (the queue or the
// task table is full of unfinished work). A task created hands out the queue's copies at
// once (Copy), as Tick does.
func (m *Machine) CreateTask(now time.Time, id base.TaskID, typ base.TaskType, obj TaskObject, source base.WorkerID,
	targets []base.WorkerID, addrs map[base.WorkerID]string) ([]Effect, error) {
	r := &m.repair
	if err := m.checkTask(id, typ, obj, source, targets); err != nil {
		return nil, err
	}
	if len(r.queue)+len(targets) > m.cfg.Repair.MaxQueued || !r.roomForTask(m.cfg.Repair.MaxTasks) {
		return nil, fmt.Errorf("%w: too many copies or tasks queued; try again later", base.ErrUnavailable)
	}
	orders := make([]CopyOrder, 0, len(targets))
	for _, to := range targets {
		o := CopyOrder{Key: obj.Key, Version: obj.Version, Size: obj.Size, To: to, ToAddr: addrs[to], Task: id}
		if typ == base.TaskMove {
			o.From, o.Src = source, source
		} else {
			o.Add = true
			for _, s := range obj.Replicas {
				if w := m.workers[s]; w != nil && w.State != Dead && addrs[s] != "" {
					o.Src = s
					break
				}
			}
		}
		o.SrcAddr = addrs[o.Src]
		if o.Src == "" || o.SrcAddr == "" || o.ToAddr == "" {
			return nil, fmt.Errorf("%w: %q has no reachable replica to copy from, or %s has no address", base.ErrObjectNotFound, obj.Key, to)
		}
		orders = append(orders, o)
	}
	r.queue = append(r.queue, orders...)
	r.queued[obj.Key] += len(orders)
	r.tasks[id] = &Task{ID: id, Type: typ, Key: obj.Key, Version: obj.Version, Source: source,
		Targets: slices.Clone(targets), Assigned: orders[0].Src, Status: base.TaskPending, Created: now, Updated: now, open: len(orders)}
	r.taskOrder = append(r.taskOrder, id)
	return r.tick(now, m), nil
}

// TaskResent reports whether CreateTask of a task with id, typ and key was called already:
// the task is held (not forgotten) and has that type and key, so the call is its client's
// resend and is answered with the task as it is. The same id with another type or key is an
// error wrapping base.ErrInvalidParams.
func (m *Machine) TaskResent(id base.TaskID, typ base.TaskType, key string) (bool, error) {
	t := m.repair.tasks[id]
	switch {
	case t == nil:
		return false, nil
	case t.Type != typ || t.Key != key:
		return false, fmt.Errorf("%w: task id %s is in use by a task of type %d on %q", base.ErrInvalidParams, id, t.Type, t.Key)
	}
	return true, nil
}

func (m *Machine) checkTask(id base.TaskID, typ base.TaskType, obj TaskObject, source base.WorkerID, targets []base.WorkerID) error {
	switch {
	case len(targets) == 0:
		return fmt.Errorf("%w: no target segment", base.ErrInvalidParams)
	case typ == base.TaskMove && len(targets) != 1:
		return fmt.Errorf("%w: a move has one target", base.ErrInvalidParams)
	case typ != base.TaskMove && typ != base.TaskCopy:
		return fmt.Errorf("%w: task type %d", base.ErrInvalidParams, typ)
	case m.repair.tasks[id] != nil:
		return fmt.Errorf("%w: task id %s is in use", base.ErrInvalidParams, id)
	case len(obj.Replicas) == 0:
		return fmt.Errorf("%w: %q has no live replica", base.ErrObjectNotFound, obj.Key)
	case typ == base.TaskMove && !slices.Contains(obj.Replicas, source):
		return fmt.Errorf("%w: %q has no replica on %s", base.ErrObjectNotFound, obj.Key, source)
	}
	for i, to := range targets {
		switch {
		case slices.Contains(targets[:i], to) || (typ == base.TaskMove && to == source):
			return fmt.Errorf("%w: target %s named twice", base.ErrInvalidParams, to)
		case !m.Placeable(to):
			return fmt.Errorf("%w: target %s is not alive or is draining", base.ErrSegmentNotFound, to)
		case slices.Contains(obj.Replicas, to):
			return fmt.Errorf("%w: %q already has a replica on %s", base.ErrObjectAlreadyExists, obj.Key, to)
		}
	}
	return nil
}

// roomForTask makes room for one more task: at max tasks the oldest finished one is
// forgotten; false when every task is unfinished.
func (r *repairState) roomForTask(max int) bool {
	if len(r.tasks) < max {
		return true
	}
	for i, id := range r.taskOrder {
		if t := r.tasks[id]; t.Status == base.TaskSuccess || t.Status == base.TaskFailed {
			delete(r.tasks, id)
			r.taskOrder = slices.Delete(r.taskOrder, i, i+1)
			return true
		}
	}
	return false
}

// Task returns a task by id; ok is false for one this leadership does not know (never
// created here, or forgotten past RepairConfig.MaxTasks).
func (m *Machine) Task(id base.TaskID) (Task, bool) {
	t := m.repair.tasks[id]
	if t == nil {
		return Task{}, false
	}
	c := *t
	c.Targets = slices.Clone(t.Targets)
	return c, true
}

// NumTaskTypes and NumTaskStatuses are the numbers of base.TaskType values (copy, move) and
// base.TaskStatus values (pending to failed).
const (
	NumTaskTypes    = 2
	NumTaskStatuses = 4
)

// TaskCounts counts tasks by type and status: [base.TaskType][base.TaskStatus].
type TaskCounts [NumTaskTypes][NumTaskStatuses]int

// TaskCounts counts the tasks this leadership holds (ended ones until forgotten past
// RepairConfig.MaxTasks).
func (m *Machine) TaskCounts() TaskCounts {
	var c TaskCounts
	for _, t := range m.repair.tasks {
		if int(t.Type) < NumTaskTypes && int(t.Status) < NumTaskStatuses {
			c[t.Type][t.Status]++
		}
	}
	return c
}

// taskStarted marks o's task processing (tick dispatched o).
func (r *repairState) taskStarted(o *CopyOrder, now time.Time) {
	if t := r.tasks[o.Task]; t != nil && o.Task != (base.TaskID{}) && t.Status == base.TaskPending {
		t.Status, t.Updated = base.TaskProcessing, now
	}
}

// taskFinished records the end of one of o's task's orders.
func (r *repairState) taskFinished(o *CopyOrder, err error) {
	t := r.tasks[o.Task]
	if t == nil || o.Task == (base.TaskID{}) {
		return
	}
	t.open--
	if err != nil && t.Message == "" {
		t.Message = fmt.Sprintf("copy to %s: %v", o.To, err)
	}
	if t.open > 0 {
		return
	}
	t.Status, t.Updated = base.TaskSuccess, r.last
	if t.Message != "" {
		t.Status = base.TaskFailed
	}
	r.ended = append(r.ended, TaskEnded{ID: t.ID, Type: t.Type, Key: t.Key, Status: t.Status, Message: t.Message})
}

// added ends an in-flight task order with its AddReplicas outcome.
func (r *repairState) added(m *Machine, worker base.WorkerID, it base.KeyVersion, err error) {
	o := r.inflight[orderKey{it.Key, worker}]
	if o == nil || !o.Add || o.Version != it.Version {
		return
	}
	r.finish(m, o, err)
}

// finish ends an in-flight order whose commit succeeded or failed: a failed one owes its
// target a drop of what it received, unless the target holds the object already (then the
// copy it holds is a committed replica).
func (r *repairState) finish(m *Machine, o *CopyOrder, err error) {
	delete(r.inflight, orderKey{o.Key, o.To})
	r.unqueue(o.Key)
	r.taskFinished(o, err)
	if err != nil {
		r.stats.Failed++
		if !errors.Is(err, base.ErrObjectAlreadyExists) {
			m.QueueDrop(o.To, o.Key, o.Version)
		}
		return
	}
	r.stats.Copied++
	r.stats.CopiedBytes += o.Size
	// From's copy is surplus now: the drained or moved-from worker's, or a repaired worker's
	// that returned (and re-adopted it) while the copy ran. A dead worker's queue is cleared
	// when it registers again, so this costs nothing then. (From == To: the copy went back to
	// the worker whose replica was lost; it is its replica now. A copy task has no From.)
	if o.From != "" && o.From != o.To {
		m.QueueDrop(o.From, o.Key, o.Version)
	}
}

// unqueue counts one order of key queued or in flight as gone.
func (r *repairState) unqueue(key string) {
	if r.queued[key]--; r.queued[key] <= 0 {
		delete(r.queued, key)
	}
}
