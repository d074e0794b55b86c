package tier

import (
	"github.com/mooncake-go/mooncake/tier/policy"
)

// counters are the engine's cumulative counts, guarded by Engine.mu (every counted event
// already takes it, so plain integers cost nothing more).
type counters struct {
	hitsDRAM, hitsNVMe, misses                int64
	commits, committedBytes, aborts, replaced int64
	removes                                   int64
	evictions                                 [3]int64 // by EvictReason
	evictDropped, evictSpilled, evictCopies   int64
	evictedBytes, evictPasses                 int64
	spills, spillBytes, spillErrors           int64
	promotions, promotionsSkipped             int64
	promotionsMoved, prefetched               int64
	lowerEvictions, lowerEvictedBytes         int64
	nvmeQuotaEvictions, nvmeQuotaEvictedBytes int64
	nvmeQuotaDrops, nvmeQuotaDroppedBytes     int64
	noSpace                                   [policy.ReasonTooLarge + 1]int64
	noSpaceFragmented                         int64
	checksumMismatches, lowerErrors           int64
	superseded, restored                      int64
	supersededWaits                           int64
}

// Usage is a count of objects and their bytes.
type Usage struct {
	Objects int64
	Bytes   int64
}

// Metrics is a snapshot of the engine's state and counters. Bytes are object sizes (the arena
// rounds each range up to its alignment; ArenaUsedBytes is the arena's own figure).
type Metrics struct {
	// DRAM: objects with a DRAM copy (including those being spilled and hard-pinned ones).
	DRAM Usage
	// NVMe: objects whose bytes are on the lower tier (some also have a DRAM copy).
	NVMe Usage
	// Spilling: objects chosen for spilling, queued or being written.
	Spilling Usage
	// HardPinned: DRAM objects that are hard-pinned.
	HardPinned Usage
	// PendingWrites: Writers between Put and Commit/Abort.
	PendingWrites Usage
	// ReservedBytes: DRAM not held by indexed objects: pending writes, copies detached from the
	// index (removed, replaced, evicted) that a reader still holds, temporary lower-tier reads.
	ReservedBytes int64
	// Superseded: versions replaced by a local commit that the master has not yet settled,
	// held in DRAM (supersede.go); their bytes are part of ReservedBytes.
	Superseded Usage
	// SupersededTotal: versions kept that way; Restored: those made current again because
	// the version that replaced them never committed.
	SupersededTotal, Restored int64
	// SupersededWaits: Puts that found nothing to evict and waited for superseded versions to
	// be released (Options.SupersededWait) before allocating or failing.
	SupersededWaits int64
	// SpillQueueBytes: bytes queued for the spill worker or being written by it.
	SpillQueueBytes int64
	// ArenaCapacityBytes, ArenaUsedBytes: the arena's own accounting.
	ArenaCapacityBytes, ArenaUsedBytes int64

	// HitsDRAM, HitsNVMe, Misses count Gets by outcome.
	HitsDRAM, HitsNVMe, Misses int64
	// Commits, CommittedBytes, Aborts, Replaced (commits that replaced an older version), Removes.
	Commits, CommittedBytes, Aborts, Replaced, Removes int64
	// EvictionsWatermark, EvictionsPressure: eviction decisions by what started them.
	EvictionsWatermark, EvictionsPressure int64
	// EvictedDropped (gone: cache mode / no lower tier), EvictedSpilled (queued for spill),
	// EvictedCopies (DRAM copy dropped, bytes already on the lower tier): decisions by action.
	EvictedDropped, EvictedSpilled, EvictedCopies int64
	// EvictedBytes: the sizes of the objects evicted. EvictPasses: eviction passes (background
	// or a put's) that chose at least one victim.
	EvictedBytes, EvictPasses int64
	// Spills, SpillBytes: objects written to the lower tier by eviction or SpillAll.
	// SpillErrors: failed spills (the object was dropped) and failed SpillAll writes.
	Spills, SpillBytes, SpillErrors int64
	// Promotions: lower-tier objects given a DRAM copy. PromotionsSkipped: admitted but no DRAM
	// range was free.
	Promotions, PromotionsSkipped int64
	// PromotionsMoved: promotions whose lower-tier copy was released (exclusive tiers; not
	// durable objects, nor objects found at Open).
	PromotionsMoved int64
	// Prefetched: promotions made by Prefetch (also counted in Promotions).
	Prefetched int64
	// LowerEvictions, LowerEvictedBytes: objects deleted from the lower tier, least recently
	// used first, to make room for a write it refused for lack of space (reported lost).
	LowerEvictions, LowerEvictedBytes int64
	// NVMeQuotaEvictions, NVMeQuotaEvictedBytes: lower-tier objects deleted (least recently
	// used first, reported lost) to keep their tenant under its NVMe share at a spill of its.
	NVMeQuotaEvictions, NVMeQuotaEvictedBytes int64
	// NVMeQuotaDrops, NVMeQuotaDroppedBytes: objects evicted from DRAM without a spill because
	// their tenant's NVMe share had no room for them (reported lost).
	NVMeQuotaDrops, NVMeQuotaDroppedBytes int64
	// TenantNVMeBytes: each tenant's bytes on the lower tier (tenants with none are absent).
	TenantNVMeBytes map[string]int64
	// NoSpace* count Puts refused for lack of space, by reason.
	NoSpaceAllPinned, NoSpaceAllInUse, NoSpaceTooLarge, NoSpaceFragmented int64
	// ChecksumMismatches: Commits whose bytes did not match the checksum given.
	ChecksumMismatches int64
	// LowerErrors: failed lower-tier calls (durable puts, deletes, reads).
	LowerErrors int64
}

// Metrics returns a snapshot.
func (e *Engine) Metrics() Metrics {
	st := e.arena.Stats()
	q := e.spillQ.queuedBytes()
	e.mu.Lock()
	defer e.mu.Unlock()
	ps := e.mu.pol.Stats()
	c := &e.mu.m
	return Metrics{
		DRAM:                  Usage{int64(ps.DRAMObjects), ps.DRAMBytes},
		NVMe:                  Usage{int64(ps.LowerObjects), ps.LowerBytes},
		Spilling:              Usage{int64(ps.SpillingObjects), ps.SpillingBytes},
		HardPinned:            Usage{int64(ps.PinnedObjects), ps.PinnedBytes},
		PendingWrites:         Usage{e.mu.writers, e.mu.writerBytes},
		ReservedBytes:         ps.Reserved,
		Superseded:            e.supUsageLocked(),
		SupersededTotal:       c.superseded,
		Restored:              c.restored,
		SupersededWaits:       c.supersededWaits,
		SpillQueueBytes:       q,
		ArenaCapacityBytes:    st.Capacity,
		ArenaUsedBytes:        st.Used,
		HitsDRAM:              c.hitsDRAM,
		HitsNVMe:              c.hitsNVMe,
		Misses:                c.misses,
		Commits:               c.commits,
		CommittedBytes:        c.committedBytes,
		Aborts:                c.aborts,
		Replaced:              c.replaced,
		Removes:               c.removes,
		EvictionsWatermark:    c.evictions[EvictWatermark],
		EvictionsPressure:     c.evictions[EvictPressure],
		EvictedDropped:        c.evictDropped,
		EvictedSpilled:        c.evictSpilled,
		EvictedCopies:         c.evictCopies,
		EvictedBytes:          c.evictedBytes,
		EvictPasses:           c.evictPasses,
		Spills:                c.spills,
		SpillBytes:            c.spillBytes,
		SpillErrors:           c.spillErrors,
		Promotions:            c.promotions,
		PromotionsSkipped:     c.promotionsSkipped,
		PromotionsMoved:       c.promotionsMoved,
		Prefetched:            c.prefetched,
		LowerEvictions:        c.lowerEvictions,
		LowerEvictedBytes:     c.lowerEvictedBytes,
		NVMeQuotaEvictions:    c.nvmeQuotaEvictions,
		NVMeQuotaEvictedBytes: c.nvmeQuotaEvictedBytes,
		NVMeQuotaDrops:        c.nvmeQuotaDrops,
		NVMeQuotaDroppedBytes: c.nvmeQuotaDroppedBytes,
		TenantNVMeBytes:       e.mu.pol.TenantsLower(),
		NoSpaceAllPinned:      c.noSpace[policy.ReasonAllPinned],
		NoSpaceAllInUse:       c.noSpace[policy.ReasonAllInUse],
		NoSpaceTooLarge:       c.noSpace[policy.ReasonTooLarge],
		NoSpaceFragmented:     c.noSpaceFragmented,
		ChecksumMismatches:    c.checksumMismatches,
		LowerErrors:           c.lowerErrors,
	}
}
