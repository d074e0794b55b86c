package wire

import (
	"fmt"

	"github.com/mooncake-go/mooncake/internal/base"
)

// Copy and move tasks (opcodes 65-66, Mooncake's create_copy_task, create_move_task and
// query_task): the leader queues the copies on its repair queue and answers a task id at
// once; QueryTask reports the task. See docs/protocol.md.

// MaxTaskTargets bounds a copy task's target segments.
const MaxTaskTargets = 64

// CreateTaskRequest (op 65, client -> leader) copies Key's object to each of Targets
// (TaskCopy: one more replica on each) or moves its replica on Source to the one target
// (TaskMove). A segment is named by its worker id or its worker's address. The response
// (CreateTaskResponse) names the task. Errors: OBJECT_NOT_FOUND (no such key, or Source
// holds no replica), SEGMENT_NOT_FOUND (a segment unknown, or a target not alive),
// OBJECT_ALREADY_EXISTS (a target holds it), INVALID_PARAMS.
//
// ID is a trailing optional field (16 bytes, hi u64 then lo u64; absent when zero, as a
// sender built before it encodes): the task id the client chose. The leader creates the task
// under it, and a resend of the same request (same ID, type and key) is answered with the
// task already created instead of a second one, so the call is safe to resend. Without it the
// leader chooses the id (and a resend would queue a second task).
type CreateTaskRequest struct {
	Type    base.TaskType
	Key     string
	Source  string
	Targets []string
	ID      base.TaskID
}

func (m *CreateTaskRequest) Op() Op { return OpCreateTask }
func (m *CreateTaskRequest) Encode(e *Encoder) {
	e.U8(uint8(m.Type))
	e.Str(m.Key)
	e.Str(m.Source)
	e.Count(len(m.Targets))
	for _, t := range m.Targets {
		e.Str(t)
	}
	if m.ID != (base.TaskID{}) {
		encodeTaskID(e, m.ID)
	}
}
func (m *CreateTaskRequest) Decode(d *Decoder) {
	m.Type = base.TaskType(d.U8())
	m.Key = d.Key()
	m.Source = d.Str(MaxAddrLen, "source segment")
	n := d.Count(4, MaxTaskTargets, "targets")
	m.Targets = make([]string, 0, n)
	for range n {
		m.Targets = append(m.Targets, d.Str(MaxAddrLen, "target segment"))
	}
	if d.Err() != nil || d.Remaining() == 0 {
		return
	}
	m.ID = decodeTaskID(d)
	if d.Err() == nil && m.ID == (base.TaskID{}) {
		d.Fail(fmt.Errorf("%w: a zero task id (leave the field out)", base.ErrInvalidParams))
	}
}

// CreateTaskResponse names the task created.
type CreateTaskResponse struct{ ID base.TaskID }

func (m *CreateTaskResponse) Op() Op            { return OpCreateTask }
func (m *CreateTaskResponse) Encode(e *Encoder) { encodeTaskID(e, m.ID) }
func (m *CreateTaskResponse) Decode(d *Decoder) { m.ID = decodeTaskID(d) }

// QueryTaskRequest (op 66, client -> leader) asks for a task's state. OBJECT_NOT_FOUND: the
// leader does not know it (another leader created it, or it was forgotten).
type QueryTaskRequest struct{ ID base.TaskID }

func (m *QueryTaskRequest) Op() Op            { return OpQueryTask }
func (m *QueryTaskRequest) Encode(e *Encoder) { encodeTaskID(e, m.ID) }
func (m *QueryTaskRequest) Decode(d *Decoder) { m.ID = decodeTaskID(d) }

// A task id travels as hi u64, lo u64.
func encodeTaskID(e *Encoder, id base.TaskID) {
	e.U64(id.Hi)
	e.U64(id.Lo)
}

func decodeTaskID(d *Decoder) base.TaskID { return base.TaskID{Hi: d.U64(), Lo: d.U64()} }

// QueryTaskResponse is a task's state (Mooncake's QueryTaskResponse): times in unix
// milliseconds; AssignedClient is the worker that copies (the source); Message is the
// failure's reason.
type QueryTaskResponse struct {
	Type                 base.TaskType
	Status               base.TaskStatus
	Key                  string
	CreatedMs, UpdatedMs int64
	AssignedClient       string
	Message              string
}

func (m *QueryTaskResponse) Op() Op { return OpQueryTask }
func (m *QueryTaskResponse) Encode(e *Encoder) {
	e.U8(uint8(m.Type))
	e.U8(uint8(m.Status))
	e.Str(m.Key)
	e.I64(m.CreatedMs)
	e.I64(m.UpdatedMs)
	e.Str(m.AssignedClient)
	e.Str(m.Message)
}
func (m *QueryTaskResponse) Decode(d *Decoder) {
	m.Type = base.TaskType(d.U8())
	m.Status = base.TaskStatus(d.U8())
	m.Key = d.Key()
	m.CreatedMs = d.I64()
	m.UpdatedMs = d.I64()
	m.AssignedClient = d.Str(MaxAddrLen, "assigned client")
	m.Message = d.Str(MaxErrorMsgLen, "message")
}
