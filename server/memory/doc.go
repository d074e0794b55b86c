// Package memory is the memory report's vocabulary and arithmetic (issue 13;
// docs/memory.md), below the master and the worker: WorkerMemory, a worker's breakdown (the
// WorkerMemory call's answer and its /api/v1/memory); ModelMemory and MemoryReport, the
// master's report, with the causes of the difference between expected and actual bytes; and
// BuildReport and Judge, pure functions over those. The master gathers the inputs
// (server/master memory_master.go), the worker answers with its own breakdown
// (server/worker memory_worker.go); cmd and the client tests read the JSON with these types.
//
// It does no I/O. It must never import server/master, server/worker or package server
// (internal/repotest checks it), nor client or cmd.
package memory
