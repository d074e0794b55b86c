// Package client is the Go API applications use to store and fetch objects: it asks a master
// where an object lives, then moves the bytes straight to and from workers over package
// transfer. It is the one package of this module with a stable public API.
//
// # Calls
//
//   - Connect(ctx, Config) reaches one of the configured masters (each within
//     Config.DialTimeout; none reachable: an error wrapping base.ErrUnavailable).
//   - Put: PutStart at the leader (placement and a fresh version), the bytes to every replica's
//     worker in parallel (the transfer client stripes large values over several connections),
//     then PutEnd (one raft commit). Any failure before PutEnd commits revokes the put: nothing
//     half-written becomes visible. PutFrom reads an io.Reader after placement. Concurrent
//     puts share their master calls (group commit, coalesce.go): a PutStart or PutEnd made
//     while another is in flight waits for it and leaves with the others that queued
//     meanwhile as one BatchPutStart or BatchPutEnd (one raft entry); with nothing in flight
//     a call leaves at once, alone. Each put still returns only after its own commit.
//     A write to a placed worker that fails in a way another worker would not repeat
//     (refused, reset, no answer within half the time left, the worker shutting down or
//     full) revokes the put and places it again without that worker (PutStart's Exclude;
//     replace.go), until it succeeds, the deadline passes, or the leader has no worker with
//     room left (base.ErrNoSpace naming the excluded ones). Put, PutFrom, upserts, BatchPut
//     and same-host puts alike.
//   - Get/GetInto: Lookup at the leader (linearizable), then a read from the best replica
//     (orderReplicas: a worker on this host first, known by the kernel boot id its ShmOpen
//     answer carries, else by a loopback or local interface address; then the one with the
//     fewest reads in flight from this client; ties at random), verifying the object's HighwayHash checksum (hashed as
//     the bytes arrive, transfer.Client.ReadSum); any error or mismatch fails over to the next
//     replica, each within its share of the time left; when every replica's worker is
//     unreachable (or no longer holds it) the get fails with base.ErrObjectNotFound. A worker
//     checks the version it is asked for, so a stale lookup can only miss
//     (and is retried once), never return wrong bytes. Lookups are cached for
//     Config.LookupCacheTTL (1s): a hot get skips the master, and a cached lookup that misses
//     is dropped and replaced by a fresh one. This client's own puts seed their committed
//     placements and its removes drop their keys; Exists and BatchExists ask for placements
//     and cache them, so the get after an exists skips the master too; batch gets look up
//     only the keys without an entry. Another client's change is seen within the TTL (see
//     Config.LookupCacheTTL).
//     A replica on a worker of this host is read through shared memory (shm.go): the client
//     maps the worker's arena read-only once (ShmOpen), then per get asks the worker to pin
//     the object (ShmPin), copies and hashes it, and releases the pin (ShmRelease: batched in
//     the background when the checksum is verified, since the checksum proves the copy; waited
//     for when it is not, since then only the worker's word proves the pin held). A worker it
//     cannot map (another host, another uid, a private arena) is read over TCP, and
//     ReadStats counts both paths. Config.DisableSharedMemory turns the path off.
//   - Same-host puts (shmput.go): a replica on a worker of this host is written through a
//     staging area that worker created for this client (ShmPutOpen) and mapped into both:
//     the client copies the value into a free 4 MiB slot (a larger value streams through
//     slots) and the worker copies it into the object's arena range (ShmPutWrite), verifying
//     the checksum as for a Write. Anything that fails before the worker took the bytes (no
//     area, the area gone, staged bytes spoiled) is written over TCP; WriteStats counts the
//     paths. Config.DisableSharedMemory turns this off too.
//   - Exists, Size, Remove, RemoveByRegex, RemoveAll, List, Status, MasterStatus and the
//     batch forms BatchPut (one raft commit for the batch), BatchGet, BatchExists, BatchRemove.
//   - ExistsWith and BatchExistsWith with ExistOptions.PrefetchToMemory (Mooncake's is_exist
//     with ExistOptions): answered from a lookup, then one Prefetch call per worker holding the
//     objects found, which promotes them from NVMe to DRAM in the background (prefetch.go).
//   - Put and get sessions (session.go, session_get.go; Mooncake's layer-wise ranged calls):
//     PutSessionStart places objects, PutSessionWrite writes their byte ranges straight into
//     the placed workers' pending objects (uncommitted Writes at offsets), PutSessionEnd has
//     each worker commit and report the checksum of what landed (SessionCommit) and commits
//     the keys in one BatchPutEnd; PutSessionRevoke (and Close) drop them on the leader and
//     the workers. GetSessionStart caches one lookup per key; GetSessionRead reads ranges
//     with it (ReadRange, the worker checks the version). Sessions are this client's state.
//   - KV sessions (kvsession.go; Mooncake's pin_kv_session ... attach_kv_session):
//     AttachKVSession, PinKVSession, UnpinKVSession, UpdateKVSession, CloseKVSession,
//     KVSession and ListKVSessionKeys, answered by the leader from the registry it keeps in
//     raft (shared by every client of the tenant, which namespaces session ids as it does
//     keys; unlike put sessions, not this client's state).
//   - AddMaster and RemoveMaster change the masters' raft configuration (operators; the CLI's
//     `mooncake master add|remove`). A RemoveMaster retried after an ambiguous failure and
//     answered "not found" is a success, as for Remove.
//
// # Leaders and failover
//
// Master calls go to the last known leader. A NOT_LEADER answer names the leader, which the
// client calls next (learning masters it was not configured with). A master that cannot be
// reached, or has no leader yet, sends the call to the next master; after a whole round of
// failures the client waits (exponential backoff from 20 ms to Config.MaxBackoff) and tries
// again until the call's deadline (Config.Timeout unless ctx has an earlier one). Status asks
// the masters in turn, each within its share of the time, until one gives the leader's view
// (a master cut off from raft answers without a leader). When a call
// failed in a way that leaves open whether it was applied (a leader that died mid-call), the
// retry resolves it: a PutEnd answered "already exists" is a success if the committed version
// is ours; a Remove answered "not found" is a success.
//
// # Errors
//
// Errors wrap the sentinels of internal/base, so errors.Is works whether they were raised here
// or by a server: base.ErrInvalidKey, ErrInvalidParams, ErrObjectNotFound,
// ErrObjectAlreadyExists, ErrNoSpace (no room, or more replicas asked than workers),
// ErrTooLarge, ErrCorruption (every replica failed its checksum), ErrUnavailable,
// ErrClusterMismatch, ErrNotSupported (a protocol other than tcp).
//
// It must never import server, raftmeta, tier, dram, nvme or cmd.
package client
