// Package transfer moves bytes and control messages between clients, masters and workers: one
// framed, versioned binary protocol (docs/protocol.md) over TCP, with pipelining, connection
// pools, striping of large objects, and a Transport interface behind which shared memory, RDMA
// and NVMe-oF will sit (NewTransport returns base.ErrNotSupported for them in this build).
//
// # What it owns
//
//   - Server: serves a Handler (the master and worker services implement it). Write payloads
//     are read from the socket straight into the destination the handler returns (an arena
//     range); Read payloads are written from the handler's pinned source with one vectored
//     write, or, with ServerOptions.SendfileReads, for a client that verifies the object
//     checksum (ReadRequest.Verifies), by reference with sendfile from the source's file
//     (ReadSource.File: the worker's arena memfd). By reference, the socket keeps referring
//     to the pages after the send and the Release, so bytes rewritten there before the client
//     reads them reach it: only a verifying client, which rereads by copy on a mismatch, may
//     be sent a payload that way (docs/protocol.md, "Reads sent by reference"). No
//     whole-object buffer exists anywhere.
//     Connections that do nothing are closed (server_limits.go): idle ones, frames that stop
//     making progress, and connections past a per-IP cap, counted by reason in Stats.
//   - Client: ConnsPerPeer connections per peer address, requests pipelined on each (matched
//     by request id), deadlines from context.Context, reconnection, retries of idempotent calls
//     only, striping of payloads over StripeThreshold into chunks sent in parallel.
//   - SharedArena (MapSharedArena): a client's read-only mapping of a worker's shared DRAM
//     arena on the same host, checked against the worker's ShmOpen answer (boot id, inode,
//     device, size) before it is mapped, and unmapped only after its last reader released it.
//     The calls that pin and release ranges of it are ordinary worker calls (ShmPin,
//     ShmRelease); the bytes never cross a socket.
//   - StagingArea: the other direction, for same-host puts. A worker creates a memfd
//     (NewStagingArea) for one client, which maps it read-write (MapStagingArea, with the
//     same checks), copies a value into it and asks the worker (ShmPutWrite) to copy it
//     into the object's arena range: the arena stays read-only to clients.
//   - The message types of every call (defined in transfer/internal/wire, aliased here).
//
// # Goroutines
//
// Server: one accept loop per listener (Serve, or Start's goroutine); per connection one read
// loop (handshake, then headers, bodies, and Write payloads in stream order, so a Write
// payload is read by the read loop itself), and one goroutine per request being handled
// (bounded by ServerOptions.MaxInFlightPerConn), which writes its response under the
// connection's frameWriter lock. Shutdown stops the read loops at frame boundaries and waits
// for the handler goroutines.
//
// Client: per connection one read loop (readLoop) that matches responses to calls and reads
// Read payloads into the caller's buffer; callers write their own frames under the
// connection's frameWriter lock. Striped transfers run up to ConnsPerPeer goroutines for the
// duration of the call. Close stops every read loop.
//
// # Ownership
//
// A WriteSink's Dst is written by the Server only until it calls Done (exactly once; with an
// error when the transfer broke, in which case the handler must discard the destination).
// A ReadSource's Data and File are used until the Server calls Release (exactly once); a
// payload sent by reference is still read by the kernel from File's pages after that. A
// Client caller's src (Write) is only read, and its dst (Read) only written, until the call
// returns, also when it returns early on a deadline (the connection is broken to make sure).
//
// It must never import dram, nvme, tier, raftmeta, server, client or cmd; only internal/.
package transfer
