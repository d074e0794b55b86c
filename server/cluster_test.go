package server

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"math/rand/v2"
	"os"
	"slices"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/mooncake-go/mooncake/dram"
	"github.com/mooncake-go/mooncake/internal/base"
	"github.com/mooncake-go/mooncake/internal/testutil"
	"github.com/mooncake-go/mooncake/raftmeta"
	"github.com/mooncake-go/mooncake/raftmeta/raftmetatest"
	"github.com/mooncake-go/mooncake/server/master"
	"github.com/mooncake-go/mooncake/server/worker"
	"github.com/mooncake-go/mooncake/transfer"
)

// testLogger discards logs unless MOONCAKE_TEST_LOG is set.
func testLogger() *slog.Logger {
	if os.Getenv("MOONCAKE_TEST_LOG") != "" {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	return slog.New(slog.NewTextHandler(io.Discard, nil))
}

const testWait = 30 * time.Second

type testCluster struct {
	t       testing.TB
	masters []*master.Master
	mcfgs   []master.Config
	workers []*worker.Worker
	wcfgs   []worker.Config
}

// startMasters starts n masters on port 0 and bootstraps them as one cluster (the bootstrap
// peers carry their RPC addresses, as --peer_rpc_addresses gives them).
func startMasters(t testing.TB, n int, mut func(*master.Config)) *testCluster {
	t.Helper()
	return startMastersPeers(t, n, mut, true)
}

// startMastersPeers is startMasters; withRPC false bootstraps peers with raft addresses only
// (no --peer_rpc_addresses), so each master's RPC address is known only to itself.
func startMastersPeers(t testing.TB, n int, mut func(*master.Config), withRPC bool) *testCluster {
	t.Helper()
	c := &testCluster{t: t}
	t.Cleanup(c.shutdown) // before anything can fail: a half-started cluster is stopped too
	for i := range n {
		cfg := master.Config{
			ID: fmt.Sprintf("m%d", i+1), DataDir: t.TempDir(), RPCAddress: "127.0.0.1:0", RaftAddress: "127.0.0.1:0",
			MetricsAddress: "127.0.0.1:0", Logger: testLogger(), Test: master.TestKnobs{Raft: raftmetatest.FastTimeouts, NoBootstrap: true},
		}
		if mut != nil {
			mut(&cfg)
		}
		srv, err := Start(Config{Master: &cfg})
		if err != nil {
			t.Fatal(err)
		}
		c.masters = append(c.masters, srv.Master)
		c.mcfgs = append(c.mcfgs, cfg)
	}
	var peers []raftmeta.Peer
	for _, m := range c.masters {
		p := raftmeta.Peer{ID: m.ID(), RaftAddr: m.TestHooks().Node().RaftAddr()}
		if withRPC {
			p.RPCAddr = m.Addr()
		}
		peers = append(peers, p)
	}
	for _, m := range c.masters {
		// A node that already heard from a bootstrapped peer (a vote request) has raft state
		// and refuses; it joins through the peers' configuration anyway.
		if err := m.TestHooks().Node().Bootstrap(peers); err != nil && !errors.Is(err, raft.ErrCantBootstrap) {
			t.Fatal(err)
		}
	}
	return c
}

func (c *testCluster) masterAddrs() []string {
	var out []string
	for _, m := range c.masters {
		if m != nil {
			out = append(out, m.Addr())
		}
	}
	return out
}

// addWorker starts a worker registered with every master (Start) and waits for its
// registration (WaitReady).
func (c *testCluster) addWorker(rootFS string, mut func(*worker.Config)) *worker.Worker {
	c.t.Helper()
	cfg := worker.Config{
		ClusterID: base.DefaultClusterID, MasterAddresses: c.masterAddrs(), Address: "127.0.0.1:0",
		MetricsAddress: "127.0.0.1:0", GlobalSegmentSize: 32 << 20, RootFSDir: rootFS, HugePages: dram.HugePagesOff,
		HeartbeatInterval: 50 * time.Millisecond, Logger: testLogger(),
	}
	if mut != nil {
		mut(&cfg)
	}
	srv, err := Start(Config{Worker: &cfg})
	if err != nil {
		c.t.Fatal(err)
	}
	w := srv.Worker
	ctx, cancel := context.WithTimeout(context.Background(), testWait)
	defer cancel()
	if err := srv.WaitReady(ctx); err != nil {
		c.t.Fatal("worker did not register")
	}
	c.workers = append(c.workers, w)
	c.wcfgs = append(c.wcfgs, cfg)
	return w
}

func (c *testCluster) shutdown() {
	ctx, cancel := context.WithTimeout(context.Background(), testWait)
	defer cancel()
	for i, w := range c.workers {
		if w != nil {
			if err := w.Shutdown(ctx); err != nil {
				c.t.Errorf("worker %d shutdown: %v", i, err)
			}
		}
	}
	for i, m := range c.masters {
		if m != nil {
			if err := m.Shutdown(ctx); err != nil {
				c.t.Errorf("master %d shutdown: %v", i, err)
			}
		}
	}
}

// driver is a test-only client over transfer: it exercises the wire directly, with no client/
// retries hiding anything (only the failover benchmark uses client/, to time its
// rediscovery). It finds the leader, follows NOT_LEADER, and runs the put/get protocol of
// design.md section 2.
type driver struct {
	t       *testing.T
	cli     *transfer.Client
	masters []string
	leader  string
}

func newDriver(t *testing.T, masters []string) *driver {
	t.Helper()
	cli, err := transfer.NewClient(transfer.ClientOptions{Logger: testLogger(), StripeThreshold: 1 << 20, StripeChunk: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cli.Close() })
	return &driver{t: t, cli: cli, masters: masters}
}

// call sends req to the leader, retrying across masters until the deadline while no master
// leads (elections) or one is down.
func (d *driver) call(req, resp transfer.Message) error {
	ctx, cancel := context.WithTimeout(context.Background(), testWait)
	defer cancel()
	next := 0
	for {
		addr := d.leader
		if addr == "" {
			addr = d.masters[next%len(d.masters)]
			next++
		}
		cctx, ccancel := context.WithTimeout(ctx, 5*time.Second)
		err := d.cli.Call(cctx, addr, req, resp)
		ccancel()
		var nl *transfer.NotLeaderError
		switch {
		case err == nil:
			d.leader = addr
			return nil
		case errors.As(err, &nl):
			d.leader = nl.LeaderAddr
		case errors.Is(err, base.ErrUnavailable), errors.Is(err, base.ErrTimeout), isConnErr(err):
			d.leader = ""
		default:
			return err
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("no leader answered %s: %w (last: %v)", req.Op(), ctx.Err(), err)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

func isConnErr(err error) bool {
	var ce *base.CodeError
	return !errors.As(err, &ce) // not an answer from a server: the connection failed
}

func (d *driver) put(key string, val []byte, replicas int, upsert bool) error {
	ps := &transfer.PutStartResponse{}
	cfg := base.PutConfig{Replicas: uint8(replicas), Upsert: upsert}
	if err := d.call(&transfer.PutStartRequest{Object: base.Object{ObjectMeta: base.ObjectMeta{Key: key,
		Size: int64(len(val))}}, Config: cfg},
		ps); err != nil {
		return err
	}
	sum := base.Checksum(val)
	var ids []base.WorkerID
	for _, r := range ps.Replicas {
		ctx, cancel := context.WithTimeout(context.Background(), testWait)
		err := d.cli.Write(ctx, r.Address, transfer.WriteRequest{Key: key, Version: ps.Version, Checksum: sum}, val)
		cancel()
		if err != nil {
			_ = d.call(&transfer.PutRevokeRequest{Key: key, Version: ps.Version}, nil)
			return fmt.Errorf("write to %s: %w", r.WorkerID, err)
		}
		ids = append(ids, r.WorkerID)
	}
	return d.call(&transfer.PutEndRequest{Object: base.Object{ObjectMeta: base.ObjectMeta{Key: key,
		Version: ps.Version, Size: int64(len(val)), Checksum: sum}, Replicas: ids}, Config: cfg}, nil)
}

func (d *driver) lookup(key string) (*transfer.LookupResponse, error) {
	lr := &transfer.LookupResponse{}
	return lr, d.call(&transfer.LookupRequest{Key: key}, lr)
}

// readReplica reads key from one replica and verifies the checksum.
func (d *driver) readReplica(lr *transfer.LookupResponse, r base.Placement, key string) ([]byte, error) {
	buf := make([]byte, lr.Size)
	ctx, cancel := context.WithTimeout(context.Background(), testWait)
	defer cancel()
	rr, n, err := d.cli.Read(ctx, r.Address, transfer.ReadRequest{Key: key, Version: lr.Version}, buf)
	if err != nil {
		return nil, err
	}
	if int64(n) != lr.Size || rr.Version != lr.Version || base.Checksum(buf[:n]) != lr.Checksum {
		return nil, fmt.Errorf("%s from %s: %d bytes, version %d/%d, checksum mismatch=%v", key, r.WorkerID, n, rr.Version, lr.Version, base.Checksum(buf[:n]) != lr.Checksum)
	}
	return buf, nil
}

// get looks key up and reads every replica, checking each against want.
func (d *driver) mustGet(key string, want []byte, replicas int) {
	d.t.Helper()
	lr, err := d.lookup(key)
	if err != nil {
		d.t.Fatalf("lookup %s: %v", key, err)
	}
	if len(lr.Replicas) != replicas {
		d.t.Fatalf("lookup %s: %d replicas %v, want %d", key, len(lr.Replicas), lr.Replicas, replicas)
	}
	if lr.Checksum != base.Checksum(want) {
		d.t.Fatalf("lookup %s: checksum differs from the value put", key)
	}
	for _, r := range lr.Replicas {
		got, err := d.readReplica(lr, r, key)
		if err != nil {
			d.t.Fatalf("read %s: %v", key, err)
		}
		if !bytes.Equal(got, want) {
			d.t.Fatalf("read %s from %s: bytes differ", key, r.WorkerID)
		}
	}
}

func (d *driver) status() master.Status {
	d.t.Helper()
	sr := &transfer.StatusResponse{}
	if err := d.call(transfer.NewEmpty(transfer.OpStatus), sr); err != nil {
		d.t.Fatal(err)
	}
	var s master.Status
	if err := json.Unmarshal(sr.JSON, &s); err != nil {
		d.t.Fatal(err)
	}
	return s
}

func value(rng *rand.Rand, n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(rng.Uint32())
	}
	return b
}

// eventually waits (testutil.WaitFor, bounded by testWait) until cond holds: for effects
// carried by the 50 ms heartbeats or RPCs of the cluster's goroutines, which signal no event
// to the test.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	testutil.WaitFor(t, what, testWait, func() error {
		if !cond() {
			return errors.New("condition does not hold")
		}
		return nil
	})
}

// noDeathWithin fails t if dead (fed by master.Config.Test.OnWorkerDead) delivers a worker
// before d has passed: the verdict must not come within a window of real time (a TTL, a grace)
// of a real TCP cluster. It fails at the verdict, not at the end of the window.
func noDeathWithin(t *testing.T, what string, dead <-chan base.WorkerID, d time.Duration) {
	t.Helper()
	window := time.NewTimer(d)
	defer window.Stop()
	select {
	case id := <-dead:
		t.Fatalf("worker %s marked dead: %s", id, what)
	case <-window.C:
	}
}

// waitLeaderAmong waits until one of the masters idx leads and returns its index. Raft gives
// tests no election event that every master shares (LeaderCh has one reader, the master
// itself), so the wait polls IsLeader under testWait.
func (c *testCluster) waitLeaderAmong(idx ...int) int {
	c.t.Helper()
	leader := -1
	testutil.WaitFor(c.t, fmt.Sprintf("a leader among masters %v", idx), testWait, func() error {
		for _, i := range idx {
			if m := c.masters[i]; m != nil && m.IsLeader() {
				leader = i
				return nil
			}
		}
		return errors.New("none leads")
	})
	return leader
}

// waitLeader waits until some master leads and returns its index (leaderIndex, waited for).
func (c *testCluster) waitLeader() int {
	c.t.Helper()
	leader := -1
	testutil.WaitFor(c.t, "a leader", testWait, func() error {
		if leader = c.leaderIndex(); leader < 0 {
			return errors.New("no master leads")
		}
		return nil
	})
	return leader
}

// transferLeadership moves leadership off the current leader and returns that master's index
// once another master leads. A transfer that fails (raft gives the target one election
// timeout, which a loaded machine can miss: "leadership transfer timeout") is retried while the
// old master still leads; it may also have succeeded late, which ends the wait as well.
func (c *testCluster) transferLeadership(ctx context.Context) int {
	c.t.Helper()
	old := c.waitLeader()
	deadline := time.Now().Add(testWait)
	for {
		err := c.masters[old].TestHooks().Node().LeadershipTransfer(ctx)
		if c.waitLeader() != old {
			return old
		}
		if time.Now().After(deadline) {
			c.t.Fatalf("leadership never left master %d: %v", old, err)
		}
	}
}

// TestCluster drives a 3-master, 2-worker cluster through the whole master API, then shuts the
// leader down and checks that the new leader serves every object.
func TestCluster(t *testing.T) {
	// A short PutTimeout bounds a new leader's grace, during which it spares objects it does
	// not know (they may be puts the previous leader started): under load the test may see a
	// spurious election, and drops owed by the old leader then wait for the grace to end.
	c := startMasters(t, 3, func(cfg *master.Config) { cfg.PutTimeout = 10 * time.Second })
	w1 := c.addWorker(t.TempDir(), nil)
	w2 := c.addWorker("", nil)
	d := newDriver(t, c.masterAddrs())
	rng := rand.New(rand.NewPCG(1, 1))

	vals := map[string][]byte{}
	sizes := []int{1, 100, 64 << 10, 3<<20 + 7} // the last is striped (1 MiB threshold)
	for i := range 12 {
		key := fmt.Sprintf("obj/%02d", i)
		vals[key] = value(rng, sizes[i%len(sizes)])
		if err := d.put(key, vals[key], 2, false); err != nil {
			t.Fatalf("put %s: %v", key, err)
		}
	}
	for k, v := range vals {
		d.mustGet(k, v, 2)
	}
	// A retried PutEnd whose first attempt committed succeeds again.
	lr0, err := d.lookup("obj/03")
	if err != nil {
		t.Fatal(err)
	}
	if err := d.call(&transfer.PutEndRequest{Object: base.Object{ObjectMeta: base.ObjectMeta{Key: "obj/03",
		Version: lr0.Version, Size: lr0.Size, Checksum: lr0.Checksum}}}, nil); err != nil {
		t.Fatalf("retried PutEnd: %v", err)
	}

	// Duplicates are refused; upserts replace.
	if err := d.put("obj/00", []byte("again"), 1, false); !errors.Is(err, base.ErrObjectAlreadyExists) {
		t.Fatalf("duplicate put: %v", err)
	}
	vals["obj/00"] = []byte("replaced value")
	if err := d.put("obj/00", vals["obj/00"], 1, true); err != nil {
		t.Fatalf("upsert: %v", err)
	}
	d.mustGet("obj/00", vals["obj/00"], 1)
	// The replaced version is dropped from the worker that did not get the new one.
	lr00, _ := d.lookup("obj/00")
	other := w1
	if lr00.Replicas[0].WorkerID == w1.ID() {
		other = w2
	}
	eventually(t, "the replaced version is dropped", func() bool { return !other.TestHooks().Engine().Exists("obj/00") })

	// Bad input: replicas > workers, value over every segment, bad key.
	if err := d.put("x", []byte("v"), 3, false); !errors.Is(err, base.ErrNoSpace) {
		t.Fatalf("3 replicas on 2 workers: %v", err)
	}
	if err := d.put("big", make([]byte, 33<<20), 1, false); !errors.Is(err, base.ErrNoSpace) {
		t.Fatalf("value over every segment: %v", err)
	}
	if err := d.call(&transfer.PutStartRequest{Object: base.Object{ObjectMeta: base.ObjectMeta{Key: "", Size: 1}}},
		&transfer.PutStartResponse{}); !errors.Is(err, base.ErrInvalidKey) && !errors.Is(err, base.ErrInvalidParams) {
		t.Fatalf("empty key: %v", err)
	}
	if _, err := d.lookup("x"); !errors.Is(err, base.ErrObjectNotFound) {
		t.Fatalf("refused put visible: %v", err)
	}

	// Remove: gone from the metadata at once, and from the workers after a heartbeat.
	lr, _ := d.lookup("obj/01")
	if err := d.call(&transfer.RemoveRequest{Key: "obj/01"}, nil); err != nil {
		t.Fatal(err)
	}
	delete(vals, "obj/01")
	if _, err := d.lookup("obj/01"); !errors.Is(err, base.ErrObjectNotFound) {
		t.Fatalf("lookup after remove: %v", err)
	}
	eventually(t, "workers drop a removed object", func() bool {
		for _, r := range lr.Replicas {
			if _, err := d.readReplica(lr, r, "obj/01"); !errors.Is(err, base.ErrObjectNotFound) {
				return false
			}
		}
		return true
	})
	if err := d.call(&transfer.RemoveRequest{Key: "obj/01"}, nil); !errors.Is(err, base.ErrObjectNotFound) {
		t.Fatalf("second remove: %v", err)
	}

	// Regex remove.
	for i := range 5 {
		if err := d.put(fmt.Sprintf("tmp/%d", i), []byte("t"), 1, false); err != nil {
			t.Fatal(err)
		}
	}
	cr := transfer.NewCountResponse(transfer.OpRemoveByRegex, 0)
	if err := d.call(&transfer.RemoveByRegexRequest{Pattern: "^tmp/[0-3]$"}, cr); err != nil || cr.Count != 4 {
		t.Fatalf("regex remove: %d, %v", cr.Count, err)
	}
	if err := d.call(&transfer.RemoveByRegexRequest{Pattern: "(("}, cr); !errors.Is(err, base.ErrInvalidParams) {
		t.Fatalf("bad regex: %v", err)
	}

	// List and status.
	lresp := &transfer.ListResponse{}
	if err := d.call(&transfer.ListRequest{Prefix: "obj/", Limit: 5}, lresp); err != nil || len(lresp.Items) != 5 || lresp.NextCursor == "" {
		t.Fatalf("list: %+v %v", lresp, err)
	}
	// Walking the pages from the start lists every key once, in order, and ends with "".
	var listed []string
	for cursor, pages := "", 0; ; pages++ {
		if pages > len(vals) {
			t.Fatalf("list did not end after %d pages: %v", pages, listed)
		}
		page := &transfer.ListResponse{}
		if err := d.call(&transfer.ListRequest{Prefix: "obj/", Cursor: cursor, Limit: 5}, page); err != nil {
			t.Fatalf("list after %q: %v", cursor, err)
		}
		for _, it := range page.Items {
			listed = append(listed, it.Key)
		}
		if cursor = page.NextCursor; cursor == "" {
			break
		}
	}
	if want := slices.Sorted(maps.Keys(vals)); !slices.Equal(listed, want) {
		t.Fatalf("listed %v, want %v", listed, want)
	}
	st := d.status()
	if st.Leader == "" || len(st.Masters) != 3 || len(st.Workers) != 2 || st.Keys != int64(len(vals))+1 {
		t.Fatalf("status: %+v", st)
	}
	if st.Workers[0].DRAMCapacityBytes != 32<<20 {
		t.Fatalf("status worker capacity: %+v", st.Workers[0])
	}

	// A follower redirects writes to the leader and answers stale reads when allowed.
	var leaderAddr, followerAddr string
	for _, m := range c.masters {
		if m.IsLeader() {
			leaderAddr = m.Addr()
		} else {
			followerAddr = m.Addr()
		}
	}
	err = d.cli.Call(context.Background(), followerAddr,
		&transfer.PutStartRequest{Object: base.Object{ObjectMeta: base.ObjectMeta{Key: "f", Size: 1}}},
		&transfer.PutStartResponse{})
	var nl *transfer.NotLeaderError
	if !errors.As(err, &nl) || !errors.Is(err, base.ErrNotLeader) || nl.LeaderAddr != leaderAddr {
		t.Fatalf("PutStart on a follower: %v (want NOT_LEADER naming %s)", err, leaderAddr)
	}
	if err := d.cli.Call(context.Background(), followerAddr, &transfer.LookupRequest{Key: "obj/02"}, &transfer.LookupResponse{}); !errors.As(err, &nl) {
		t.Fatalf("linearizable lookup on a follower: %v", err)
	}
	eventually(t, "follower applies the puts", func() bool {
		lr := &transfer.LookupResponse{}
		err := d.cli.Call(context.Background(), followerAddr, &transfer.LookupRequest{Key: "obj/02", AllowStale: true}, lr)
		return err == nil && lr.Checksum == base.Checksum(vals["obj/02"])
	})

	// Leader shutdown: a new leader serves every committed object.
	var old int
	for i, m := range c.masters {
		if m.IsLeader() {
			old = i
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), testWait)
	if err := c.masters[old].Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	cancel()
	c.masters[old] = nil
	d.masters = c.masterAddrs()
	d.leader = ""
	for k, v := range vals {
		n := 2
		if k == "obj/00" {
			n = 1
		}
		d.mustGet(k, v, n)
	}
	// Puts work again once the workers found the new leader.
	if err := d.put("after/failover", []byte("ok"), 2, false); err != nil {
		t.Fatalf("put after failover: %v", err)
	}
	d.mustGet("after/failover", []byte("ok"), 2)
	if st := d.status(); st.Leader == c.mcfgs[old].ID {
		t.Fatalf("old leader still leads: %+v", st)
	}

	// RemoveAll.
	cr = transfer.NewCountResponse(transfer.OpRemoveAll, 0)
	if err := d.call(transfer.NewEmpty(transfer.OpRemoveAll), cr); err != nil || cr.Count != int64(len(vals))+2 {
		t.Fatalf("remove all: %d %v (want %d)", cr.Count, err, len(vals)+2)
	}
}
