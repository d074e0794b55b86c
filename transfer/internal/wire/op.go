package wire

import "strconv"

// Op is a frame's opcode: which call a request makes. A response carries its request's op.
// The numbers are a contract (docs/protocol.md); add new ones, never renumber.
type Op uint8

// Opcodes.
const (
	OpPing Op = 1

	// Master calls.
	OpPutStart       Op = 10
	OpPutEnd         Op = 11
	OpPutRevoke      Op = 12
	OpLookup         Op = 13
	OpExists         Op = 14
	OpRemove         Op = 15
	OpRemoveByRegex  Op = 16
	OpRemoveAll      Op = 17
	OpBatchPutStart  Op = 18
	OpBatchPutEnd    Op = 19
	OpBatchLookup    Op = 20
	OpBatchExists    Op = 21
	OpBatchRemove    Op = 22
	OpList           Op = 23
	OpRegisterWorker Op = 24
	OpHeartbeat      Op = 25
	OpStatus         Op = 26
	OpBatchPutRevoke Op = 27
	OpRegisterMaster Op = 28
	// Membership changes (an operator's `mooncake master add|remove`), leader only. Neither is
	// idempotent in the resend sense: a resend after a broken connection could repeat a change
	// whose first answer was lost (and a RemoveMaster resent after it committed answers
	// OBJECT_NOT_FOUND). Both are safe to repeat on purpose: adding a voter already in the
	// configuration at the same raft address is OK, and callers that saw an ambiguous failure
	// treat a second RemoveMaster's OBJECT_NOT_FOUND as done.
	OpAddMaster    Op = 29
	OpRemoveMaster Op = 30

	// Worker data calls.
	OpWrite     Op = 40
	OpCommit    Op = 41
	OpRead      Op = 42
	OpReadRange Op = 43
	OpDrop      Op = 44

	// Worker calls of the shared-memory path (a client on the worker's host).
	OpShmOpen    Op = 45
	OpShmPin     Op = 46
	OpShmRelease Op = 47

	// Lifecycle calls (60-69): repair and drain. Replicate is master -> worker (copy one
	// object to another worker); DrainWorker is an operator's call to the leader (idempotent:
	// draining twice, or cancelling a drain that is not running, changes nothing).
	OpReplicate   Op = 60
	OpDrainWorker Op = 61
	// RetireWorker forgets a dead worker for good (its replicas kept for re-adoption go,
	// and objects held only there are removed). Safe to repeat: a retired worker is unknown.
	OpRetireWorker Op = 62
	// LeaveWorker unmounts a worker that leaves on purpose (safe to resend: an unknown worker
	// is answered OK). AttachWorker holds a worker's connection to the leader open, so its
	// close tells the leader the worker is gone; never resent on another connection.
	OpLeaveWorker  Op = 63
	OpAttachWorker Op = 64
	// Copy and move tasks (messages_tasks.go). Both are safe to resend: CreateTask carries
	// the id its client chose, and the leader answers a resend with the task it created.
	OpCreateTask Op = 65
	OpQueryTask  Op = 66
	// Memory and model calls (issue 13): models are registered on the leader; Memory asks a
	// master for the memory report, WorkerMemory a worker for its breakdown.
	OpModelAdd     Op = 70
	OpModelRemove  Op = 71
	OpMemory       Op = 72
	OpWorkerMemory Op = 73
	// C library calls (90-99). ShmTouch tells a worker that a client on its host copied
	// objects out of its shared arena without pinning them (client/shm.go), so its
	// eviction order sees those reads. Safe to resend: a touch twice is a read twice.
	OpShmTouch Op = 90
	// Same-host puts (100-109): a client on the worker's host writes through a staging area
	// the worker maps and copies from (messages_shmput.go). ShmPutOpen is not idempotent: a
	// resend could open a second area (it ends with its connection).
	OpShmPutOpen  Op = 100
	OpShmPutWrite Op = 101
	OpShmPutClose Op = 102
	// Tiering calls (110-119). Prefetch asks a worker to promote objects from NVMe to DRAM in
	// the background (messages_prefetch.go). Safe to resend: a second promotion of an object
	// already in DRAM does nothing.
	OpPrefetch Op = 110
	// Put sessions (120-129, messages_session.go). SessionCommit is safe to resend: a version
	// already committed answers its checksum again.
	OpSessionCommit Op = 120
	// Tenants (130-139, messages_tenants.go), calls to the leader. TenantQuotaSet is safe to
	// resend; TenantRemove is not (a resend counts nothing the second time).
	OpTenantRemove   Op = 130
	OpTenantQuotaSet Op = 131
	OpTenantList     Op = 132
)

type opInfo struct {
	name        string
	idempotent  bool // safe to resend after a broken connection
	reqPayload  bool // requests carry a payload
	respPayload bool // OK responses carry a payload
}

var ops = [256]opInfo{
	OpPing:           {name: "Ping", idempotent: true},
	OpPutStart:       {name: "PutStart"},
	OpPutEnd:         {name: "PutEnd"},
	OpPutRevoke:      {name: "PutRevoke"},
	OpLookup:         {name: "Lookup", idempotent: true},
	OpExists:         {name: "Exists", idempotent: true},
	OpRemove:         {name: "Remove"},
	OpRemoveByRegex:  {name: "RemoveByRegex"},
	OpRemoveAll:      {name: "RemoveAll"},
	OpBatchPutStart:  {name: "BatchPutStart"},
	OpBatchPutEnd:    {name: "BatchPutEnd"},
	OpBatchLookup:    {name: "BatchLookup", idempotent: true},
	OpBatchExists:    {name: "BatchExists", idempotent: true},
	OpBatchRemove:    {name: "BatchRemove"},
	OpList:           {name: "List", idempotent: true},
	OpRegisterWorker: {name: "RegisterWorker"},
	OpHeartbeat:      {name: "Heartbeat"},
	OpStatus:         {name: "Status", idempotent: true},
	OpBatchPutRevoke: {name: "BatchPutRevoke"},
	OpRegisterMaster: {name: "RegisterMaster", idempotent: true},
	OpAddMaster:      {name: "AddMaster"},
	OpRemoveMaster:   {name: "RemoveMaster"},
	OpWrite:          {name: "Write", reqPayload: true},
	OpCommit:         {name: "Commit"},
	OpRead:           {name: "Read", idempotent: true, respPayload: true},
	OpReadRange:      {name: "ReadRange", idempotent: true, respPayload: true},
	OpDrop:           {name: "Drop"},
	OpShmOpen:        {name: "ShmOpen", idempotent: true},
	OpShmPin:         {name: "ShmPin"},
	OpShmRelease:     {name: "ShmRelease", idempotent: true},
	OpReplicate:      {name: "Replicate", idempotent: true},
	OpDrainWorker:    {name: "DrainWorker", idempotent: true},
	OpRetireWorker:   {name: "RetireWorker"},
	OpLeaveWorker:    {name: "LeaveWorker", idempotent: true},
	OpAttachWorker:   {name: "AttachWorker"},
	OpCreateTask:     {name: "CreateTask", idempotent: true},
	OpQueryTask:      {name: "QueryTask", idempotent: true},
	OpModelAdd:       {name: "ModelAdd", idempotent: true},
	OpModelRemove:    {name: "ModelRemove"},
	OpMemory:         {name: "Memory", idempotent: true},
	OpWorkerMemory:   {name: "WorkerMemory", idempotent: true},
	OpShmTouch:       {name: "ShmTouch", idempotent: true},
	OpShmPutOpen:     {name: "ShmPutOpen"},
	OpShmPutWrite:    {name: "ShmPutWrite"},
	OpShmPutClose:    {name: "ShmPutClose", idempotent: true},
	OpPrefetch:       {name: "Prefetch", idempotent: true},
	OpSessionCommit:  {name: "SessionCommit", idempotent: true},
	// KV sessions (messages_kvsession.go).
	OpKVSessionPin:    {name: "KVSessionPin", idempotent: true},
	OpKVSessionUnpin:  {name: "KVSessionUnpin", idempotent: true},
	OpKVSessionUpdate: {name: "KVSessionUpdate", idempotent: true},
	OpKVSessionGet:    {name: "KVSessionGet", idempotent: true},
	OpKVSessionList:   {name: "KVSessionList", idempotent: true},
	OpKVSessionAttach: {name: "KVSessionAttach", idempotent: true},
	OpKVSessionPins:   {name: "KVSessionPins", idempotent: true},
	OpTenantRemove:    {name: "TenantRemove"},
	OpTenantQuotaSet:  {name: "TenantQuotaSet", idempotent: true},
	OpTenantList:      {name: "TenantList", idempotent: true},
}

// Known reports whether this build defines op.
func (op Op) Known() bool { return ops[op].name != "" }

// String returns the call's name ("Lookup"), or "OP_<n>".
func (op Op) String() string {
	if n := ops[op].name; n != "" {
		return n
	}
	return "OP_" + strconv.Itoa(int(op))
}

// Idempotent reports whether a request with op may be resent after a broken connection
// without changing the outcome (reads, lookups, exists, list, status, ping).
func (op Op) Idempotent() bool { return ops[op].idempotent }

// RequestPayload reports whether requests with op carry a payload (Write).
func (op Op) RequestPayload() bool { return ops[op].reqPayload }

// ResponsePayload reports whether OK responses to op carry a payload (Read, ReadRange).
func (op Op) ResponsePayload() bool { return ops[op].respPayload }
