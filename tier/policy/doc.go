// Package policy decides, for one worker's DRAM tier, which objects to evict and how (drop,
// spill to the lower tier, or drop the DRAM copy of an object already on the lower tier),
// when to promote a lower-tier object back to DRAM, and why a put cannot get room. It is a
// pure, deterministic state machine: no I/O, no goroutines, no clock reads (the caller passes
// "now" in), so it is tested from text scripts (testdata/) and against a dumb model.
//
// A *Policy is not goroutine-safe: package tier drives it under its engine mutex (after
// etcd-io/raft's "RawNode is a thread-unsafe Node").
//
// # Eviction order: segmented LRU (SLRU) with pins
//
// DRAM objects live in two segments:
//
//   - probation: a FIFO of objects not read since they entered DRAM (a fresh put, a warm-up
//     read). Victims are taken from its old end first.
//   - protected: an LRU of objects read at least once while in DRAM (and objects promoted from
//     the lower tier, which earned it by PromoteOnHit hits). A hit moves an object to its MRU
//     end. It may hold at most ProtectedShare (default 0.8) of the capacity; past that its LRU
//     end is demoted to the new end of probation, where it gets one more chance.
//
// Why not plain LRU: a KVCache is dominated by prefixes that are reused many times (system
// prompts, shared documents, multi-turn history), mixed with long one-shot prefills that are
// never read again. Under plain LRU a burst of one-shot puts pushes every hot prefix out; under
// SLRU a one-shot object can only displace other one-shot objects (probation) until it has
// been read, while the reused prefixes sit in protected. This is the classic scan resistance
// of SLRU/2Q (and the idea behind S3-FIFO's small FIFO); SLRU was chosen over S3-FIFO's ghost
// queue and 2Q's A1out because it needs no history of evicted keys and every step is O(1)
// except the victim walk below.
//
// Victims are picked by walking probation (oldest first), then protected (least recent
// first), skipping objects that cannot give their bytes back now:
//
//   - hard-pinned objects are never victims (they are kept out of both segments);
//   - objects with readers (Acquire without Release) are never victims: their bytes would not
//     be freed anyway, the reader holds them;
//   - objects already being spilled are not candidates (their bytes are on their way out);
//   - soft-pinned objects whose pin has not expired are skipped in a first pass and taken in a
//     second pass, only if the first pass did not free enough: soft pins go last.
//
// The walk is O(objects skipped); DRAM objects of a KVCache are large (MiB), so a worker holds
// thousands, not millions.
//
// # Actions
//
// A victim's action depends on where else its bytes are: an object whose bytes are already on
// the lower tier (durable puts, promoted objects, spilled-and-promoted) loses only its DRAM copy
// (ActionDropCopy); a spill-mode object is spilled (ActionSpill: the engine writes it to the
// lower tier, then calls SpillDone, and only then are its DRAM bytes free); a cache-mode object,
// or any object when there is no lower tier, is dropped (ActionDrop).
//
// # The lower tier: exclusive where persistence allows, LRU when full
//
// A promotion moves a spill-mode object from the lower tier to DRAM rather than copying it
// (Promoted says releaseLower: the engine deletes the lower-tier copy), so the two tiers hold
// distinct objects and their capacities add up, as in a victim cache; evicted again, the
// object is spilled again. The lower-tier copy stays where it is the object's persistence:
// durable objects, and objects found at Open (Object.KeepLower: the lower tier does not record
// the mode, so one may have been durable).
//
// Lower-tier-only objects whose copy may go sit in an LRU (a spill's end or a lower-tier hit
// makes one the most recent). When the lower tier refuses a write for lack of room, EvictLower
// picks its least recent objects to delete; they are forgotten (the engine reports them lost).
// Kept copies and hard-pinned objects are never taken.
//
// # Tenants
//
// Objects carry their tenant. DRAM eviction takes first from the tenants over their share of
// DRAM (SetTenantShares); a spill of a tenant at its share of the lower tier (SetTenantNVMeShares)
// first takes that tenant's own least recent lower-tier objects, or is refused (SpillPlan).
// tenants.go has the rules.
//
// # Accounting
//
// Used() = bytes of DRAM-resident objects (including those being spilled) + Reserve()d bytes
// (ranges that are not indexed objects: writers before Commit, DRAM copies detached from the
// index that a reader still holds, temporary reads of lower-tier objects). Watermarks compare
// Used() with the capacity.
//
// It must never import anything but internal/base and the standard library.
package policy
