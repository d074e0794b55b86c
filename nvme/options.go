package nvme

import (
	"fmt"
	"log/slog"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/mooncake-go/mooncake/internal/base"
)

// SyncPolicy says when the store makes writes durable (fdatasync of the extent files, then a
// synced pebble commit of the index). Whatever the policy, a Put with sync=true returns only
// once the object is durable: acknowledged durable writes are never lost. The policy decides
// what happens to the other writes.
type SyncPolicy uint8

const (
	// SyncGroup (the default) syncs writes in groups. A Put with sync=true joins the next
	// group sync (one fdatasync per dirty extent file shared by every waiter that arrived
	// while the previous sync ran, as pebble's WAL does) and never waits for a timer; writes
	// with sync=false are synced by a background tick every GroupCommitInterval, so at most
	// that much of them is lost on power failure.
	SyncGroup SyncPolicy = iota
	// SyncAlways makes every Put durable before it returns, as if sync were always true.
	SyncAlways
	// SyncNone leaves writes with sync=false to the kernel's writeback (lost on power failure,
	// kept on a process crash). Put with sync=true is still durable on return.
	SyncNone
)

// String returns "group", "always" or "none".
func (p SyncPolicy) String() string {
	switch p {
	case SyncGroup:
		return "group"
	case SyncAlways:
		return "always"
	case SyncNone:
		return "none"
	}
	return fmt.Sprintf("SyncPolicy(%d)", uint8(p))
}

// DirectIO says whether extent files are written with O_DIRECT.
type DirectIO uint8

const (
	// DirectIOAuto (the default) probes O_DIRECT at Open on the extent directory and uses it
	// when the filesystem accepts it (ext4, xfs on a block device); tmpfs, overlayfs on some
	// kernels, and every non-OS vfs.FS (vfs.NewMem, errorfs over it) fall back to buffered
	// writes. The choice is logged once and reported by Metrics.DirectIO.
	DirectIOAuto DirectIO = iota
	// DirectIOOff always writes through the page cache.
	DirectIOOff
)

// Defaults. The numbers come from this machine's disk (see docs/persistence.md, "nvme
// benchmarks"): O_DIRECT sequential writes reach 1.7-2.7 GB/s in blocks of 1 MiB and more, so
// extents are written in whole aligned records, never in small pieces.
const (
	// DefaultExtentSize is the size after which an extent file is sealed and a new one started.
	// 128 MiB keeps GC rewrites short (one extent is rewritten at a time) and the number of
	// open files small (a 1 TiB store holds 8192 extents).
	DefaultExtentSize = 128 << 20
	// DefaultInlineThreshold: values whose stored form is at most this many bytes live in the
	// pebble index itself (no extent I/O, no 4 KiB padding).
	DefaultInlineThreshold = 64 << 10
	// DefaultGroupCommitInterval bounds how long a write with sync=false stays unsynced.
	DefaultGroupCommitInterval = 5 * time.Millisecond
	// DefaultGCLiveRatio: an extent whose live bytes fall under half its size is rewritten.
	DefaultGCLiveRatio = 0.5
	// DefaultGCInterval is how often the background loop looks for extents to collect.
	DefaultGCInterval = 10 * time.Second
	// DefaultLZ4MinSaving: a compressed object is kept only if it is at least 10% smaller.
	DefaultLZ4MinSaving = 0.10
	// DefaultCapacityFraction of the free disk at Open is the default capacity (less the
	// index headroom, indexHeadroom).
	DefaultCapacityFraction = 0.90
	// DefaultMemTableSize is the pebble memtable size on a large disk. Pebble preallocates
	// each WAL file to 110% of it, so on a small disk (budget under 32 times this) the
	// memtable is budget/32, down to minMemTableSize: a 64 MiB tier must not give half its
	// disk to one preallocated WAL.
	DefaultMemTableSize = 32 << 20
	minMemTableSize     = 1 << 20
	// minAutoExtentSize and the divisor autoExtentDivisor size extents relative to the
	// capacity when Options.ExtentSize is not set: capacity/8, between 1 MiB and
	// DefaultExtentSize, so that a small store is made of several extents and a sealed,
	// mostly dead one can be collected (a 16 MiB store with 128 MiB extents never sealed
	// its only extent, and so never reclaimed anything without hole punching).
	autoExtentDivisor = 8
)

// Options configure a Store. A zero field means "use the default".
type Options struct {
	// Dir is the store's own directory, root_fs_dir/<cluster_id>/<worker_id> (the caller
	// builds it). Required. It holds index/ (pebble) and extents/.
	Dir string
	// Capacity bounds the bytes the store uses on disk (extent files, dead space included until
	// GC, plus inline values). The default is what the store already uses plus 90% of the free
	// space of the filesystem at Open.
	Capacity int64
	// Sync is the sync policy. The default is SyncGroup.
	Sync SyncPolicy
	// GroupCommitInterval is the tick of background syncs under SyncGroup. Default 5ms.
	GroupCommitInterval time.Duration
	// FS is the filesystem (pebble's vfs), for fault injection in tests. Default vfs.Default.
	FS vfs.FS
	// Logger receives open/recovery, corruption and GC lines. Default slog.Default().
	Logger *slog.Logger

	// ExtentSize is the size at which an extent is sealed. Default: Capacity/8, between
	// 1 MiB and 128 MiB. An object larger than it gets an extent of its own.
	ExtentSize int64
	// InlineThreshold: stored values of at most this many bytes live in the index. Default
	// 64 KiB; a negative value puts every value in extents.
	InlineThreshold int64
	// GCLiveRatio: sealed extents whose live/size ratio is under it are rewritten by GC.
	// Default 0.5.
	GCLiveRatio float64
	// GCInterval is the period of the background GC loop. Default 10s; negative disables the
	// loop (GC still runs when called, and when a Put finds the store full).
	GCInterval time.Duration
	// DisableLZ4 stores every value uncompressed.
	DisableLZ4 bool
	// LZ4MinSaving is the fraction an lz4-compressed value must save to be kept. Default 0.10.
	LZ4MinSaving float64
	// DirectIO selects O_DIRECT for extent writes. Default DirectIOAuto.
	DirectIO DirectIO
	// Events receives callbacks for background work and failures (nil fields are skipped).
	Events EventListener
	// testHookBackgroundPass, when set, runs after each pass of the background loop (restore
	// the ballast, reclaim, GC), so a test waits on the pass instead of sleeping. Nil in
	// production.
	testHookBackgroundPass func()
	// DisableHolePunch turns off reclaiming dead records by punching holes in their extent
	// (fallocate PUNCH_HOLE). By default Open probes the filesystem (ext4, xfs, btrfs and
	// tmpfs support it; a non-OS vfs.FS does not) and, when it works, every deleted or
	// overwritten extent record is punched out within moments of its index change being
	// synced, so its space is free again without copying anything; GC then only deletes
	// extents with no live record left. Without hole punching, GC copies the live records
	// of mostly dead extents (Options.GCLiveRatio), which needs room for the copies.
	DisableHolePunch bool
	// VerifyOnOpen reads every extent record in full at Open and checks its checksum (slow:
	// reads the whole store). By default Open checks each record's header only, and data is
	// verified on every read.
	VerifyOnOpen bool
}

// EnsureDefaults fills zero fields with their defaults. Capacity, and ExtentSize which
// depends on it, are resolved at Open.
func (o *Options) EnsureDefaults() {
	if o.FS == nil {
		o.FS = vfs.Default
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.GroupCommitInterval == 0 {
		o.GroupCommitInterval = DefaultGroupCommitInterval
	}
	if o.InlineThreshold == 0 {
		o.InlineThreshold = DefaultInlineThreshold
	}
	if o.GCLiveRatio == 0 {
		o.GCLiveRatio = DefaultGCLiveRatio
	}
	if o.GCInterval == 0 {
		o.GCInterval = DefaultGCInterval
	}
	if o.LZ4MinSaving == 0 {
		o.LZ4MinSaving = DefaultLZ4MinSaving
	}
}

// Validate reports options that cannot work. It presumes EnsureDefaults has been called.
func (o *Options) Validate() error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("nvme: %w: "+format, append([]any{base.ErrInvalidParams}, args...)...)
	}
	switch {
	case o.Dir == "":
		return bad("Options.Dir is required")
	case o.Capacity < 0:
		return bad("Capacity %d is negative", o.Capacity)
	case o.Sync > SyncNone:
		return bad("unknown sync policy %d", o.Sync)
	case o.GroupCommitInterval < 0:
		return bad("GroupCommitInterval %s is negative", o.GroupCommitInterval)
	case o.ExtentSize != 0 && (o.ExtentSize < 1<<20 || o.ExtentSize > 1<<40):
		return bad("ExtentSize %d is outside [1 MiB, 1 TiB]", o.ExtentSize)
	case o.InlineThreshold > 1<<20:
		return bad("InlineThreshold %d is over 1 MiB", o.InlineThreshold)
	case o.GCLiveRatio < 0 || o.GCLiveRatio > 1:
		return bad("GCLiveRatio %v is outside [0, 1]", o.GCLiveRatio)
	case o.LZ4MinSaving < 0 || o.LZ4MinSaving >= 1:
		return bad("LZ4MinSaving %v is outside [0, 1)", o.LZ4MinSaving)
	case o.DirectIO > DirectIOOff:
		return bad("unknown DirectIO mode %d", o.DirectIO)
	}
	return nil
}

// EventListener holds callbacks for what the store does on its own, after pebble's
// EventListener. Callbacks run on the goroutine that did the work and must not block or call
// back into the Store. Nil fields are skipped.
type EventListener struct {
	// BackgroundError reports a failure of background work (GC, the group-commit tick).
	BackgroundError func(error)
	// GCEnd reports a GC pass that removed at least one extent.
	GCEnd func(GCStats)
	// Corruption reports a record that failed verification and was quarantined.
	Corruption func(key string, err error)
}
