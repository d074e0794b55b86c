package wire

import "github.com/mooncake-go/mooncake/internal/base"

// Lifecycle calls (opcodes 60-69): repair and drain. See docs/protocol.md.

// ReplicateRequest (op 60, master -> worker) asks the worker holding Key at Version to copy
// it to worker To at ToAddr (a Write of the whole object with Persistence, then its commit).
// The response is Empty once To holds the committed copy. The leader then records the copy
// (raftmeta MoveReplicas); until then To's copy is an orphan that a drop or To's next
// registration removes.
type ReplicateRequest struct {
	Key         string
	Version     base.Version
	To          base.WorkerID
	ToAddr      string
	Persistence base.Persistence
}

func (m *ReplicateRequest) Op() Op { return OpReplicate }
func (m *ReplicateRequest) Encode(e *Encoder) {
	e.Str(m.Key)
	e.U64(uint64(m.Version))
	e.Str(string(m.To))
	e.Str(m.ToAddr)
	e.U8(uint8(m.Persistence))
}
func (m *ReplicateRequest) Decode(d *Decoder) {
	m.Key = d.Key()
	m.Version = base.Version(d.U64())
	m.To = decodeWorkerID(d)
	m.ToAddr = d.Str(MaxAddrLen, "address")
	m.Persistence = decodePersistence(d)
}

// DrainWorkerRequest (op 61, client -> leader) starts draining a worker (no new placements,
// its replicas are moved to the others) or, with Cancel, stops it. The response is Empty.
// Repeating either is harmless.
type DrainWorkerRequest struct {
	WorkerID base.WorkerID
	Cancel   bool
}

func (m *DrainWorkerRequest) Op() Op { return OpDrainWorker }
func (m *DrainWorkerRequest) Encode(e *Encoder) {
	e.Str(string(m.WorkerID))
	e.Bool(m.Cancel)
}
func (m *DrainWorkerRequest) Decode(d *Decoder) {
	m.WorkerID = decodeWorkerID(d)
	m.Cancel = d.Bool()
}

// RetireWorkerRequest (op 62, client -> leader) forgets a dead worker: the replicas the
// metadata kept for its return are dropped and objects left with none are removed. A worker
// that is not dead is refused (drain it, stop it, wait until it is dead). The response is
// Empty.
type RetireWorkerRequest struct {
	WorkerID base.WorkerID
}

func (m *RetireWorkerRequest) Op() Op            { return OpRetireWorker }
func (m *RetireWorkerRequest) Encode(e *Encoder) { e.Str(string(m.WorkerID)) }
func (m *RetireWorkerRequest) Decode(d *Decoder) { m.WorkerID = decodeWorkerID(d) }

// LeaveWorkerRequest (op 63, worker -> leader) unmounts a worker that leaves on purpose (an
// embedded worker's close, Mooncake's UnmountSegment). The leader stops placing on it, then
// answers Empty once its departure committed: objects held only there are gone from the
// metadata (or, for a worker with an NVMe tier, kept invisible for its return). An unknown
// worker (it left already) is answered OK, so a resend is harmless.
type LeaveWorkerRequest struct {
	WorkerID base.WorkerID
}

func (m *LeaveWorkerRequest) Op() Op            { return OpLeaveWorker }
func (m *LeaveWorkerRequest) Encode(e *Encoder) { e.Str(string(m.WorkerID)) }
func (m *LeaveWorkerRequest) Decode(d *Decoder) { m.WorkerID = decodeWorkerID(d) }

// AttachWorkerRequest (op 64, worker -> leader) holds a registered worker's connection to the
// leader open: the leader answers only when it stops leading (NOT_LEADER) or shuts down, and
// takes the connection's close as the worker's loss (no placements at once, dead after the
// master's client_disconnect_grace unless it attaches again). A worker sends it alone on a
// connection of its own. SEGMENT_NOT_FOUND: register first.
type AttachWorkerRequest struct {
	WorkerID base.WorkerID
}

func (m *AttachWorkerRequest) Op() Op            { return OpAttachWorker }
func (m *AttachWorkerRequest) Encode(e *Encoder) { e.Str(string(m.WorkerID)) }
func (m *AttachWorkerRequest) Decode(d *Decoder) { m.WorkerID = decodeWorkerID(d) }

// newLifecycleRequest returns an empty request of a lifecycle op (nil for another op).
func newLifecycleRequest(op Op) Message {
	switch op {
	case OpReplicate:
		return new(ReplicateRequest)
	case OpDrainWorker:
		return new(DrainWorkerRequest)
	case OpRetireWorker:
		return new(RetireWorkerRequest)
	case OpLeaveWorker:
		return new(LeaveWorkerRequest)
	case OpAttachWorker:
		return new(AttachWorkerRequest)
	case OpCreateTask:
		return new(CreateTaskRequest)
	case OpQueryTask:
		return new(QueryTaskRequest)
	}
	return nil
}

// newLifecycleResponse returns an empty response of a lifecycle op (nil for another op).
func newLifecycleResponse(op Op) Message {
	switch op {
	case OpReplicate, OpDrainWorker, OpRetireWorker, OpLeaveWorker, OpAttachWorker:
		return NewEmpty(op)
	case OpCreateTask:
		return new(CreateTaskResponse)
	case OpQueryTask:
		return new(QueryTaskResponse)
	}
	return nil
}
