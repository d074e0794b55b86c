// Package master is the master service: a raftmeta.Node plus the leader's soft state, its
// RPC handlers (masterHandler is a transfer Handler), placement, registration and
// reconciliation, repair and drain, the membership calls, Mooncake's KV event publisher
// (kvevents.go), the master's metrics and "Master Metrics:" line, its admin endpoints
// (Mooncake's master_admin_service shapes, drain jobs, the dashboard) and the master's part of
// the memory report (gathering each worker's breakdown; server/memory does the arithmetic).
// Config is its configuration, with documented defaults.
//
// It must never import server/worker (directly or not: internal/repotest checks it), client
// or cmd. What it shares with the worker lies below both: server/internal/admin (admin HTTP,
// metric helpers), server/rpcsrv (the RPC server, connection limits, the defaults both sides
// agree on) and server/memory (the memory report's vocabulary). The cluster tests, which
// need masters and workers together, are tests of package server and reach in through
// TestHooks and Config.Test only. Its goroutines are listed in docs/threads.md, its metrics
// in docs/metrics.md.
//
// # Master
//
// A master is a raftmeta.Node plus the leader's soft state, which is never committed and is
// a pure state machine of its own, package server/lifecycle: worker lifecycle and liveness
// (heartbeats; a worker whose final heartbeat announced a graceful shutdown gets
// WorkerRestartGrace instead of ClientTTL before it is marked dead; one whose attached
// connection closed gets no puts at once and ClientDisconnectGrace; one that left on purpose
// is never dead), reservations (puts
// between PutStart and PutEnd) and placement, paged registration sessions, the drop lists
// owed to workers (sent in heartbeat replies) and the repair and drain queue. The Master
// drives it: it feeds it events under Master.mu and executes the effects they return (raft
// proposals, worker-to-worker copies, heartbeat answers, reports for the log and metrics). The files follow the concerns: master.go (the driver's life:
// start, leader loop, shutdown), master_put.go and master_read.go (puts, reads, removes),
// master_register.go (registration, reconciliation, heartbeats), master_lifecycle.go
// (the effects' executor, repair, drain, retire), master_leave.go (LeaveWorker, AttachWorker), master_members.go (masters), master_status.go,
// and master_calls.go, the one table of RPC handlers that gives every call the same batch
// limit, timeout, metrics and error mapping. Only conclusions are committed: PutEnd (one raft
// entry per call or batch), Remove*, RegisterWorker, DropReplicas, RegisterMaster,
// MarkWorkerLost (a dead worker's replicas become lost replicas, re-adopted with
// AdoptReplicas when it returns), MoveReplicas (repair and drain copies, move tasks),
// AddReplicas (copy tasks, master_tasks.go), SetWorkerDraining,
// UnregisterWorker (retire) and LeaveWorker (an unmount: committed before the worker's
// LeaveWorker call is answered). Followers answer writes with NOT_LEADER naming the leader's id and RPC
// address; Lookup and Exists are linearizable on the leader (VerifyLeader) and served from a
// follower's state only when the request allows staleness. List has no such flag: any master
// serves it from its own state. A follower also registers its own RPC address with the leader
// (the RegisterMaster call, once per leader-loop tick until the masters table replicated to it
// holds that address), so every master is listed in status without --peer_rpc_addresses even
// if it never led. The leader also serves the operator's membership calls, AddMaster and
// RemoveMaster (master_members.go: validation, the checks around raftmeta's AddVoter and
// RemoveServer, a leadership transfer before removing itself); a master started with
// Config.Join bootstraps nothing and waits to be added.
//
// # Placement
//
// PutStart picks replica_num distinct active workers whose DRAM segment can hold the value,
// weighted by free bytes (last heartbeat minus reservations) with randomness, the preferred
// worker first when it is eligible (a hint, never an error). Asking for more replicas than
// there are eligible workers is an error wrapping base.ErrNoSpace ("asked for 3 replicas, only
// 2 workers ..."), never a partial placement: an acknowledged put always has the replicas it
// asked for. A value larger than every segment is also an error wrapping base.ErrNoSpace; a
// value over MaxValueSize wraps base.ErrTooLarge.
//
// # Reconciliation at registration
//
// A worker registers with its inventory (everything committed in DRAM and on NVMe, which
// survives restarts under root_fs_dir/<cluster_id>/<worker_id>). The master's raft state is the
// source of truth: replicas the worker reports and the metadata lists stay; replicas the
// metadata lists that the worker lacks are dropped (DropReplicas; objects left with none are
// removed); objects the worker holds that the metadata lists as lost replicas of this worker at
// the same version are re-adopted (AdoptReplicas); other objects it holds that the metadata
// does not list on it are dropped by the worker (never adopted: the key may have been removed
// or overwritten while the worker was away). Both
// directions guard against puts racing with the inventory snapshot (see registerWorker). An
// inventory larger than one page (65,536 objects or 16 MiB of entries) goes in pages of one
// session, in order, to one master (Worker.register, sendPages); the leader accumulates them
// as soft state, bounded and expiring, and reconciles at the final page (registerPage). Any
// failure restarts the attempt from page 0 with a new session.
package master
