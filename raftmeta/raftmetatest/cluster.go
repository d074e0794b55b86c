package raftmetatest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/mooncake-go/mooncake/internal/base"
	"github.com/mooncake-go/mooncake/raftmeta"
)

// FastTimeouts sets raft timeouts for loopback tests: about 3x faster than raft's defaults,
// still loose enough for -race on a loaded two-core machine (an election takes under a second;
// with 200 ms timeouts and a 100 ms lease, leaders stepped down under load in stress runs).
func FastTimeouts(cfg *raftmeta.Config) {
	cfg.HeartbeatTimeout = 300 * time.Millisecond
	cfg.ElectionTimeout = 300 * time.Millisecond
	cfg.LeaderLeaseTimeout = 300 * time.Millisecond
	cfg.CommitTimeout = 5 * time.Millisecond
}

// QuietLogger discards everything: raft logs errors while nodes shut down in tests.
func QuietLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// Cluster is a set of nodes in one process. Node i is nil while shut down.
type Cluster struct {
	t     testing.TB
	mu    sync.Mutex // protects nodes
	nodes []*raftmeta.Node
	cfgs  []raftmeta.Config
	links []*Links
}

// Option changes every node's Config before it opens.
type Option func(i int, cfg *raftmeta.Config)

// MakeCluster starts n nodes (ids m1..mn, RPC addresses "rpc-mi" as placeholders), bootstraps
// them as one cluster, waits for a leader, and registers Shutdown of every node with t.Cleanup.
func MakeCluster(t testing.TB, n int, opts ...Option) *Cluster {
	t.Helper()
	c := &Cluster{t: t}
	dir := t.TempDir()
	var peers []raftmeta.Peer
	for i := 0; i < n; i++ {
		links := newLinks()
		cfg := raftmeta.Config{
			ID:            fmt.Sprintf("m%d", i+1),
			RaftAddr:      "127.0.0.1:0",
			RPCAddr:       fmt.Sprintf("rpc-m%d", i+1),
			DataDir:       filepath.Join(dir, fmt.Sprintf("m%d", i+1)),
			Logger:        QuietLogger(),
			WrapTransport: links.wrap,
		}
		FastTimeouts(&cfg)
		for _, o := range opts {
			o(i, &cfg)
		}
		node, err := raftmeta.Open(cfg)
		if err != nil {
			c.closeAll()
			t.Fatalf("open node %d: %v", i, err)
		}
		// Restarts must come back on the same address: the cluster configuration names it.
		cfg.RaftAddr = node.RaftAddr()
		c.nodes = append(c.nodes, node)
		c.cfgs = append(c.cfgs, cfg)
		c.links = append(c.links, links)
		peers = append(peers, raftmeta.Peer{ID: cfg.ID, RaftAddr: cfg.RaftAddr, RPCAddr: cfg.RPCAddr})
	}
	t.Cleanup(c.closeAll)
	for i, node := range c.nodes {
		c.cfgs[i].Peers = peers
		if err := node.Bootstrap(peers); err != nil {
			t.Fatalf("bootstrap node %d: %v", i, err)
		}
	}
	c.Leader()
	return c
}

func (c *Cluster) closeAll() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for i, n := range c.nodes {
		if n != nil {
			if err := n.Close(); err != nil {
				c.t.Errorf("close node %d: %v", i, err)
			}
			c.nodes[i] = nil
		}
	}
}

// Node returns node i (nil while shut down).
func (c *Cluster) Node(i int) *raftmeta.Node {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.nodes[i]
}

// Live returns the indexes of running nodes.
func (c *Cluster) Live() []int {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []int
	for i, n := range c.nodes {
		if n != nil {
			out = append(out, i)
		}
	}
	return out
}

// Config returns node i's config (its RaftAddr is the bound address).
func (c *Cluster) Config(i int) raftmeta.Config { return c.cfgs[i] }

// Index returns the index of the node with id.
func (c *Cluster) Index(id string) int {
	for i, cfg := range c.cfgs {
		if cfg.ID == id {
			return i
		}
	}
	return -1
}

// leaderWait bounds how long helpers wait for elections and replication.
const leaderWait = 30 * time.Second

// Leader waits until a running node is leader and every running node that can reach a quorum
// agrees, and returns its index. It fails the test after 30s.
func (c *Cluster) Leader() int {
	c.t.Helper()
	return c.LeaderAmong(c.Live()...)
}

// LeaderAmong is Leader restricted to the given nodes (e.g. the majority side of a partition).
func (c *Cluster) LeaderAmong(idx ...int) int {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), leaderWait)
	defer cancel()
	for {
		var ids []string
		for _, i := range idx {
			n := c.Node(i)
			if n == nil {
				continue
			}
			id, err := n.WaitLeader(ctx)
			if err != nil {
				c.t.Fatalf("node %d: %v", i, err)
			}
			ids = append(ids, id)
		}
		agreed := len(ids) > 0
		for _, id := range ids {
			agreed = agreed && id == ids[0]
		}
		if agreed {
			if li := c.Index(ids[0]); li >= 0 && c.Node(li) != nil {
				// Confirm with a quorum, so a deposed leader that has not noticed yet is not
				// returned.
				if err := c.Node(li).VerifyLeader(ctx); err == nil {
					return li
				}
			}
		}
		// Views differ during an election; wait a heartbeat and look again (bounded by ctx).
		select {
		case <-ctx.Done():
			c.t.Fatalf("no agreed leader among %v: %v", idx, ids)
		case <-time.After(c.cfgs[0].HeartbeatTimeout / 4):
		}
	}
}

// Apply applies cmd on the current leader, retrying while leadership moves. It fails the test
// on any other error.
func (c *Cluster) Apply(cmd raftmeta.Command) raftmeta.Result {
	c.t.Helper()
	return c.ApplyAmong(c.Live(), cmd)
}

// ApplyAmong is Apply with the leader taken among the given nodes (the majority side of a
// partition).
func (c *Cluster) ApplyAmong(idx []int, cmd raftmeta.Command) raftmeta.Result {
	c.t.Helper()
	var res raftmeta.Result
	c.OnLeader(idx, fmt.Sprintf("apply %T", cmd), func(n *raftmeta.Node) error {
		var err error
		res, err = n.Apply(context.Background(), cmd)
		return err
	})
	return res
}

// OnLeader runs fn on the leader among idx, again on the next leader whenever fn fails because
// leadership moved (base.ErrNotLeader, base.ErrUnavailable), for up to 30s. Any other error
// fails the test. Only idempotent operations belong here: a retry after ErrUnavailable may
// repeat one that committed.
func (c *Cluster) OnLeader(idx []int, what string, fn func(*raftmeta.Node) error) {
	c.t.Helper()
	deadline := time.Now().Add(leaderWait)
	for {
		err := fn(c.Node(c.LeaderAmong(idx...)))
		if err == nil {
			return
		}
		if !errors.Is(err, base.ErrNotLeader) && !errors.Is(err, base.ErrUnavailable) || time.Now().After(deadline) {
			c.t.Fatalf("%s: %v", what, err)
		}
	}
}

// WaitApplied waits until every running node has applied index.
func (c *Cluster) WaitApplied(index uint64) {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), leaderWait)
	defer cancel()
	for _, i := range c.Live() {
		if err := c.Node(i).WaitApplied(ctx, index); err != nil {
			c.t.Fatalf("node %d: %v", i, err)
		}
	}
}

// Shutdown closes node i (its data dir stays).
func (c *Cluster) Shutdown(i int) {
	c.t.Helper()
	c.mu.Lock()
	n := c.nodes[i]
	c.nodes[i] = nil
	c.mu.Unlock()
	if n == nil {
		c.t.Fatalf("node %d is not running", i)
	}
	if err := n.Close(); err != nil {
		c.t.Fatalf("close node %d: %v", i, err)
	}
}

// Restart reopens node i from its data dir on its old address.
func (c *Cluster) Restart(i int) *raftmeta.Node {
	c.t.Helper()
	if c.Node(i) != nil {
		c.t.Fatalf("node %d is running", i)
	}
	n, err := raftmeta.Open(c.cfgs[i])
	if err != nil {
		c.t.Fatalf("restart node %d: %v", i, err)
	}
	c.mu.Lock()
	c.nodes[i] = n
	c.mu.Unlock()
	return n
}

// Disconnect cuts node i off from every other node, both directions.
func (c *Cluster) Disconnect(i int) { c.Partition([]int{i}) }

// Partition cuts the links between the nodes in far and all others, both directions. Links
// within each side stay up.
func (c *Cluster) Partition(far []int) {
	isFar := map[int]bool{}
	for _, i := range far {
		isFar[i] = true
	}
	for i := range c.cfgs {
		for j := range c.cfgs {
			if isFar[i] != isFar[j] {
				c.links[i].block(raft.ServerAddress(c.cfgs[j].RaftAddr))
			}
		}
	}
}

// Heal restores every link.
func (c *Cluster) Heal() {
	for _, l := range c.links {
		l.heal()
	}
}

// State is everything a node's FSM holds, read through the public API.
type State struct {
	Objects  []raftmeta.Object // in key order
	Segments []raftmeta.Segment
	Masters  []raftmeta.Master
}

// StateOf reads node n's whole FSM. Call it while no writes are being applied.
func StateOf(n *raftmeta.Node) State {
	var s State
	n.Range("", func(o raftmeta.Object) bool {
		s.Objects = append(s.Objects, o)
		return true
	})
	s.Segments = n.Segments()
	s.Masters = n.Masters()
	return s
}

// DiffState returns "" when a and b are equal, else a description of the first difference.
func DiffState(a, b State) string {
	if !reflect.DeepEqual(a.Segments, b.Segments) {
		return fmt.Sprintf("segments differ:\n%+v\n%+v", a.Segments, b.Segments)
	}
	if !reflect.DeepEqual(a.Masters, b.Masters) {
		return fmt.Sprintf("masters differ:\n%+v\n%+v", a.Masters, b.Masters)
	}
	if len(a.Objects) != len(b.Objects) {
		return fmt.Sprintf("%d objects vs %d", len(a.Objects), len(b.Objects))
	}
	for i := range a.Objects {
		if !reflect.DeepEqual(a.Objects[i], b.Objects[i]) {
			return fmt.Sprintf("object %d differs:\n%+v\n%+v", i, a.Objects[i], b.Objects[i])
		}
	}
	return ""
}

// WaitFor waits until cond(node i) holds, re-checking after every entry node i applies (no
// sleeping). It fails the test after 30s.
func (c *Cluster) WaitFor(i int, what string, cond func(*raftmeta.Node) bool) {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), leaderWait)
	defer cancel()
	n := c.Node(i)
	for !cond(n) {
		if err := n.WaitApplied(ctx, n.AppliedIndex()+1); err != nil {
			c.t.Fatalf("node %d: waiting for %s: %v", i, what, err)
		}
	}
}

// AddNode opens a new node with no peers (it waits to be added), on a fresh data dir and a new
// port, and returns its index. Add it with the leader's AddVoter.
func (c *Cluster) AddNode(opts ...Option) int {
	c.t.Helper()
	i := len(c.cfgs)
	links := newLinks()
	cfg := c.cfgs[0]
	cfg.ID = fmt.Sprintf("m%d", i+1)
	cfg.RaftAddr = "127.0.0.1:0"
	cfg.RPCAddr = fmt.Sprintf("rpc-m%d", i+1)
	cfg.DataDir = filepath.Join(filepath.Dir(c.cfgs[0].DataDir), cfg.ID)
	cfg.Peers = nil
	cfg.WrapTransport = links.wrap
	for _, o := range opts {
		o(i, &cfg)
	}
	n, err := raftmeta.Open(cfg)
	if err != nil {
		c.t.Fatalf("open node %d: %v", i, err)
	}
	cfg.RaftAddr = n.RaftAddr()
	c.mu.Lock()
	c.nodes = append(c.nodes, n)
	c.mu.Unlock()
	c.cfgs = append(c.cfgs, cfg)
	c.links = append(c.links, links)
	return i
}
