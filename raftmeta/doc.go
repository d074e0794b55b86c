// Package raftmeta is the masters' replicated metadata: a state machine (FSM) of objects,
// their replicas, workers (segments) and master addresses, replicated by hashicorp/raft with
// raft-boltdb/v2 as log and stable store, file snapshots and a TCP transport, all under
// Config.DataDir. It also handles membership (bootstrap from a static peer list, AddVoter,
// RemoveServer) and hands out object versions (NewVersion).
//
// The server (package server) owns everything else: placement, worker liveness and capacity
// (leader soft state), pending puts. Only conclusions are commands here: a PutEnd makes an
// object visible, MarkWorkerLost and DropReplicas record that replicas are gone (lost ones
// are kept for the worker's return: "Lost replicas" below).
//
// It must never import dram, nvme, tier, transfer, server, client or cmd; only internal/.
//
// # Writes and reads
//
// Writes go through Node.Apply on the leader. A follower does not forward: it answers with a
// *NotLeaderError (wrapping base.ErrNotLeader) naming the leader's id and client RPC address,
// so a client goes straight to the leader next time and no master relays bulk write traffic.
// Reads (Lookup, Range, List, Segments, Masters, Stats) read the local FSM. For a
// linearizable read call VerifyLeader first (a quorum round trip, plus once per term a barrier
// so a new leader's FSM holds every earlier committed entry); a stale read on a follower needs
// nothing, and WaitApplied(Result.Index) gives a follower read-your-writes.
//
// Raft's own logs (hclog) go to the injected slog logger through an adapter, levels kept.
// docs/raftmeta.md has the operator's view: data directory, defaults, benchmarks.
//
// # Master addresses
//
// Any master must be able to tell a client where the leader is, so client RPC addresses live
// in the FSM (RegisterMaster). Each node, whenever it wins an election, proposes
// RegisterMaster for itself (Config.RPCAddr) and for every bootstrap peer (Config.Peers, or
// what Bootstrap was given) that carries an RPCAddr and is still a member, each unless the
// table already has that address; RemoveServer also removes the entry.
// (The server's followers also ask the leader to propose RegisterMaster for them, so the table
// lists every master without Peers carrying RPC addresses.)
// A follower therefore knows the leader's address once that leader's registration (or an
// earlier one, from a previous term) has replicated to it; until then NotLeaderError has the
// leader id with an empty address and the client tries another master. A new leader runs a
// barrier, then registers, then signals LeaderCh, so its FSM is current by the registration
// and the server's first reads as leader see the registered addresses.
//
// # Apply duties
//
// Apply runs on raft's FSM goroutine, one committed batch at a time (ApplyBatch), holding the
// FSM's write lock for the batch. For each entry it must:
//
//  1. Decode the entry with DecodeCommand. An entry that does not decode yields a Result
//     whose Err wraps base.ErrInternal, and changes nothing, on every node alike.
//  2. Apply the command using only the command and the current state: no clock (timestamps
//     such as Created come inside the command from the proposer), no randomness, no I/O, no
//     dependence on map iteration order. Every node then reaches the same state.
//  3. Re-check what the state relies on (key and size bounds, replica ids, registered
//     workers) rather than trust the proposer's Validate, and refuse per item with a typed
//     error (base.ErrObjectAlreadyExists, base.ErrObjectNotFound, base.ErrSegmentNotFound,
//     base.ErrInvalidParams) instead of failing the entry.
//  4. Keep the derived counters (Stats, per-segment Objects and Bytes) exact, and keep the
//     record invariants (an object has at least one replica, on a registered worker, each
//     listed once): an object whose last replica is dropped is removed in the same entry.
//  5. Never modify a replica string in place (build a new one): a snapshot being written
//     shares them.
//  6. Advance the applied index and wake WaitApplied callers.
//
// # Snapshot duties
//
//  1. Snapshot (on the FSM goroutine, so no apply runs) clones the state: a copy of the
//     objects map (key -> record index), of the record chunks and of the segment table; keys
//     and replica strings are immutable and shared. For 1M objects this is tens of
//     milliseconds during which apply waits (BenchmarkSnapshot1M reports it as clone-ms), and
//     the copy doubles the FSM's memory until Persist finishes.
//  2. Persist streams the clone to raft's sink while apply goes on, in the format below, and
//     cancels the sink on any error so a partial snapshot is never used.
//  3. Restore decodes a whole stream into a new state, checks every invariant a state built by
//     apply has (unique keys and workers, replicas naming registered workers, bounds), verifies
//     the checksum trailer, and only then swaps it in: a bad snapshot leaves the FSM as it was.
//  4. Log compaction follows Config.SnapshotThreshold, SnapshotInterval and TrailingLogs.
//
// # Command format
//
// A command is one raft log entry:
//
//	| version (1B) = 1 | type (1B) | fields |
//
// Integers are varints (sizes, times: zig-zag signed; versions, counts: unsigned), checksums
// 8 bytes little-endian, bools one byte (0 or 1), strings a uvarint length then the bytes.
// Fields by type:
//
//	1 PutEnd           upsert bool, now varint, n uvarint, n × (key, size varint,
//	                   version uvarint, checksum u64, soft_pin_until varint, hard_pin bool,
//	                   r uvarint, r × worker_id)
//	2 Remove           n uvarint, n × key
//	3 RemoveRegex      pattern
//	4 RemoveAll        (none)
//	5 RegisterWorker   worker_id, address, dram_capacity varint, nvme_capacity varint
//	6 UnregisterWorker worker_id
//	7 DropReplicas     worker_id, n uvarint, n × (key, version uvarint)
//	8 MarkWorkerDead   worker_id
//	9 SetPin           key, version uvarint, soft_pin_until varint, hard_pin bool
//	10 RegisterMaster  master_id, rpc_addr (empty: remove)
//	20 MarkWorkerLost  worker_id, now varint
//	21 AdoptReplicas   worker_id, n uvarint, n × (key, version uvarint)
//	22 MoveReplicas    n uvarint, n × (key, version uvarint, from worker_id, to worker_id)
//	23 SetWorkerDraining worker_id, draining bool
//	24 LeaveWorker     worker_id, keep bool, now varint
//	25 AddReplicas     worker_id, n uvarint, n × (key, version uvarint)
//	26 SetTenantQuota  tenant, dram_bytes varint, nvme_bytes varint [default bool, only when true] (tenants.go)
//	28 RemoveTenant    tenant, pattern, all bool
//	30 RegisterModel   name, bytes_per_token varint, description
//	31 RemoveModel     name
//	27 KVSession       op 1B (1 attach, 2 detach, 3 pin, 4 unpin), session_id, n uvarint, n × key (kvsession.go)
//
// PutEnd may end with a tokens section (models.go), present only when an item carries a token
// count or a model: m uvarint (>= 1), m × (item index uvarint, strictly increasing, tokens
// uvarint, model string).
//
// Decoders check every length against its bound (keys base.MaxKeyLen, worker ids
// base.MaxWorkerIDLen, batches MaxBatch, replicas MaxReplicas) and against the bytes left
// before allocating, reject trailing bytes, and are fuzzed (FuzzDecodeCommand).
//
// # Snapshot format
//
//	| magic "MCRMSNAP" (8B) | version (1B) = 1 | applied_index uvarint |
//	| masters: n uvarint, n × (master_id, rpc_addr) |
//	| segments: n uvarint, n × (slot u16, worker_id, address, dram varint, nvme varint, state 1B) |
//	| objects: n uvarint, n × (key, size_flags uvarint, version uvarint, checksum u64,
//	|          created varint, soft_pin_until varint, r uvarint, r × slot u16) |
//	| trailing sections, each | id (1B) | version (1B) | body |: 20 lifecycle (always
//	|   written), 30 models (models.go: only when a model is registered or an object
//	|   carries tokens), 40 events (kvevents.go: the KV event sequence, when above 0),
//	|   27 KV sessions (kvsession.go: only when a session exists), |
//	|   50 tenants (tenants.go: the tenant quotas and the default quota, when set) |
//	| checksum u64: HighwayHash-64 (base.Checksum) of every byte before it |
//
// Trailing sections (one function each, so branches adding one merge easily): tag 20, the
// lifecycle section (snapshot_lifecycle.go): segments' DeadSince and draining flag, and every
// key's lost replicas. A snapshot without a section restores as if it were empty; an unknown
// tag is corruption. An object with r = 0 in the objects section is invisible and must have
// lost replicas in the lifecycle section.
//
// Slots are the small integers objects use to name workers (below); size_flags is the size
// with the hard pin in bit 63. Sections hold no order; restore rebuilds the counters.
//
// # Lost replicas
//
// When the leader declares a worker dead it commits MarkWorkerLost, which forgets nothing:
// each live replica on the worker becomes a lost replica of its object (a side table, key ->
// packed slots, 2 bytes per lost replica plus one map entry per key), and an object left with
// no live replica becomes invisible (Lookup, List, Stats.Keys leave it out; LookupAny and
// Range include it). A returning worker's verified inventory is re-adopted with AdoptReplicas,
// which needs the exact version and a lost replica naming the worker: a removed key has no
// record and an overwritten one another version, so neither comes back; an object repaired
// onto another worker meanwhile (MoveReplicas consumed the lost replica) is not re-adopted
// either, which trims the surplus. The bound: a lost replica is a replica the worker held when
// it died, and nothing is placed on a dead worker, so what the FSM keeps for dead workers
// never exceeds what it held for them alive; it goes when the worker returns, when its objects
// are removed or overwritten, or when the worker is retired (UnregisterWorker).
//
// A worker that leaves on purpose (LeaveWorker: an embedded worker's close, Mooncake's
// UnmountSegment) is never dead. Without Keep it is forgotten at once, as UnregisterWorker
// forgets it; with Keep (its objects persist under root_fs_dir) its replicas become lost
// replicas and its segment SegmentLeft, with the same bound and the same ways out.
//
// # Memory
//
// An object costs a 24-byte map slot (key string header + uint32 record index), a 64-byte
// record in a chunked table (size with the hard pin flag in bit 63, version, checksum,
// created, soft pin deadline, a string of packed uint16 worker slots, and the KV-cache token
// count and model index of models.go), the key bytes, and
// 4 bytes per replica. Go's map keeps 1.1x to 2.3x slots per live entry (Swiss-table groups,
// tables split when 7/8 full), which is why the records live outside it. Worker ids are
// interned: each registered worker gets the lowest free slot (1..65535), so slots depend only
// on the applied commands, and snapshots carry them verbatim.
//
// BenchmarkMemoryPerObject (1,000,000 objects, 64-byte keys, 2 replicas, HeapAlloc after GC)
// measured 180 bytes per object, 116 beyond the key, against 248 for a plain
// map[string]*Object of the same data (ratio 0.73), measured before the token fields added 8
// bytes to the record. Records were 56 bytes inline in the map
// before (171 beyond the key at the same point).
//
// # Versions
//
// NewVersion returns term<<40 | counter, the counter starting at 1 in each term on the leader
// (leader soft state, never in the FSM). Raft has at most one leader per term and terms never
// repeat, so versions never repeat across failovers or restarts, and they grow over time.
package raftmeta
