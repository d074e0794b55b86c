package tier

import (
	"fmt"
	"log/slog"
	"time"

	"github.com/mooncake-go/mooncake/dram"
	"github.com/mooncake-go/mooncake/internal/base"
)

// Lower is the tier below DRAM; *nvme.Store implements it exactly (server wires it in). Every
// method is goroutine-safe. The engine writes one key at a time (see Engine's key locks), so a
// Lower never sees two concurrent Puts or a Put and a Delete of the same key from one Engine.
type Lower interface {
	// PutChecked stores a whole object, replacing any version of the key. checksum is
	// base.Checksum(data) as the engine verified it at Commit (0: unknown, the tier computes
	// it); the tier stores it rather than hashing data again, so a read detects any change
	// since. sync: durable before return.
	PutChecked(key string, v base.Version, data []byte, checksum uint64, sync bool) error
	// Stat returns the object's meta; base.ErrObjectNotFound if absent.
	Stat(key string) (base.ObjectMeta, error)
	// ReadInto reads the object into dst (len(dst) == Size). v == 0: any version; another
	// version gives base.ErrInvalidVersion; a bad checksum gives base.ErrCorruption.
	ReadInto(key string, v base.Version, dst []byte) error
	// Delete removes the object; v == 0: any version. Absent: base.ErrObjectNotFound.
	Delete(key string, v base.Version) error
	// Scan calls fn for every object held (restart inventory); fn's error stops the scan.
	Scan(fn func(base.ObjectMeta) error) error
}

// Defaults of Options.
const (
	// DefaultHighWatermark and DefaultLowWatermark: background eviction starts past 95% of the
	// arena and stops at 85%. 5% headroom lets a burst of puts find room without waiting for
	// the evictor; evicting 10% at a time keeps its wake-ups rare.
	DefaultHighWatermark = 0.95
	DefaultLowWatermark  = 0.85
	// DefaultSpillQueueBytes bounds the bytes queued for (or being written by) the spill
	// worker: 256 MiB is ~0.1-0.3 s of NVMe write bandwidth, enough to keep the device busy
	// without holding much DRAM hostage.
	DefaultSpillQueueBytes = 256 << 20
	// DefaultPromoteOnHit: second-hit admission (see tier/policy).
	DefaultPromoteOnHit = 2
	// DefaultSupersededWait bounds how long a Put that finds nothing to evict waits for the
	// master's drops of superseded versions (supersede.go) before it fails with
	// base.ErrNoSpace: 3 s is three of the worker's heartbeats (each carries the drops owed),
	// so the drops arrive within it even when no early fetch does, and a twentieth of the
	// master's 60 s put timeout.
	DefaultSupersededWait = 3 * time.Second
	// DefaultSupersededFetchShare: once superseded versions hold this share of the arena,
	// every commit that keeps one more calls Events.SupersededHeld, so the worker fetches the
	// drops owed at once instead of at its next heartbeat. A sixteenth (64 MiB of a 1 GiB
	// arena) lets ordinary upserts settle at the heartbeat's pace and starts fetching well
	// before the superseded bytes can fill the arena.
	DefaultSupersededFetchShare = 16
)

// Options configure Open. A zero field means its default.
type Options struct {
	// Arena is the DRAM arena; required. The caller owns it and closes it after Engine.Close
	// and after every Reader and Writer is released.
	Arena *dram.Arena
	// Lower is the tier below DRAM; nil: DRAM only (every mode behaves as cache, and durable
	// puts fail with base.ErrNotSupported).
	Lower Lower
	// Persistence is the worker's default mode; zero: PersistenceSpill if Lower != nil, else
	// PersistenceCache.
	Persistence base.Persistence
	// HighWatermark, LowWatermark are shares of the arena capacity; defaults 0.95 / 0.85.
	HighWatermark, LowWatermark float64
	// KeepSuperseded: a commit that replaces a committed version keeps the old one as the
	// key's superseded version until a Remove settles it (supersede.go). A worker sets it: its
	// master may still list the old version until it commits the new one. Off, a commit frees
	// the replaced version at once.
	KeepSuperseded bool
	// SupersededWait, with KeepSuperseded: a Put (or a commit keeping a lower-tier version)
	// that finds nothing to evict while superseded versions hold bytes waits this long at most
	// for them to be released (the master's drops) before failing with base.ErrNoSpace; it
	// calls Events.SupersededHeld when it starts waiting. Default DefaultSupersededWait;
	// negative: no wait.
	SupersededWait time.Duration
	// SupersededFetchBytes, with KeepSuperseded: a commit that leaves superseded versions
	// holding at least this many bytes calls Events.SupersededHeld. Default the arena's
	// capacity / DefaultSupersededFetchShare.
	SupersededFetchBytes int64
	// SpillQueueBytes bounds the spill queue in bytes; default 256 MiB. A single object larger
	// than the bound is still spilled, alone.
	SpillQueueBytes int64
	// PromoteOnHit promotes a Lower object to DRAM on its Nth hit; default 2.
	PromoteOnHit int
	// Now is the clock for pin TTLs; default time.Now.
	Now func() time.Time
	// Logger; default discards.
	Logger *slog.Logger
	// Events receives callbacks for background work; nil fields are skipped.
	Events EventListener
}

// EnsureDefaults fills zero fields with their defaults.
func (o *Options) EnsureDefaults() {
	if o.Persistence == base.PersistenceDefault {
		o.Persistence = base.PersistenceCache
		if o.Lower != nil {
			o.Persistence = base.PersistenceSpill
		}
	}
	if o.HighWatermark == 0 {
		o.HighWatermark = DefaultHighWatermark
	}
	if o.LowWatermark == 0 {
		o.LowWatermark = DefaultLowWatermark
	}
	if o.SpillQueueBytes == 0 {
		o.SpillQueueBytes = DefaultSpillQueueBytes
	}
	if o.PromoteOnHit == 0 {
		o.PromoteOnHit = DefaultPromoteOnHit
	}
	if o.SupersededWait == 0 {
		o.SupersededWait = DefaultSupersededWait
	}
	if o.SupersededFetchBytes == 0 && o.Arena != nil {
		o.SupersededFetchBytes = max(o.Arena.Capacity()/DefaultSupersededFetchShare, 1)
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
}

// Validate checks the options; it presumes EnsureDefaults has been called. Errors wrap
// base.ErrInvalidParams (base.ErrNotSupported for durable without a Lower).
func (o *Options) Validate() error {
	switch {
	case o.Arena == nil:
		return fmt.Errorf("%w: tier: Options.Arena is required", base.ErrInvalidParams)
	case o.Persistence > base.PersistenceDurable:
		return fmt.Errorf("%w: tier: unknown persistence %d", base.ErrInvalidParams, o.Persistence)
	case o.Persistence == base.PersistenceDurable && o.Lower == nil:
		return fmt.Errorf("%w: tier: persistence durable needs a lower tier", base.ErrNotSupported)
	case o.SpillQueueBytes < 0:
		return fmt.Errorf("%w: tier: SpillQueueBytes %d < 0", base.ErrInvalidParams, o.SpillQueueBytes)
	case o.SupersededFetchBytes < 0:
		return fmt.Errorf("%w: tier: SupersededFetchBytes %d < 0", base.ErrInvalidParams, o.SupersededFetchBytes)
	}
	return nil
}

// PutOptions are the per-put settings.
type PutOptions struct {
	// Persistence overrides the worker's default; PersistenceDefault: use it.
	Persistence base.Persistence
	// SoftPinTTL: the object is evicted only after unpinned objects, until Commit + TTL.
	SoftPinTTL time.Duration
	// HardPin: never evicted from DRAM (until Unpin).
	HardPin bool
	// Model names the KV-cache model whose tokens the object holds ("": none); the engine
	// tallies each model's bytes per tier (ModelUsage). Not persisted on the lower tier.
	Model string
}

// ObjectInfo describes one committed object (List).
type ObjectInfo struct {
	base.ObjectMeta
	// Tier is TierDRAM when the object has a DRAM copy (it may be on NVMe too), else TierNVMe.
	Tier base.Tier
	// OnLower: the object's bytes are on the lower tier (durable, spilled or SpillAll'ed).
	OnLower      bool
	Persistence  base.Persistence
	HardPin      bool
	SoftPinUntil time.Time // zero: none
	// SessionPinned: a member of a pinned KV session (SetSessionPin), soft pinned without a
	// deadline.
	SessionPinned bool
}

// EvictReason says what started an eviction.
type EvictReason uint8

const (
	// EvictWatermark: the background evictor, DRAM past the high watermark.
	EvictWatermark EvictReason = iota + 1
	// EvictPressure: a Put found no free range and evicted inline.
	EvictPressure
)

func (r EvictReason) String() string {
	switch r {
	case EvictWatermark:
		return "watermark"
	case EvictPressure:
		return "pressure"
	}
	return "unknown"
}

// EvictInfo describes one eviction decision.
type EvictInfo struct {
	Meta   base.ObjectMeta
	Action string // "drop" (object gone), "spill" (queued for the lower tier), "drop-copy" (already on lower)
	Reason EvictReason
}

// SpillInfo describes the end of one spill.
type SpillInfo struct {
	Meta     base.ObjectMeta
	Duration time.Duration
	// Err != nil: the spill failed and the object was dropped (ObjectLost is called too).
	Err error
}

// EventListener holds callbacks for background work, after pebble's EventListener. They run
// on the engine's goroutines (or the caller's, for inline eviction) with no engine lock held,
// possibly concurrently; they must be quick and must not block. Nil fields are skipped.
type EventListener struct {
	// Evicted is called for every eviction decision.
	Evicted func(EvictInfo)
	// SpillEnd is called when a spill ends, successfully or not.
	SpillEnd func(SpillInfo)
	// Promoted is called when a lower-tier object gets a DRAM copy (hit admission or warm-up).
	Promoted func(base.ObjectMeta)
	// ObjectLost is called when a committed object leaves this worker without a Remove (a
	// cache-mode eviction, a failed spill, the lower tier lost or corrupted it), so the server
	// can tell the master to drop the replica.
	ObjectLost func(meta base.ObjectMeta, why string)
	// BackgroundError is called for errors of background work that no caller sees.
	BackgroundError func(error)
	// CopyDetached is called when an object's DRAM copy stops being the index's (removed,
	// replaced, evicted, spilled) and when a superseded version's slot is released, before
	// the range can be freed. Unlike the others it runs
	// under the engine's lock, so it must be cheap and must not call the engine: the worker
	// bumps a copy generation that clients on its host read (transfer.ShmGenTable).
	CopyDetached func(key string)
	// SupersededHeld is called with the bytes superseded versions hold when a commit leaves
	// at least Options.SupersededFetchBytes of them, and when a Put starts waiting for them
	// to be released (Options.SupersededWait): the worker then fetches the drops the master
	// owes it (server/worker/worker_drop.go) rather than waiting for its next heartbeat. It runs on
	// the committing or waiting goroutine; it must not block.
	SupersededHeld func(heldBytes int64)
}
