// Package server is the composition root: the master service (over raftmeta), the worker
// service (over tier), placement, heartbeats, and the admin HTTP endpoints (/metrics, /health,
// /api/v1/status). It wires implementations into the interfaces the other packages declare.
//
// Only cmd/ parses flags; server takes a Config. It must never import client or cmd.
package server
