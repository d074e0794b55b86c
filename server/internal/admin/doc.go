// Package admin is the plumbing both services run on their metrics port, below the master
// and the worker: the admin HTTP server (Start: /metrics, /health, /health/live,
// /health/ready, /api/v1/status, /debug/pprof/ and, on masters, the dashboard page), the JSON
// and text writers of its endpoints, and the metric helpers every server uses (a fresh
// registry with the runtime collectors, OpCounter, the request latency buckets, the
// process's RSS).
//
// It owns the admin server's listener and its one serving goroutine (docs/threads.md:
// "admin HTTP"). It must never import server/master, server/worker or package server (it
// lies below them all; internal/repotest checks it), nor any other package of the module:
// what an endpoint serves comes in through Handlers.
package admin
