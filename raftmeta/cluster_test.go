package raftmeta_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/mooncake-go/mooncake/internal/base"
	"github.com/mooncake-go/mooncake/raftmeta"
	"github.com/mooncake-go/mooncake/raftmeta/raftmetatest"
)

// putN commits n objects key-<from>..key-<from+n-1> in batches of up to 16 and returns the
// last index.
func putN(t *testing.T, c *raftmetatest.Cluster, from, n int) uint64 {
	t.Helper()
	var idx uint64
	for i := from; i < from+n; i += 16 {
		var items []base.Object
		for j := i; j < min(i+16, from+n); j++ {
			items = append(items, put(fmt.Sprintf("key-%05d", j), base.Version(j+1), "w1", "w2"))
		}
		res := c.Apply(raftmeta.PutEnd{Items: items, Now: 1})
		if res.Failed() != 0 {
			t.Fatalf("put: %v", res.Items)
		}
		idx = res.Index
	}
	return idx
}

func registerWorkers(c *raftmetatest.Cluster) {
	for _, w := range []base.WorkerID{"w1", "w2", "w3"} {
		c.Apply(raftmeta.RegisterWorker{ID: w, Address: "127.0.0.1:9" + string(w[1]), DRAMCapacity: 1 << 30})
	}
}

// equalAll checks that every running node holds the same FSM state as node ref.
func equalAll(t *testing.T, c *raftmetatest.Cluster, ref int) {
	t.Helper()
	want := raftmetatest.StateOf(c.Node(ref))
	for _, i := range c.Live() {
		if d := raftmetatest.DiffState(want, raftmetatest.StateOf(c.Node(i))); d != "" {
			t.Fatalf("node %d differs from node %d: %s", i, ref, d)
		}
	}
}

func TestClusterCommitVisibleEverywhere(t *testing.T) {
	c := raftmetatest.MakeCluster(t, 3)
	registerWorkers(c)
	idx := putN(t, c, 0, 100)
	c.WaitApplied(idx)
	for _, i := range c.Live() {
		o, ok := c.Node(i).Lookup("key-00042")
		if !ok || o.Version != 43 || len(o.Replicas) != 2 {
			t.Fatalf("node %d: %+v %v", i, o, ok)
		}
		if s := c.Node(i).Stats(); s.Keys != 100 || s.Segments != 3 {
			t.Fatalf("node %d stats %+v", i, s)
		}
	}
	equalAll(t, c, c.Leader())

	// A follower refuses writes and names the leader and its client address (registered by
	// the leader when it won the election).
	li := c.Leader()
	f := (li + 1) % 3
	leaderID := c.Config(li).ID
	c.WaitFor(f, "leader address", func(n *raftmeta.Node) bool {
		_, addr := n.Leader()
		return addr != ""
	})
	_, err := c.Node(f).Apply(ctxT(t), raftmeta.Remove{Keys: []string{"key-00001"}})
	var nl *raftmeta.NotLeaderError
	if !errors.Is(err, base.ErrNotLeader) || !errors.As(err, &nl) || nl.LeaderID != leaderID || nl.LeaderRPCAddr != "rpc-"+leaderID {
		t.Fatalf("follower apply: %v (%+v)", err, nl)
	}
	if _, err := c.Node(f).NewVersion(); !errors.Is(err, base.ErrNotLeader) {
		t.Fatalf("follower NewVersion: %v", err)
	}
	if err := c.Node(f).VerifyLeader(ctxT(t)); !errors.Is(err, base.ErrNotLeader) {
		t.Fatalf("follower VerifyLeader: %v", err)
	}
	if err := c.Node(li).VerifyLeader(ctxT(t)); err != nil {
		t.Fatal(err)
	}
}

func TestClusterLeaderFailover(t *testing.T) {
	c := raftmetatest.MakeCluster(t, 3)
	registerWorkers(c)
	idx := putN(t, c, 0, 200)
	old := c.Leader()
	v1, err := c.Node(old).NewVersion()
	if err != nil {
		t.Fatal(err)
	}
	c.WaitApplied(idx) // so the survivors' state can be compared below
	c.Shutdown(old)

	nl := c.Leader()
	if nl == old {
		t.Fatal("the shut down node is leader")
	}
	n := c.Node(nl)
	for i := 0; i < 200; i++ {
		if _, ok := n.Lookup(fmt.Sprintf("key-%05d", i)); !ok {
			t.Fatalf("new leader lost key-%05d", i)
		}
	}
	v2, err := n.NewVersion()
	if err != nil {
		t.Fatal(err)
	}
	if v2 <= v1 {
		t.Fatalf("version after failover %d <= %d", v2, v1)
	}
	idx = putN(t, c, 200, 50)
	c.WaitApplied(idx)
	equalAll(t, c, nl)
	if s := n.Stats(); s.Keys != 250 {
		t.Fatalf("keys %d", s.Keys)
	}

	// The old leader comes back as a follower and catches up.
	c.Restart(old)
	c.WaitApplied(idx)
	equalAll(t, c, nl)
}

func TestClusterRestartCatchesUp(t *testing.T) {
	c := raftmetatest.MakeCluster(t, 3)
	registerWorkers(c)
	putN(t, c, 0, 100)
	f := (c.Leader() + 1) % 3
	c.Shutdown(f)
	putN(t, c, 100, 100)
	c.Apply(raftmeta.Remove{Keys: []string{"key-00007"}})
	res := c.Apply(raftmeta.MarkWorkerDead{ID: "w2"})
	if res.Dropped != 199 || res.Removed != 0 {
		t.Fatalf("mark dead: %+v", res)
	}
	idx := res.Index
	c.Restart(f)
	c.WaitApplied(idx)
	equalAll(t, c, c.Leader())
	if o, ok := c.Node(f).Lookup("key-00150"); !ok || len(o.Replicas) != 1 || o.Replicas[0] != "w1" {
		t.Fatalf("restarted node: %+v %v", o, ok)
	}
}

// TestClusterSnapshotEqualsReplay: a follower that missed many entries gets the leader's
// snapshot plus the log after it; its FSM must equal (deep compare) a follower's that applied
// every entry one by one, and the leader's, and survive a restart from its own snapshot.
func TestClusterSnapshotEqualsReplay(t *testing.T) {
	c := raftmetatest.MakeCluster(t, 3, func(i int, cfg *raftmeta.Config) {
		cfg.TrailingLogs = 4 // compact hard so the lagging follower needs the snapshot
		cfg.SnapshotThreshold = 1 << 20
		cfg.SnapshotInterval = time.Hour // snapshots only when the test asks
	})
	registerWorkers(c)
	putN(t, c, 0, 300)
	li := c.Leader()
	lag, full := (li+1)%3, (li+2)%3
	c.Shutdown(lag)
	putN(t, c, 300, 300)
	c.Apply(raftmeta.SetPin{Key: "key-00010", SoftPinUntil: 99, HardPin: true})
	c.Apply(raftmeta.DropReplicas{Worker: "w1", Items: []base.KeyVersion{{Key: "key-00011"}, {Key: "key-00012", Version: 13}}})
	c.Apply(raftmeta.RemoveRegex{Pattern: "^key-0005"})
	if err := c.Node(c.Leader()).Snapshot(); err != nil {
		t.Fatal(err)
	}
	// Entries after the snapshot reach the lagging node through the log.
	c.Apply(raftmeta.RegisterWorker{ID: "w4", Address: "127.0.0.1:94"})
	c.Apply(raftmeta.UnregisterWorker{ID: "w3"})
	idx := putN(t, c, 600, 10)

	c.Restart(lag)
	c.WaitApplied(idx)
	if s := c.Node(lag).Stats(); s.LastSnapshot == 0 {
		t.Fatalf("lagging node did not install a snapshot: %+v", s)
	}
	want := raftmetatest.StateOf(c.Node(full))
	if d := raftmetatest.DiffState(want, raftmetatest.StateOf(c.Node(lag))); d != "" {
		t.Fatalf("snapshot+log node differs from replay node: %s", d)
	}
	equalAll(t, c, full)

	// A restart restores the node's own snapshot and replays its log tail.
	c.Shutdown(lag)
	c.Restart(lag)
	c.WaitApplied(idx)
	if d := raftmetatest.DiffState(want, raftmetatest.StateOf(c.Node(lag))); d != "" {
		t.Fatalf("after restart: %s", d)
	}
}

// TestClusterMinorityCannotCommit cuts the leader off (real TCP transports wrapped by
// raftmetatest's link cutter): it cannot commit, the majority elects a leader and commits, and
// after healing the old leader catches up and its uncommitted write is gone.
func TestClusterMinorityCannotCommit(t *testing.T) {
	c := raftmetatest.MakeCluster(t, 3)
	registerWorkers(c)
	idx := putN(t, c, 0, 10)
	c.WaitApplied(idx)
	old := c.Leader()
	c.Disconnect(old)

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	res, err := c.Node(old).Apply(ctx, raftmeta.PutEnd{Items: []base.Object{put("lost", 1000, "w1")}})
	if err == nil {
		t.Fatalf("isolated leader committed: %+v", res)
	}
	if !errors.Is(err, base.ErrNotLeader) && !errors.Is(err, base.ErrUnavailable) && !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("isolated leader: %v", err)
	}

	var rest []int
	for _, i := range c.Live() {
		if i != old {
			rest = append(rest, i)
		}
	}
	res2 := c.ApplyAmong(rest, raftmeta.PutEnd{Items: []base.Object{put("kept", 1001, "w1")}})
	if res2.Err != nil {
		t.Fatalf("majority write: %v", res2.Err)
	}
	nl := c.LeaderAmong(rest...)

	c.Heal()
	c.WaitApplied(res2.Index)
	c.Leader()
	for _, i := range c.Live() {
		if _, ok := c.Node(i).Lookup("lost"); ok {
			t.Fatalf("node %d has the minority's uncommitted write", i)
		}
		if _, ok := c.Node(i).Lookup("kept"); !ok {
			t.Fatalf("node %d lacks the majority's write", i)
		}
	}
	equalAll(t, c, nl)
}

func TestClusterMembership(t *testing.T) {
	c := raftmetatest.MakeCluster(t, 3)
	registerWorkers(c)
	idx := putN(t, c, 0, 20)
	voters := c.Live()
	ni := c.AddNode()
	c.OnLeader(voters, "add voter", func(n *raftmeta.Node) error {
		return n.AddVoter(ctxT(t), c.Config(ni).ID, c.Config(ni).RaftAddr)
	})
	c.WaitApplied(idx)
	li := c.Leader()
	equalAll(t, c, li)
	if s := c.Node(li).Stats(); s.NumPeers != 4 {
		t.Fatalf("peers %d", s.NumPeers)
	}
	// Followers cannot change membership.
	if err := c.Node(ni).AddVoter(ctxT(t), "m9", "127.0.0.1:1"); !errors.Is(err, base.ErrNotLeader) {
		t.Fatalf("follower AddVoter: %v", err)
	}
	c.OnLeader(voters, "remove server", func(n *raftmeta.Node) error {
		return n.RemoveServer(ctxT(t), c.Config(ni).ID)
	})
	srv, err := c.Node(c.LeaderAmong(voters...)).Servers()
	if err != nil || len(srv) != 3 {
		t.Fatalf("servers %v %v", srv, err)
	}
	c.Shutdown(ni)
	idx = putN(t, c, 20, 5)
	c.WaitApplied(idx)
}

// TestClusterRemovedPeerStaysRemoved: a bootstrap peer removed at run time is not put back in
// the masters table by the next leader (Config.Peers is only the initial membership).
func TestClusterRemovedPeerStaysRemoved(t *testing.T) {
	c := raftmetatest.MakeCluster(t, 3)
	li := c.Leader()
	// Leadership is reported after the leader registered the masters of Config.Peers: wait
	// for it, so that registration cannot race with the removal below.
	select {
	case <-c.Node(li).LeaderCh():
	case <-ctxT(t).Done():
		t.Fatal("leader never reported")
	}
	var gone, stay int = -1, -1
	for _, i := range c.Live() {
		switch {
		case i == li:
		case gone < 0:
			gone = i
		default:
			stay = i
		}
	}
	goneID := c.Config(gone).ID
	if err := c.Node(li).RemoveServer(ctxT(t), goneID); err != nil {
		t.Fatal(err)
	}
	c.Shutdown(gone)
	listed := func(n *raftmeta.Node) bool {
		for _, m := range n.Masters() {
			if m.ID == goneID {
				return true
			}
		}
		return false
	}
	if listed(c.Node(li)) {
		t.Fatalf("%s still listed after its removal: %v", goneID, c.Node(li).Masters())
	}
	select { // drop what stay reported so far
	case <-c.Node(stay).LeaderCh():
	default:
	}
	if err := c.Node(li).LeadershipTransfer(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	select {
	case v := <-c.Node(stay).LeaderCh():
		if !v {
			t.Fatal("the other voter reported false")
		}
	case <-ctxT(t).Done():
		t.Fatal("no new leader")
	}
	// The new leader registers masters before it reports leadership.
	if listed(c.Node(stay)) {
		t.Fatalf("the new leader put %s back: %v", goneID, c.Node(stay).Masters())
	}
}

// TestClusterLeaderCh: the node that takes over after the leader goes reports true on its
// LeaderCh, after which its FSM already holds every committed entry.
func TestClusterLeaderCh(t *testing.T) {
	c := raftmetatest.MakeCluster(t, 3)
	registerWorkers(c)
	idx := putN(t, c, 0, 40)
	old := c.Leader()
	// Drain the survivors' channels of what they reported so far (false or nothing).
	for _, i := range c.Live() {
		if i != old {
			select {
			case <-c.Node(i).LeaderCh():
			default:
			}
		}
	}
	c.Shutdown(old)
	nl := c.Leader()
	select {
	case v := <-c.Node(nl).LeaderCh():
		if !v {
			t.Fatal("new leader reported false")
		}
	case <-ctxT(t).Done():
		t.Fatal("no LeaderCh signal")
	}
	if got := c.Node(nl).AppliedIndex(); got < idx {
		t.Fatalf("new leader signalled with applied index %d < committed %d", got, idx)
	}
}

func TestApplyContext(t *testing.T) {
	c := raftmetatest.MakeCluster(t, 1)
	n := c.Node(c.Leader())
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := n.Apply(ctx, raftmeta.RemoveAll{}); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled ctx: %v", err)
	}
	if err := n.VerifyLeader(ctx); !errors.Is(err, context.Canceled) && err != nil {
		t.Fatalf("cancelled VerifyLeader: %v", err)
	}
	if err := n.WaitApplied(ctx, n.AppliedIndex()+100); !errors.Is(err, context.Canceled) {
		t.Fatalf("WaitApplied: %v", err)
	}
}

// TestClusterSnapshotUnderLoad takes automatic snapshots (tiny thresholds) while four writers
// commit, and a follower that was down catches up through a snapshot taken under load: every
// node ends equal. Under -race it also checks Persist against concurrent applies.
func TestClusterSnapshotUnderLoad(t *testing.T) {
	c := raftmetatest.MakeCluster(t, 3, func(i int, cfg *raftmeta.Config) {
		cfg.SnapshotThreshold = 16
		cfg.SnapshotInterval = 50 * time.Millisecond
		cfg.TrailingLogs = 8
	})
	registerWorkers(c)
	lag := (c.Leader() + 1) % 3
	c.Shutdown(lag)
	errc := make(chan error, 4)
	for w := range 4 {
		go func() {
			for i := range 40 {
				var items []base.Object
				for j := range 8 {
					items = append(items, put(fmt.Sprintf("w%d-%03d-%d", w, i, j), base.Version(1+w*1000+i*8+j), "w1", "w3"))
				}
				res, err := c.Node(c.Leader()).Apply(ctxT(t), raftmeta.PutEnd{Items: items})
				if err == nil && res.Failed() != 0 {
					err = res.Err
				}
				if err != nil && !errors.Is(err, base.ErrNotLeader) && !errors.Is(err, base.ErrUnavailable) {
					errc <- err
					return
				}
			}
			errc <- nil
		}()
	}
	for range 4 {
		if err := <-errc; err != nil {
			t.Fatal(err)
		}
	}
	res := c.Apply(raftmeta.SetPin{Key: "w0-000-0", HardPin: true})
	c.Restart(lag)
	c.WaitApplied(res.Index)
	// Raft records the installed snapshot after the FSM restore returns; one more entry
	// applied after it orders the check below after that bookkeeping.
	res = c.Apply(raftmeta.SetPin{Key: "w0-000-0"})
	c.WaitApplied(res.Index)
	if s := c.Node(lag).Stats(); s.LastSnapshot == 0 {
		t.Fatalf("lagging node caught up without a snapshot: %+v", s)
	}
	equalAll(t, c, c.Leader())
}
