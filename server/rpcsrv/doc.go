// Package rpcsrv is what the master's and the worker's RPC servers share, below both: Server
// (a transfer.Server on a listener its service opened, and its accept goroutine),
// ConnLimits (the idle, frame and per-peer bounds both servers take, and the flags'
// validation), the connection counters' collector, address validation, and the defaults the
// two sides of the master-worker protocol must agree on (heartbeat interval, put timeout,
// registration call bound, protocol).
//
// cmd names ConnLimits in its settings, so the package is not internal. It must never import
// server/master, server/worker or package server (internal/repotest checks it), nor client
// or cmd.
package rpcsrv
