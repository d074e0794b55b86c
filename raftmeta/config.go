package raftmeta

import (
	"log/slog"
	"net"
	"time"

	"github.com/hashicorp/raft"
)

// Peer is one voter of the initial cluster. RPCAddr (optional) is the master's client-facing
// address: the first leader registers every peer that has one, so Masters lists followers
// before they have ever led (see doc.go, "Master addresses").
type Peer struct {
	ID       string
	RaftAddr string
	RPCAddr  string
}

// Config configures a Node. A zero field means its default; EnsureDefaults fills them in and
// Validate checks the result.
type Config struct {
	// ID is this master's raft server id; required, unique in the cluster, never reused.
	ID string
	// RaftAddr is the host:port the raft transport listens on and advertises; required. Port 0
	// picks a free port (see Node.RaftAddr), useful only for a node added with AddVoter or
	// bootstrapped with Node.Bootstrap.
	RaftAddr string
	// RPCAddr is this master's client-facing address, written to the FSM when it leads, so every
	// master can redirect clients to the leader. Optional (no redirect address without it).
	RPCAddr string
	// DataDir holds raft.db (bolt log + stable store) and snapshots/; required.
	DataDir string
	// Peers is the static cluster (this node included) bootstrapped when DataDir holds no raft
	// state. Empty: no bootstrap; the node waits to be added with AddVoter or Bootstrap.
	Peers []Peer

	// SnapshotThreshold is how many log entries since the last snapshot trigger a new one.
	// The default is 8192 (raft's).
	SnapshotThreshold uint64
	// SnapshotInterval is how often raft checks SnapshotThreshold (jittered). The default is
	// 120s (raft's).
	SnapshotInterval time.Duration
	// TrailingLogs is how many entries stay in the log after a snapshot, so a follower that is
	// a little behind catches up from the log instead of a full snapshot. The default is 10240
	// (raft's).
	TrailingLogs uint64
	// RetainSnapshots is how many snapshot files are kept. The default is 2.
	RetainSnapshots int

	// Timing. Defaults are raft's (1s heartbeat and election timeouts, 500ms leader lease,
	// 50ms commit timeout): safe across racks and under GC pauses. Tests on loopback use ~3x
	// less (raftmetatest).
	HeartbeatTimeout   time.Duration
	ElectionTimeout    time.Duration
	LeaderLeaseTimeout time.Duration
	CommitTimeout      time.Duration

	// MaxAppendEntries bounds the entries in one AppendEntries RPC and one FSM batch. The
	// default is 256 (raft's is 64): our entries are small (a PutEnd of one object is ~100 B),
	// so bigger batches cost little latency and cut RPCs and fsyncs under concurrent proposers.
	MaxAppendEntries int
	// BatchApply turns on raft's BatchApplyCh (a buffered apply channel). The default is
	// false: raft's leader loop already groups concurrent Apply calls into one log write of up
	// to MaxAppendEntries entries; the buffer gave no measurable gain in BenchmarkCommit on our
	// 2-core test box (within noise), and a future still queued in it when raft shuts down is
	// never answered, so its caller could wait forever.
	BatchApply bool
	// NoSync skips fsync of the raft log. Unsafe (a crash may lose acknowledged writes); for
	// benchmarks of the non-disk path only. The default is false.
	NoSync bool

	// CloseTimeout bounds how long Close waits for raft to shut down. Past it Close logs every
	// goroutine's stack at Error (what raft waits on), closes the transport and the log store
	// anyway and returns an error wrapping base.ErrTimeout, so a stuck shutdown fails loudly
	// instead of hanging the process (or a test package until its -timeout). A healthy
	// shutdown waits at most for in-flight RPCs (10s transport I/O timeout) and a snapshot
	// being written. The default is 1 minute.
	CloseTimeout time.Duration

	// WrapTransport, when set, wraps the TCP transport before raft uses it. Nil in
	// production; raftmetatest uses it to cut links for partition tests.
	WrapTransport func(raft.Transport) raft.Transport

	// Logger receives this node's logs and raft's (through an hclog adapter, Info and above by
	// default). Nil: slog.Default().
	Logger *slog.Logger
}

// EnsureDefaults fills in zero fields with their defaults.
func (c *Config) EnsureDefaults() {
	rc := raft.DefaultConfig()
	orDefault(&c.SnapshotThreshold, rc.SnapshotThreshold)
	orDefault(&c.SnapshotInterval, rc.SnapshotInterval)
	orDefault(&c.TrailingLogs, rc.TrailingLogs)
	orDefault(&c.RetainSnapshots, 2)
	orDefault(&c.HeartbeatTimeout, rc.HeartbeatTimeout)
	orDefault(&c.ElectionTimeout, rc.ElectionTimeout)
	orDefault(&c.LeaderLeaseTimeout, rc.LeaderLeaseTimeout)
	orDefault(&c.CommitTimeout, rc.CommitTimeout)
	orDefault(&c.MaxAppendEntries, 256)
	orDefault(&c.CloseTimeout, time.Minute)
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
}

// orDefault sets *p to def when *p is the zero value.
func orDefault[T comparable](p *T, def T) {
	var zero T
	if *p == zero {
		*p = def
	}
}

// Validate checks a Config; it presumes EnsureDefaults has been called. Errors wrap
// base.ErrInvalidParams.
func (c *Config) Validate() error {
	if err := checkAddr("ID", c.ID, false); err != nil {
		return err
	}
	if _, _, err := net.SplitHostPort(c.RaftAddr); err != nil {
		return invalidf("raft address %q: %v", c.RaftAddr, err)
	}
	if c.DataDir == "" {
		return invalidf("DataDir is required")
	}
	if err := checkAddr("RPC address", c.RPCAddr, true); err != nil {
		return err
	}
	self := false
	seen := map[string]bool{}
	for _, p := range c.Peers {
		if p.ID == "" || p.RaftAddr == "" || seen[p.ID] || seen["addr:"+p.RaftAddr] {
			return invalidf("peers: bad or duplicate peer %q=%q", p.ID, p.RaftAddr)
		}
		seen[p.ID], seen["addr:"+p.RaftAddr] = true, true
		if p.ID == c.ID {
			self = true
		}
	}
	if len(c.Peers) > 0 && !self {
		return invalidf("peers %v do not include this node %q", c.Peers, c.ID)
	}
	if c.MaxAppendEntries < 1 || c.MaxAppendEntries > 1024 {
		return invalidf("MaxAppendEntries %d, want 1 to 1024", c.MaxAppendEntries)
	}
	if c.RetainSnapshots < 1 {
		return invalidf("RetainSnapshots %d, want at least 1", c.RetainSnapshots)
	}
	return nil
}

// raftConfig builds the hashicorp config from c (after EnsureDefaults).
func (c *Config) raftConfig() *raft.Config {
	rc := raft.DefaultConfig()
	rc.LocalID = raft.ServerID(c.ID)
	rc.SnapshotThreshold = c.SnapshotThreshold
	rc.SnapshotInterval = c.SnapshotInterval
	rc.TrailingLogs = c.TrailingLogs
	// NB: soloNudge lets electIfSoleVoter start a sole voter's election at once (solo.go).
	rc.HeartbeatTimeout = c.HeartbeatTimeout + soloNudge
	rc.ElectionTimeout = max(c.ElectionTimeout, rc.HeartbeatTimeout) // raft wants election >= heartbeat
	rc.LeaderLeaseTimeout = c.LeaderLeaseTimeout
	rc.CommitTimeout = c.CommitTimeout
	rc.MaxAppendEntries = c.MaxAppendEntries
	rc.BatchApplyCh = c.BatchApply
	// The leader must not hold a lease longer than the heartbeat timeout (raft.ValidateConfig).
	if rc.LeaderLeaseTimeout > rc.HeartbeatTimeout {
		rc.LeaderLeaseTimeout = rc.HeartbeatTimeout
	}
	rc.Logger = newHCLogger(c.Logger, "raft")
	return rc
}
