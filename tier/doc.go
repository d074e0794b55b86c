// Package tier is the worker-local storage engine the worker server calls: put, get, remove,
// pin and list objects held in the DRAM arena (package dram) and, below it, a Lower tier
// (package nvme's *Store, wired in by server). It decides nothing itself: which objects to
// evict, and whether to drop or spill them, when to promote, and why a put finds no room, are
// decided by the pure package tier/policy (segmented LRU, soft pins last, second-hit
// promotion); tier executes the decisions.
//
// # Objects and ownership
//
// Put returns a Writer over an arena range (zero copy: the transfer layer reads the socket
// straight into Writer.Bytes()); the object becomes visible on Commit, which verifies the
// checksum and replaces an older version of the key. Get returns a Reader that holds a
// reference to the DRAM range (dram.Handle refcount): eviction, spill, replacement and removal
// drop only the index's reference, so memory is never freed or reused under a reader. A
// lower-tier hit is read into a DRAM range (or a Go buffer when the arena is full) and, on the
// PromoteOnHit'th hit, that range becomes the object's DRAM copy.
//
// # Persistence modes (per worker, overridable per put)
//
//   - cache: evicted objects are dropped (EventListener.ObjectLost tells the server).
//   - spill (default with a Lower): evicted objects are written to the Lower tier, then their
//     DRAM copy is freed.
//   - durable: Commit writes the Lower tier (synced) before the object becomes visible, so
//     eviction only frees the DRAM copy.
//
// SpillAll (SIGTERM) writes every spill and durable object that is not yet on the Lower tier,
// synced, until its context ends. Open scans the Lower tier and indexes what it holds (on the
// lower tier only); WarmUp optionally copies objects back into DRAM.
//
// # Eviction: inline and background
//
// Both. A Put whose Alloc fails evicts inline (drops at once; spills are queued and the Put
// waits for them), so a Put never fails while something can be evicted. A background evictor
// goroutine, woken when DRAM passes the high watermark, evicts down to the low watermark so
// that most Puts find room without waiting. When nothing can be evicted but superseded
// versions (supersede.go) hold bytes, a Put first waits for their drops (at most
// Options.SupersededWait). Then Put fails with an error wrapping base.ErrNoSpace that says
// why: all pinned, all in use (readers, pending writes, superseded versions awaiting the
// master's drop), or larger than the arena.
//
// # Goroutines
//
//   - runEvictor: background eviction to the low watermark; exits on Close.
//   - runSpiller (only with a Lower): takes jobs from the spill queue, bounded in bytes
//     (Options.SpillQueueBytes; pushers wait), writes them to the Lower tier one at a time and
//     frees their DRAM copies; a failed spill drops the object. Exits on Close.
//
// Callers' goroutines run everything else, including inline eviction and lower-tier reads.
//
// # Locks
//
// Lock order: a key lock (Engine.lockKey: commits, lower-tier writes and deletes of one key
// are serialised, so a slow spill of version 1 can never overwrite version 2 on the Lower
// tier), then Engine.mu (index, policy, counters), then the arena's lock and spillQueue.mu
// (leaves). No Lower call and no EventListener callback runs under Engine.mu. A write holding
// its key's lock may take other keys' locks only without waiting (tryLockKeyLocked, under
// Engine.mu): a full lower tier evicting its least recently used objects (lowerlru.go) skips
// keys whose lock is held, so two writers can never wait on each other's keys.
//
// It must never import raftmeta, transfer, server, client or cmd.
package tier
