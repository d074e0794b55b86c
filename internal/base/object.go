package base

import "time"

// Object is an object's metadata record: the ONE Go type a put's record has from the client's
// call to the raft command and back. The client fills it in PutStart (Key, Size) and PutEnd
// (Version, Checksum, Replicas written, Tokens, Model); the leader adds the pins and commits
// it as one raft entry (raftmeta.PutEnd); the FSM returns it from lookups (raftmeta.Object
// wraps it with the FSM's own fields). Codecs differ (transfer/internal/wire carries what the
// client knows, raftmeta's command codec carries the whole record), the Go type does not:
// a new object field is added here and to the codecs that carry it.
//
// Its identity and content (ObjectMeta: key, version, size, checksum) are what a worker knows
// of the object too (its inventory, the nvme index); the rest is what the masters add. Lookups
// answer with Placements (Replicas resolved to addresses), not with Replicas.
//
// In the record, Version is nonzero once the leader placed the put (PutStart; 0 before), and
// Checksum 0 means not known.
type Object struct {
	ObjectMeta
	// Replicas are the workers holding a full copy, in the order PutEnd listed them (in a
	// PutEnd: the workers that acknowledged their write; empty there means every placed one).
	// Invariant: no worker is listed twice.
	Replicas []WorkerID
	// SoftPinUntil is the soft pin deadline in unix nanoseconds on the leader's clock, 0 for
	// none: the one representation of a soft pin in the record. A client asks for a pin with
	// PutConfig.SoftPinTTL (its clock is not the leader's); the leader turns the TTL into this
	// deadline (SoftPinDeadline) when it commits. Nothing expires it: readers compare it with
	// their clock.
	SoftPinUntil int64
	HardPin      bool // never evicted until unpinned or removed
	// Tokens and Model are the KV-cache tokens the object holds and their model (0 and "" when
	// the put does not say).
	Tokens int64
	Model  string
}

// ObjectMeta is an object's identity and content, the part of its record (Object) that a
// worker knows: what a worker reports in its inventory, what the nvme tier indexes, and what
// tier's lower-tier interface passes around. Checksum is Checksum of the object's
// uncompressed bytes.
type ObjectMeta struct {
	Key      string
	Version  Version
	Size     int64
	Checksum uint64
}

// SoftPinDeadline returns the soft pin deadline (Object.SoftPinUntil) of a pin of ttl asked
// for at now: 0 (no pin) when ttl is not positive.
func SoftPinDeadline(now time.Time, ttl time.Duration) int64 {
	if ttl <= 0 {
		return 0
	}
	return now.Add(ttl).UnixNano()
}

// Placement is where one replica of an object lives (or is to be written): the worker and
// its data address. The one Go type for a replica's location, from the leader's placement
// (PutStart) and lookups to the client's reads and writes.
type Placement struct {
	WorkerID WorkerID
	Address  string
}

// PutConfig is the replication configuration of one put: client.ReplicateConfig as the
// leader receives it (PutStart and PutEnd carry it).
type PutConfig struct {
	Replicas        uint8         // replica_num; 0: the master's default (1)
	PreferredWorker WorkerID      // "" none; else place the first replica there if it has room
	SoftPinTTL      time.Duration // 0: no soft pin; else a pin of this long from the commit
	HardPin         bool          // never evicted until unpinned or removed
	Persistence     Persistence
	Upsert          bool // replace an existing key instead of failing with OBJECT_ALREADY_EXISTS
}

// KeyVersion names one version of an object; Version 0 means any (whatever version is
// stored). The one Go type for it in the wire calls (drops, revokes, prefetches) and the raft
// commands (DropReplicas and the lifecycle commands).
type KeyVersion struct {
	Key     string
	Version Version
}
