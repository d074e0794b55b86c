package base

import "fmt"

// Copy and move tasks (Mooncake's create_copy_task, create_move_task, query_task): the
// vocabulary the leader's lifecycle machine, the wire and the client share.

// TaskID names a task: Mooncake's UUID, two 64-bit halves. The zero id is Mooncake's
// failure value and names no task.
type TaskID struct{ Hi, Lo uint64 }

func (id TaskID) String() string { return fmt.Sprintf("%016x-%016x", id.Hi, id.Lo) }

// TaskType is what a task does (Mooncake's TaskType numbers).
type TaskType uint8

const (
	TaskCopy TaskType = 0 // REPLICA_COPY: one more replica on each target
	TaskMove TaskType = 1 // REPLICA_MOVE: the source's replica moves to the target
)

// TaskStatus is where a task stands (Mooncake's TaskStatus numbers).
type TaskStatus uint8

const (
	TaskPending    TaskStatus = 0 // queued, no copy started
	TaskProcessing TaskStatus = 1 // a copy started
	TaskSuccess    TaskStatus = 2 // every copy committed
	TaskFailed     TaskStatus = 3 // some copy failed
)
