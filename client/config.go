package client

import (
	"fmt"
	"io"
	"log/slog"
	"strings"
	"time"

	"github.com/mooncake-go/mooncake/internal/base"
)

// DefaultMasterAddress is the master a client talks to when Config.MasterAddresses is empty
// (Mooncake's master port).
const DefaultMasterAddress = "127.0.0.1:50051"

// Config configures a Client. A zero field means "use the default".
type Config struct {
	// MasterAddresses lists the masters' client RPC addresses (host:port). The client finds the
	// leader among them and follows NOT_LEADER redirects to masters not in the list. The
	// default is [DefaultMasterAddress].
	MasterAddresses []string
	// ClusterID must match the masters' cluster id when set. The default is
	// base.DefaultClusterID.
	ClusterID string
	// Protocol names the transport for bulk bytes; only "tcp" works in this build. The default
	// is "tcp".
	Protocol string
	// Timeout bounds each call (Put, Get, ...) that has no earlier context deadline, including
	// the time spent finding a new leader during a failover. The default is 30s.
	Timeout time.Duration
	// DialTimeout bounds one connection attempt to one master or worker. A master that does
	// not answer in time counts as unreachable. The default is 2s.
	DialTimeout time.Duration
	// StripeSize is the size of one Write frame of a large object; the stripes of one object
	// go over several connections in parallel. The default is 4 MiB.
	StripeSize int64
	// ConnsPerPeer is the number of TCP connections kept to each master and worker. Calls to
	// one peer are pipelined over them, and a response's payload occupies its connection
	// until it is read, so concurrent gets of large objects from one worker want about one
	// connection each. The default is 8.
	ConnsPerPeer int
	// SkipChecksumVerify turns off the client's check of every object read against the
	// HighwayHash checksum committed with it (about 100 µs of CPU per MiB). The bytes are still
	// protected by TCP's checksums and by the worker's verification at commit and on NVMe reads;
	// what is lost is the end-to-end check of DRAM and of the path. The default (false) verifies.
	SkipChecksumVerify bool
	// DisableSharedMemory makes every get and put go over TCP. By default a get from a worker
	// on this host (same kernel, same uid or root) copies the object out of the worker's arena,
	// which the client maps read-only (ShmOpen/ShmPin in docs/protocol.md): one memory copy
	// instead of a TCP transfer; and a put to such a worker copies the value into a staging
	// area the worker made for this client, from which the worker copies it into its arena
	// (ShmPutOpen/ShmPutWrite). Workers elsewhere, or started with a private arena, are read
	// and written over TCP either way.
	DisableSharedMemory bool
	// DisableSSDPrefetch makes ExistsWith and BatchExistsWith ignore PrefetchToMemory
	// (Mooncake's setup option enable_ssd_prefetch=false). By default a caller that asks for
	// prefetch gets it: asking is already the opt-in (Mooncake also needs the setup option).
	DisableSSDPrefetch bool
	// LookupCacheTTL is how long a Lookup answer is reused by later gets of the same key,
	// which then skip the master round trip. A stale entry cannot return wrong bytes: the
	// worker serves only the cached version, and a miss drops the entry and asks the master
	// again. It does let a get read the previous version of an object another client
	// replaced or removed within the TTL, while a worker still holds it (this client's own
	// puts replace their keys' entries with what they committed and its removes drop them,
	// at once). Besides lookups, the cache holds the placements Exists and BatchExists
	// answered with and those of this client's committed puts. The default is 1s (the workers' heartbeat
	// interval, about as long as a removed object lingers on its worker anyway); a negative
	// value turns the cache off, so every get asks the leader. A key read in the last quarter
	// of its entry's life is looked up again in the background (BatchLookups), so keys read
	// over and over keep fresh entries; each answer still lives at most the TTL. Past the TTL
	// an entry is kept a minute for reads over TCP that the worker vouches for (ReadRequest
	// Cached; docs/protocol.md, "Reads from a kept lookup"), which widens the window above to
	// about 1.5 heartbeat intervals.
	LookupCacheTTL time.Duration
	// LookupCacheEntries bounds the keys the lookup cache holds. The default is 65536.
	LookupCacheEntries int
	// ConnectWait is how long Connect keeps trying while no master answers at all (a master
	// that is still starting refuses connections for a moment), so a client started together
	// with its cluster does not fail. Once connected, calls wait within Timeout for a leader
	// and for a first live worker. The default is min(Timeout, 5s); a negative value tries
	// each master once.
	ConnectWait time.Duration
	// MaxBackoff bounds the wait between two attempts to find a leader (plus up to 50%
	// jitter). The default is 100ms: during a failover a client then reaches the new leader
	// within about 150 ms of its election (BenchmarkFailover in server/; 500 ms cost up to
	// 750 ms), for one round of tiny calls to the masters every 100-150 ms while none leads.
	MaxBackoff time.Duration
	// Logger receives debug-level notes about redirects and failovers. The default discards.
	Logger *slog.Logger
	// TenantID is the tenant whose namespace every key of this client is in (tenant.go):
	// Mooncake's setup option tenant_id. The default ("" or "default") is the default tenant,
	// whose keys are stored as they are given.
	TenantID string
}

// EnsureDefaults fills zero fields with their defaults.
func (c *Config) EnsureDefaults() {
	if len(c.MasterAddresses) == 0 {
		c.MasterAddresses = []string{DefaultMasterAddress}
	}
	if c.ClusterID == "" {
		c.ClusterID = base.DefaultClusterID
	}
	if c.Protocol == "" {
		c.Protocol = "tcp"
	}
	if c.Timeout == 0 {
		c.Timeout = 30 * time.Second
	}
	if c.DialTimeout == 0 {
		c.DialTimeout = 2 * time.Second
	}
	if c.StripeSize == 0 {
		c.StripeSize = 4 << 20
	}
	if c.ConnsPerPeer == 0 {
		c.ConnsPerPeer = 8
	}
	if c.LookupCacheTTL == 0 {
		c.LookupCacheTTL = time.Second
	}
	if c.LookupCacheEntries == 0 {
		c.LookupCacheEntries = 65536
	}
	if c.ConnectWait == 0 {
		c.ConnectWait = min(c.Timeout, 5*time.Second)
	}
	if c.MaxBackoff == 0 {
		c.MaxBackoff = 100 * time.Millisecond
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
}

// Validate reports a bad configuration as an error wrapping base.ErrInvalidParams. It presumes
// EnsureDefaults has been called.
func (c *Config) Validate() error {
	for _, a := range c.MasterAddresses {
		if err := validateAddr(a); err != nil {
			return fmt.Errorf("%w: master address %q: %v", base.ErrInvalidParams, a, err)
		}
	}
	switch {
	case c.Protocol != "tcp":
		return fmt.Errorf("%w: protocol %q: only \"tcp\" is supported in this build", base.ErrNotSupported, c.Protocol)
	case c.Timeout < 0 || c.DialTimeout < 0 || c.MaxBackoff < 0:
		return fmt.Errorf("%w: timeouts must not be negative", base.ErrInvalidParams)
	case c.ConnsPerPeer < 0 || c.ConnsPerPeer > 256:
		return fmt.Errorf("%w: conns per peer must be 1 to 256, got %d", base.ErrInvalidParams, c.ConnsPerPeer)
	case c.LookupCacheEntries < 0:
		return fmt.Errorf("%w: lookup cache entries must not be negative, got %d", base.ErrInvalidParams, c.LookupCacheEntries)
	case c.StripeSize < 4<<10:
		return fmt.Errorf("%w: stripe size %d is under 4 KiB", base.ErrInvalidParams, c.StripeSize)
	}
	return base.ValidateTenant(c.TenantID)
}

func validateAddr(a string) error {
	i := strings.LastIndexByte(a, ':')
	if i <= 0 || i == len(a)-1 {
		return fmt.Errorf("want host:port")
	}
	return nil
}

// ReplicateConfig says how a put places and keeps an object. The zero value means one replica,
// any worker, no pin, the worker's persistence mode, and no overwrite of an existing key.
type ReplicateConfig struct {
	// Replicas is the number of copies on distinct workers (Mooncake's replica_num); 0 means 1.
	// A put asking for more replicas than there are live workers with room fails with an
	// error wrapping base.ErrNoSpace and nothing becomes visible.
	Replicas int
	// PreferredWorker, when set, is where the first replica goes if it has room.
	PreferredWorker base.WorkerID
	// SoftPinTTL keeps the object from eviction for this long after the put (0: no soft pin).
	SoftPinTTL time.Duration
	// HardPin keeps the object from eviction until it is removed.
	HardPin bool
	// Persistence overrides the worker's mode for this object (PersistenceDefault: the worker's).
	Persistence base.Persistence
	// Upsert replaces an existing object of the same key instead of failing with
	// base.ErrObjectAlreadyExists.
	Upsert bool
	// Tokens is how many KV-cache tokens the object holds (for a batch: each object), and
	// Model the model they belong to (a name registered with `mooncake model add`). Both are
	// optional; the master counts them per model to set expected bytes against actual ones
	// (`mooncake memory`). Tokens is 0 to 4294967295.
	Tokens int64
	Model  string
}

func (rc ReplicateConfig) normalized() (ReplicateConfig, error) {
	if rc.Replicas == 0 {
		rc.Replicas = 1
	}
	if rc.Replicas < 0 || rc.Replicas > 255 {
		return rc, fmt.Errorf("%w: replicas must be 1 to 255, got %d", base.ErrInvalidParams, rc.Replicas)
	}
	if rc.SoftPinTTL < 0 {
		return rc, fmt.Errorf("%w: soft pin TTL must not be negative", base.ErrInvalidParams)
	}
	if rc.PreferredWorker != "" {
		if err := base.ValidateWorkerID(rc.PreferredWorker); err != nil {
			return rc, err
		}
	}
	if err := rc.checkTokens(); err != nil {
		return rc, err
	}
	if rc.Persistence > base.PersistenceDurable {
		return rc, fmt.Errorf("%w: unknown persistence %d", base.ErrInvalidParams, rc.Persistence)
	}
	return rc, nil
}
