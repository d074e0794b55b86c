// Package server is the composition root: it builds the services one process runs, a
// master (package server/master), a worker (package server/worker) or both, with Start, and
// waits for their readiness one way (Servers.WaitReady: the worker registered with a leader).
// `mooncake master|worker|standalone`, the C library's embedded worker and the tests all
// build servers through it; Standalone is a master and a worker in one process with
// defaults for tests and tools.
//
// The map below server/: master and worker never import each other; what both need lies
// below both, in server/internal/admin (the admin HTTP server, probes, pprof, the dashboard,
// metric helpers), server/rpcsrv (the RPC accept loop, connection limits, the protocol
// defaults both sides agree on) and server/memory (the memory report's vocabulary and
// arithmetic); server/lifecycle is the master leader's pure state machine. internal/repotest
// enforces these arrows.
//
// Its tests are the cluster tests: real masters (raft clusters of three on 127.0.0.1) and
// real workers together, reaching into either only through master.TestHooks,
// worker.TestHooks and the Config.Test knobs. It must never import client or cmd.
package server
