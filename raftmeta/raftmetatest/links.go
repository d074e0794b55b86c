package raftmetatest

import (
	"fmt"
	"io"
	"sync"

	"github.com/hashicorp/raft"
)

// errCut is what an RPC over a cut link returns, like a connection refused.
var errCut = fmt.Errorf("raftmetatest: link cut")

// Links is one node's view of which peers it cannot reach. It wraps the node's real TCP
// transport (Config.WrapTransport): every outgoing RPC to a blocked address fails at once;
// appends carrying entries to a held address wait (Hold).
// Since every node of a Cluster is wrapped, cutting both directions of a link blocks it
// everywhere; nothing is delivered over a cut link, and raft's connection pool is untouched, so
// healing needs no reconnect logic.
type Links struct {
	mu      sync.Mutex // protects blocked, held and release
	blocked map[raft.ServerAddress]bool
	held    map[raft.ServerAddress]bool
	// release is closed when held appends may go (Release, Heal); nil while none is held.
	release chan struct{}
}

func newLinks() *Links {
	return &Links{blocked: map[raft.ServerAddress]bool{}, held: map[raft.ServerAddress]bool{}}
}

// NewLinks returns links with nothing cut, for a node a test opens itself (a server's
// master): pass Wrap as its Config.WrapTransport, then Cut and Heal. Cluster makes its own.
func NewLinks() *Links { return newLinks() }

// Wrap is a Config.WrapTransport: the node's RPCs to a cut address fail at once.
func (l *Links) Wrap(t raft.Transport) raft.Transport { return l.wrap(t) }

// Cut cuts the links to every address of addrs (one direction: cut the peers' links back to
// this node too to stop both).
func (l *Links) Cut(addrs ...string) {
	for _, a := range addrs {
		l.block(raft.ServerAddress(a))
	}
}

// Heal restores every link, held ones included.
func (l *Links) Heal() { l.heal() }

// Hold holds back this node's appends that carry log entries to every address of addrs, until
// Release or Heal: they wait, they do not fail. Heartbeats carry no entries and pass, so a
// leader keeps its lease and its followers stay quiet while nothing it proposes commits (a
// slow disk or network, as a caller's deadline meets it). A test that holds releases before
// its cluster shuts down (raft waits for its replication goroutines).
func (l *Links) Hold(addrs ...string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, a := range addrs {
		l.held[raft.ServerAddress(a)] = true
	}
	if l.release == nil {
		l.release = make(chan struct{})
	}
}

// Release lets every held append go.
func (l *Links) Release() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.releaseLocked()
}

func (l *Links) releaseLocked() {
	clear(l.held)
	if l.release != nil {
		close(l.release)
		l.release = nil
	}
}

// waitHeld waits while an append of n entries to addr is held.
func (l *Links) waitHeld(addr raft.ServerAddress, n int) {
	if n == 0 {
		return
	}
	l.mu.Lock()
	ch := l.release
	held := l.held[addr]
	l.mu.Unlock()
	if held {
		<-ch
	}
}

// block cuts the link to addr.
func (l *Links) block(addr raft.ServerAddress) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.blocked[addr] = true
}

// heal restores every link.
func (l *Links) heal() {
	l.mu.Lock()
	defer l.mu.Unlock()
	clear(l.blocked)
	l.releaseLocked()
}

func (l *Links) cut(addr raft.ServerAddress) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.blocked[addr]
}

func (l *Links) wrap(t raft.Transport) raft.Transport { return &cutTransport{Transport: t, l: l} }

// cutTransport is raft.Transport with cut links. It forwards the optional interfaces raft
// checks for (WithClose, WithPreVote).
type cutTransport struct {
	raft.Transport
	l *Links
}

var (
	_ raft.WithClose   = (*cutTransport)(nil)
	_ raft.WithPreVote = (*cutTransport)(nil)
)

func (c *cutTransport) Close() error {
	if wc, ok := c.Transport.(raft.WithClose); ok {
		return wc.Close()
	}
	return nil
}

func (c *cutTransport) RequestPreVote(id raft.ServerID, target raft.ServerAddress, args *raft.RequestPreVoteRequest, resp *raft.RequestPreVoteResponse) error {
	if c.l.cut(target) {
		return errCut
	}
	pv, ok := c.Transport.(raft.WithPreVote)
	if !ok {
		return fmt.Errorf("raftmetatest: transport has no pre-vote")
	}
	return pv.RequestPreVote(id, target, args, resp)
}

func (c *cutTransport) AppendEntriesPipeline(id raft.ServerID, target raft.ServerAddress) (raft.AppendPipeline, error) {
	if c.l.cut(target) {
		return nil, errCut
	}
	p, err := c.Transport.AppendEntriesPipeline(id, target)
	if err != nil {
		return nil, err
	}
	return &cutPipeline{AppendPipeline: p, l: c.l, target: target}, nil
}

func (c *cutTransport) AppendEntries(id raft.ServerID, target raft.ServerAddress, args *raft.AppendEntriesRequest, resp *raft.AppendEntriesResponse) error {
	if c.l.cut(target) {
		return errCut
	}
	c.l.waitHeld(target, len(args.Entries))
	return c.Transport.AppendEntries(id, target, args, resp)
}

func (c *cutTransport) RequestVote(id raft.ServerID, target raft.ServerAddress, args *raft.RequestVoteRequest, resp *raft.RequestVoteResponse) error {
	if c.l.cut(target) {
		return errCut
	}
	return c.Transport.RequestVote(id, target, args, resp)
}

func (c *cutTransport) InstallSnapshot(id raft.ServerID, target raft.ServerAddress, args *raft.InstallSnapshotRequest, resp *raft.InstallSnapshotResponse, data io.Reader) error {
	if c.l.cut(target) {
		return errCut
	}
	return c.Transport.InstallSnapshot(id, target, args, resp, data)
}

func (c *cutTransport) TimeoutNow(id raft.ServerID, target raft.ServerAddress, args *raft.TimeoutNowRequest, resp *raft.TimeoutNowResponse) error {
	if c.l.cut(target) {
		return errCut
	}
	return c.Transport.TimeoutNow(id, target, args, resp)
}

// cutPipeline fails appends once the link is cut; the leader then drops the pipeline and
// retries with plain AppendEntries, which the transport blocks too.
type cutPipeline struct {
	raft.AppendPipeline
	l      *Links
	target raft.ServerAddress
}

func (p *cutPipeline) AppendEntries(args *raft.AppendEntriesRequest, resp *raft.AppendEntriesResponse) (raft.AppendFuture, error) {
	if p.l.cut(p.target) {
		return nil, errCut
	}
	p.l.waitHeld(p.target, len(args.Entries))
	return p.AppendPipeline.AppendEntries(args, resp)
}
