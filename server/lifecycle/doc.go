// Package lifecycle is the master leader's soft state about workers as a pure state machine,
// as tier/policy is for the worker: worker lifecycle and liveness, usage, reservations and
// placement of puts (reservations.go, placement.go), paged registration sessions
// (sessions.go), drops owed to workers, re-registration requests, and the repair and drain
// queue (repair.go). It does no I/O, starts no goroutines and reads no clock: every event
// carries now (and placement its rng). Every event whose outcome needs the driver to act
// returns it as effects, values of a closed set (effects.go): raft commands to propose,
// copies to order, a heartbeat's answer (drops owed, re-register), a repair scan to run, and
// reports for the log and the metrics. The server's Master feeds it events under its own
// lock and executes the effects outside it; it decides nothing the machine could. Tested
// from the scripts in testdata/ (TestMachine), which print every event's effects, and a
// model test (TestModel), which checks invariants over them.
//
// # Worker states
//
// Transitions (event -> new state); every state but dead, registering, returning and left
// moves to dead on a tick past its deadline:
//
//	(unknown)    --register begins------------------> registering
//	registering  --registered-----------------------> alive | draining
//	registering  --the registration did not commit--> (unknown)
//	alive        --silent past 2/3 of the deadline--> suspect
//	suspect      --heartbeat------------------------> alive
//	alive        --heartbeat(leaving)---------------> leaving   (deadline: the restart grace)
//	alive        --SetWorkerDraining committed------> draining  (cancel: back to alive)
//	any live     --tick past the deadline-----------> dead      (MarkWorkerLost proposed)
//	dead         --proposal failed------------------> alive     (retried next tick)
//	dead         --register begins------------------> returning
//	returning    --registered (lost replicas re-adopted)-> alive | draining
//	returning    --the registration did not commit--> dead
//	leaving      --registered-----------------------> alive | draining
//	dead         --UnregisterWorker committed-------> retired   (forgotten)
//	alive|suspect|draining --Detach (connection broke)-> unreachable (deadline: ConnGrace)
//	unreachable  --Attach (a new connection)--------> alive | draining
//	unreachable  --tick past the deadline-----------> dead      (MarkWorkerLost proposed)
//	any          --Leave----------------------------> left      (LeaveWorker proposed)
//	left         --LeaveWorker not committed--------> its live state
//	left         --LeaveWorker committed, no keep---> (forgotten: no NVMe tier)
//	left         --register begins------------------> returning (its replicas re-adopted)
//	left         --UnregisterWorker committed-------> retired   (forgotten)
//
// Placements go to alive and suspect workers only. A worker that leaves on purpose (Leave:
// an embedded worker's close, Mooncake's UnmountSegment) is never dead: it is left, with no
// deadline, at once; its LeaveWorker commits before the driver answers, so objects held only
// there are gone from the metadata when the worker's close returns (leave.go). A worker whose
// connection to the leader breaks (Detach, with the connection's token from Attach) is
// unreachable at once and dead ConnGrace later unless it attaches again; ClientTTL still
// bounds a worker that hangs with its connection open.
//
// A worker is dead once MarkWorkerLost commits (proposed on a tick past its deadline: the
// last message plus ClientTTL, or the leaving announcement plus RestartGrace when later). Its
// replicas become lost replicas in raftmeta; they are re-adopted when it returns.
//
// # Repair and drain
//
// Plan takes the objects the driver found below their replica count (a live replica plus
// lost ones) or with a replica on a draining worker, and queues one task per object (at most
// MaxQueued; the driver rescans to refill). Tick hands out copy orders, worker to worker: at
// most Concurrency in flight and RepairBytesPerSec on average (a token bucket on the clock
// passed in), so repair never takes more than its share from foreground puts and gets. The
// target is the alive, non-draining worker with the most free bytes that holds no copy. A
// finished copy becomes a MoveReplicas proposal (To replaces From); when it commits a drained
// worker is owed a drop of its copy, and when it fails the target is owed a drop of the copy
// it received. Surplus replicas of a returning worker are trimmed by raftmeta itself: a
// repaired object's lost replica is consumed, so the returning copy is not re-adopted.
//
// # Copy and move tasks
//
// CreateTask (tasks.go: Mooncake's create_copy_task and create_move_task) puts explicit
// orders on the same queue, under the same bounds: one per target, never two of one key in
// flight (a repair scan skips a key a task has queued). A copy task's finished copy becomes
// an AddReplicas (one more replica); a move task's a MoveReplicas from its source, which is
// then owed a drop, as a drained worker is. Task states (pending, processing, success,
// failed with the first error) are soft state of the leadership, kept for Task (query_task)
// up to RepairConfig.MaxTasks, the oldest finished forgotten first; a new leader knows none.
// A task ends once, reported by a TaskEnded effect (for the log and the metrics). The driver
// names each task with the id its client chose, and asks TaskResent before CreateTask: a
// held task of that id, type and key is the client's resend of CreateTask, answered as it is.
//
// It must never import anything but internal/ and raftmeta (for the command types).
package lifecycle
