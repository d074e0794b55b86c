package master

import (
	"context"
	"fmt"

	"github.com/mooncake-go/mooncake/internal/base"
	"github.com/mooncake-go/mooncake/raftmeta"
	"github.com/mooncake-go/mooncake/server/lifecycle"
	"github.com/mooncake-go/mooncake/transfer"
)

// Copy and move tasks (Mooncake's create_copy_task, create_move_task, query_task): the leader
// resolves the segment names and reads the object, then the lifecycle machine queues the
// copies (lifecycle/tasks.go), run by copyObject as repair's are. Tasks are the leadership's
// soft state: after a failover query_task answers OBJECT_NOT_FOUND.

// createTask serves CreateTask. Leader only.
func (m *Master) createTask(r *transfer.CreateTaskRequest) (*transfer.CreateTaskResponse, error) {
	if err := base.ValidateKey(r.Key); err != nil {
		return nil, err
	}
	typ := base.TaskType(r.Type)
	if typ != base.TaskCopy && typ != base.TaskMove {
		return nil, fmt.Errorf("%w: task type %d", base.ErrInvalidParams, r.Type)
	}
	if !m.ensureLeader() {
		return nil, m.notLeader()
	}
	// A resend (the client's id, a task of it held) is answered before anything is resolved:
	// the task may have changed what the checks below look at (a move's source holds the
	// object no more).
	if resent, err := m.taskResent(r.ID, typ, r.Key); err != nil {
		return nil, err
	} else if resent {
		return &transfer.CreateTaskResponse{ID: r.ID}, nil
	}
	segs := m.node.Segments()
	addrs := map[base.WorkerID]string{}
	for _, s := range segs {
		if s.State == raftmeta.SegmentActive {
			addrs[s.ID] = s.Address
		}
	}
	var source base.WorkerID
	if typ == base.TaskMove {
		id, err := segmentNamed(segs, r.Source)
		if err != nil {
			return nil, err
		}
		source = id
	}
	targets := make([]base.WorkerID, 0, len(r.Targets))
	for _, name := range r.Targets {
		id, err := segmentNamed(segs, name)
		if err != nil {
			return nil, err
		}
		targets = append(targets, id)
	}
	o, ok := m.node.Lookup(r.Key)
	if !ok {
		return nil, fmt.Errorf("%w: %q", base.ErrObjectNotFound, r.Key)
	}
	obj := lifecycle.TaskObject{Key: o.Key, Version: o.Version, Size: o.Size, Replicas: o.Replicas}
	now := m.now()
	m.mu.Lock()
	id := r.ID
	for id == (base.TaskID{}) {
		id = base.TaskID{Hi: m.mu.rng.Uint64(), Lo: m.mu.rng.Uint64()}
	}
	// NB: checked again under the lock CreateTask takes: a resend that arrived while the
	// first call resolved its segments is answered here, not refused as an id in use.
	resent, err := m.mu.lc.TaskResent(id, typ, r.Key)
	var effs []lifecycle.Effect
	if !resent && err == nil {
		effs, err = m.mu.lc.CreateTask(now, id, typ, obj, source, targets, addrs)
	}
	m.mu.Unlock()
	if err != nil {
		return nil, err
	}
	if !resent {
		m.rmet.tasksCreated[typ].Add(1)
		m.execute(context.Background(), effs)
		m.log.Info("copy task created", "task", id, "type", typ, "key", r.Key, "source", source, "targets", targets)
	}
	return &transfer.CreateTaskResponse{ID: id}, nil
}

// taskResent reports whether a CreateTask with the client's id is a resend of a task the
// leader holds (lifecycle.Machine.TaskResent); false for a request without an id.
func (m *Master) taskResent(id base.TaskID, typ base.TaskType, key string) (bool, error) {
	if id == (base.TaskID{}) {
		return false, nil
	}
	m.mu.Lock()
	resent, err := m.mu.lc.TaskResent(id, typ, key)
	m.mu.Unlock()
	if resent {
		m.log.Debug("CreateTask resent: answered with the task created", "task", id, "key", key)
	}
	return resent, err
}

// segmentNamed resolves a segment name, a worker id or its worker's address, to the worker
// id (SEGMENT_NOT_FOUND when no registered worker has it).
func segmentNamed(segs []raftmeta.Segment, name string) (base.WorkerID, error) {
	for _, s := range segs {
		if string(s.ID) == name {
			return s.ID, nil
		}
	}
	for _, s := range segs {
		if s.Address == name && s.State == raftmeta.SegmentActive {
			return s.ID, nil
		}
	}
	return "", fmt.Errorf("%w: no worker is named %q", base.ErrSegmentNotFound, name)
}

// queryTask serves QueryTask. Leader only: the tasks are its soft state.
func (m *Master) queryTask(r *transfer.QueryTaskRequest) (*transfer.QueryTaskResponse, error) {
	if !m.ensureLeader() {
		return nil, m.notLeader()
	}
	m.mu.Lock()
	t, ok := m.mu.lc.Task(r.ID)
	m.mu.Unlock()
	if !ok {
		return nil, fmt.Errorf("%w: task %s is not known to this leader (created under another, or forgotten)",
			base.ErrObjectNotFound, r.ID)
	}
	return &transfer.QueryTaskResponse{Type: t.Type, Status: t.Status, Key: t.Key,
		CreatedMs: t.Created.UnixMilli(), UpdatedMs: t.Updated.UnixMilli(), AssignedClient: string(t.Assigned),
		Message: t.Message}, nil
}

// createTaskOp is CreateTask's Mooncake counter: create_move_task for a move, else
// create_copy_task (a bad type counts as a failed copy).
func createTaskOp(req transfer.Message) masterOp {
	if req.(*transfer.CreateTaskRequest).Type == base.TaskMove {
		return opCreateMoveTask
	}
	return opCreateCopyTask
}

// serveCreateTask and serveQueryTask are the RPC table's entries.
func serveCreateTask(_ context.Context, m *Master, req transfer.Message) (transfer.Message, error, error) {
	resp, err := m.createTask(req.(*transfer.CreateTaskRequest))
	if err != nil {
		return nil, nil, err
	}
	return resp, nil, nil
}

func serveQueryTask(_ context.Context, m *Master, req transfer.Message) (transfer.Message, error, error) {
	resp, err := m.queryTask(req.(*transfer.QueryTaskRequest))
	if err != nil {
		return nil, nil, err
	}
	return resp, nil, nil
}
