// Package worker is the worker service: the data server (workerHandler is a transfer
// Handler) over a tier.Engine with its DRAM arena and NVMe store, the assembly of writes
// (pending objects, striped chunks, commit), shared-memory leases and same-host puts, the
// control loop (registration in pages, heartbeats, drops, the attached connection), its
// metrics and its own memory breakdown. Config is its configuration, with documented
// defaults.
//
// It must never import server/master (directly or not: internal/repotest checks it), client
// or cmd; what it shares with the master lies below both (server/internal/admin,
// server/rpcsrv, server/memory). The cluster tests are tests of package server and reach in
// through TestHooks and Config.Test only.
//
// # Worker
//
// A worker serves Write straight into a tier.Writer's arena range, Commit, Read/ReadRange from
// a pinned tier.Reader (released by the transfer server after the send) and Drop. It heartbeats
// the leader every second and applies the drops of the replies, and holds an AttachWorker call
// open to it on a connection of its own, whose close tells the leader the process is gone
// (worker_leave.go); an Ephemeral worker unmounts (LeaveWorker) at Shutdown; writes never committed are
// dropped after PendingWriteTimeout. Its id is Config.WorkerID, else one derived from its
// address and persisted under root_fs_dir, so a restart finds its NVMe directory again.
package worker
