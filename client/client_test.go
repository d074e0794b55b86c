package client

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
	"testing/iotest"
	"time"

	"github.com/mooncake-go/mooncake/internal/base"
	"github.com/mooncake-go/mooncake/internal/testutil"
	"github.com/mooncake-go/mooncake/transfer"
)

func TestMain(m *testing.M) {
	if os.Getenv(churnHelperEnv) == "1" {
		os.Exit(churnHelper(os.Args[1:]))
	}
	testutil.VerifyNoLeaks(m)
}

func value(n int, seed byte) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(i*31) ^ seed
	}
	return b
}

// newFakeClient connects a client to a fake cluster; the configured master list is the
// given addresses (default: all). The client is closed when the test ends.
func newFakeClient(t *testing.T, f *fakeCluster, masters ...string) *Client {
	t.Helper()
	if masters == nil {
		masters = f.masters
	}
	cfg := Config{MasterAddresses: masters, StripeSize: 64 << 10, Timeout: 5 * time.Second, MaxBackoff: 20 * time.Millisecond}
	cfg.EnsureDefaults()
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	c, err := connectWith(context.Background(), cfg, f)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func TestPutGetRoundTrip(t *testing.T) {
	ctx := context.Background()
	f := newFakeCluster(3, 3)
	f.setLeader(2)
	c := newFakeClient(t, f)
	for _, n := range []int{1, 1000, 64 << 10, 64<<10 + 1, 1 << 20} {
		key := "k" + strings.Repeat("x", n%7)
		key = key + "-" + time.Duration(n).String()
		v := value(n, byte(n))
		if err := c.Put(ctx, key, v, ReplicateConfig{Replicas: 2}); err != nil {
			t.Fatalf("put %d: %v", n, err)
		}
		got, err := c.Get(ctx, key)
		if err != nil || !bytes.Equal(got, v) {
			t.Fatalf("get %d: %v (equal %v)", n, err, bytes.Equal(got, v))
		}
		buf := make([]byte, n+10)
		if m, err := c.GetInto(ctx, key, buf); err != nil || m != n || !bytes.Equal(buf[:m], v) {
			t.Fatalf("get into %d: %d %v", n, m, err)
		}
		if sz, err := c.Size(ctx, key); err != nil || sz != int64(n) {
			t.Fatalf("size %d: %d %v", n, sz, err)
		}
	}
	if f.count(transfer.OpWrite) != 5*2 {
		t.Fatalf("writes: %d, want one per object and replica", f.count(transfer.OpWrite))
	}
}

func TestPutFrom(t *testing.T) {
	ctx := context.Background()
	f := newFakeCluster(1, 2)
	c := newFakeClient(t, f)
	v := value(300<<10+7, 3)
	// A reader that returns one byte at a time still fills whole stripes.
	if err := c.PutFrom(ctx, "big", iotest.OneByteReader(bytes.NewReader(v)), int64(len(v)), ReplicateConfig{Replicas: 2}); err != nil {
		t.Fatal(err)
	}
	got, err := c.Get(ctx, "big")
	if err != nil || !bytes.Equal(got, v) {
		t.Fatalf("%v", err)
	}
	if err := c.PutFrom(ctx, "small", bytes.NewReader(v[:100]), 100, ReplicateConfig{}); err != nil {
		t.Fatal(err)
	}
	// A short reader fails, the put is revoked and nothing becomes visible.
	err = c.PutFrom(ctx, "short", bytes.NewReader(v[:200<<10]), int64(len(v)), ReplicateConfig{})
	if err == nil || !strings.Contains(err.Error(), "reading the value") || f.count(transfer.OpPutRevoke) != 1 {
		t.Fatalf("short reader: %v (revokes %d)", err, f.count(transfer.OpPutRevoke))
	}
	if ok, _ := c.Exists(ctx, "short"); ok {
		t.Fatal("a failed put is visible")
	}
	// A replica that fails its write revokes the put; nothing becomes visible.
	f.mu.Lock()
	f.failWrites = f.wids[1]
	f.mu.Unlock()
	err = c.Put(ctx, "half", v[:10], ReplicateConfig{Replicas: 2})
	if err == nil || !strings.Contains(err.Error(), "worker w2") {
		t.Fatalf("failed replica: %v", err)
	}
	if ok, _ := c.Exists(ctx, "half"); ok || f.count(transfer.OpPutRevoke) != 2 {
		t.Fatalf("a failed put is visible (or not revoked: %d)", f.count(transfer.OpPutRevoke))
	}
}

func TestTypedErrors(t *testing.T) {
	ctx := context.Background()
	f := newFakeCluster(1, 2)
	c := newFakeClient(t, f)
	if err := c.Put(ctx, "k", []byte("v"), ReplicateConfig{}); err != nil {
		t.Fatal(err)
	}
	check := func(err, want error) {
		t.Helper()
		if !errors.Is(err, want) {
			t.Fatalf("got %v, want %v", err, want)
		}
	}
	check(c.Put(ctx, "k", []byte("v2"), ReplicateConfig{}), base.ErrObjectAlreadyExists)
	if err := c.Put(ctx, "k", []byte("v2"), ReplicateConfig{Upsert: true}); err != nil {
		t.Fatal(err)
	}
	if got, _ := c.Get(ctx, "k"); string(got) != "v2" {
		t.Fatalf("upsert: %q", got)
	}
	check(c.Put(ctx, "k3", []byte("v"), ReplicateConfig{Replicas: 3}), base.ErrNoSpace)
	if ok, _ := c.Exists(ctx, "k3"); ok {
		t.Fatal("a refused put is visible")
	}
	check(c.Put(ctx, strings.Repeat("x", base.MaxKeyLen+1), []byte("v"), ReplicateConfig{}), base.ErrInvalidKey)
	check(c.Put(ctx, "", []byte("v"), ReplicateConfig{}), base.ErrInvalidKey)
	check(c.Put(ctx, "e", nil, ReplicateConfig{}), base.ErrInvalidParams)
	check(c.Put(ctx, "e", []byte("v"), ReplicateConfig{Replicas: -1}), base.ErrInvalidParams)
	check(c.Put(ctx, "e", []byte("v"), ReplicateConfig{PreferredWorker: "a/b"}), base.ErrInvalidParams)
	_, err := c.Get(ctx, "missing")
	check(err, base.ErrObjectNotFound)
	_, err = c.Size(ctx, "missing")
	check(err, base.ErrObjectNotFound)
	check(c.Remove(ctx, "missing"), base.ErrObjectNotFound)
	_, err = c.GetInto(ctx, "k", make([]byte, 1))
	check(err, base.ErrInvalidParams)
	_, err = c.RemoveByRegex(ctx, "a(")
	check(err, base.ErrInvalidParams)
	// No master reachable: a typed, prompt error.
	f.setDown(f.masters[0], true)
	cfg := Config{MasterAddresses: f.masters, DialTimeout: 50 * time.Millisecond, ConnectWait: -1}
	cfg.EnsureDefaults()
	_, err = connectWith(ctx, cfg, f)
	check(err, base.ErrUnavailable)
	if !strings.Contains(err.Error(), "no master reachable") {
		t.Fatal(err)
	}
	cfg = Config{MasterAddresses: []string{"nohostport"}}
	cfg.EnsureDefaults()
	check(cfg.Validate(), base.ErrInvalidParams)
	cfg = Config{Protocol: "rdma"}
	cfg.EnsureDefaults()
	check(cfg.Validate(), base.ErrNotSupported)
}

// TestRedirectAndFailover: the client finds the leader through NOT_LEADER, including one it
// was not configured with, and moves to a new leader when the old one dies.
func TestRedirectAndFailover(t *testing.T) {
	ctx := context.Background()
	f := newFakeCluster(3, 2)
	f.setLeader(2)
	c := newFakeClient(t, f, f.masters[0]) // knows only m1
	if err := c.Put(ctx, "a", []byte("1"), ReplicateConfig{}); err != nil {
		t.Fatal(err)
	}
	if got := c.pickMaster(); got != f.masters[2] {
		t.Fatalf("leader guess %s", got)
	}
	// The leader dies; for a while there is none; then m2 leads.
	f.setDown(f.masters[2], true)
	f.setLeader(-1)
	done := make(chan error, 1)
	go func() { done <- c.Put(ctx, "b", []byte("2"), ReplicateConfig{}) }()
	<-f.reached(transfer.OpPutStart, 6) // bounded: the client keeps trying until its timeout
	f.setLeader(1)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if got, err := c.Get(ctx, "b"); err != nil || string(got) != "2" {
		t.Fatalf("%q %v", got, err)
	}
	// With no leader at all, a call ends at its deadline with a typed error.
	f.setLeader(-1)
	tctx, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
	defer cancel()
	_, err := c.Exists(tctx, "a")
	if !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, base.ErrUnavailable) {
		t.Fatalf("no leader: %v", err)
	}
}

// TestPutEndAmbiguous: the leader commits the PutEnd and dies before answering; the retry on
// the new leader finds the key taken by our own version, and the put succeeds.
func TestPutEndAmbiguous(t *testing.T) {
	ctx := context.Background()
	f := newFakeCluster(3, 1)
	c := newFakeClient(t, f)
	f.mu.Lock()
	f.dropFirstPutEndReply = true
	f.mu.Unlock()
	if err := c.Put(ctx, "k", []byte("v"), ReplicateConfig{}); err != nil {
		t.Fatal(err)
	}
	if got, err := c.Get(ctx, "k"); err != nil || string(got) != "v" {
		t.Fatalf("%q %v", got, err)
	}
}

// TestPutWorkerLeftBeforeCommit: a put whose PutEnd the leader refuses because a placed
// worker left after the write (SEGMENT_NOT_FOUND) is placed and written again, up to
// maxRecommits times; single puts and batch items alike.
func TestPutWorkerLeftBeforeCommit(t *testing.T) {
	ctx := context.Background()
	f := newFakeCluster(1, 2)
	c := newFakeClient(t, f)
	f.mu.Lock()
	f.leftBeforeCommit = map[string]int{"k": maxRecommits, "never": maxRecommits + 1, "b1": 1, "b3": 2}
	f.mu.Unlock()
	if err := c.Put(ctx, "k", []byte("v"), ReplicateConfig{}); err != nil {
		t.Fatalf("put whose worker left before the commit: %v", err)
	}
	if got, err := c.Get(ctx, "k"); err != nil || string(got) != "v" {
		t.Fatalf("%q %v", got, err)
	}
	if err := c.Put(ctx, "never", []byte("v"), ReplicateConfig{}); !errors.Is(err, base.ErrSegmentNotFound) {
		t.Fatalf("put refused %d times: %v", maxRecommits+1, err)
	}
	keys := []string{"b0", "b1", "b2", "b3"}
	for i, err := range c.BatchPut(ctx, keys, [][]byte{[]byte("0"), []byte("1"), []byte("2"), []byte("3")}, ReplicateConfig{}) {
		if err != nil {
			t.Fatalf("batch item %d: %v", i, err)
		}
		if got, err := c.Get(ctx, keys[i]); err != nil || string(got) != fmt.Sprint(i) {
			t.Fatalf("get %s: %q %v", keys[i], got, err)
		}
	}
}

// TestReadFailover: a corrupt or unreachable replica is skipped, the other one serves.
func TestReadFailover(t *testing.T) {
	ctx := context.Background()
	f := newFakeCluster(1, 2)
	c := newFakeClient(t, f)
	v := value(5000, 9)
	if err := c.Put(ctx, "k", v, ReplicateConfig{Replicas: 2}); err != nil {
		t.Fatal(err)
	}
	f.corrupt(f.wids[0], "k")
	for range 10 { // both orders of the shuffled replicas
		if got, err := c.Get(ctx, "k"); err != nil || !bytes.Equal(got, v) {
			t.Fatalf("corrupt first replica: %v", err)
		}
	}
	f.setDown(f.wids[1], true)
	_, err := c.Get(ctx, "k")
	if !errors.Is(err, base.ErrCorruption) {
		t.Fatalf("only a corrupt replica left: %v", err)
	}
	// With verification off, the corrupt bytes come back (the option's documented cost).
	c.cfg.SkipChecksumVerify = true
	if got, err := c.Get(ctx, "k"); err != nil || bytes.Equal(got, v) {
		t.Fatalf("unverified read: %v (equal %v)", err, bytes.Equal(got, v))
	}
}

// TestReadByReferenceRetry: a verifying client asks for by-reference sends (Verifies); a
// read that fails its checksum is read once more by copy (no Verifies) before the replica
// counts as corrupt, so bytes rewritten in the worker's arena after a by-reference send cost
// one read, not an error. An unverifying client never asks.
func TestReadByReferenceRetry(t *testing.T) {
	ctx := context.Background()
	f := newFakeCluster(1, 1)
	c := newFakeClient(t, f)
	v := value(5000, 3)
	if err := c.Put(ctx, "k", v, ReplicateConfig{}); err != nil {
		t.Fatal(err)
	}
	w := f.workers[f.wids[0]]
	f.mu.Lock()
	w.staleByRef = 1
	f.mu.Unlock()
	if got, err := c.Get(ctx, "k"); err != nil || !bytes.Equal(got, v) {
		t.Fatalf("stale by-reference read: %v", err)
	}
	f.mu.Lock()
	got := fmt.Sprint(w.verifies)
	f.mu.Unlock()
	if want := "[true false]"; got != want || c.ReadStats().TCPCopyRetries != 1 {
		t.Fatalf("reads with Verifies %s, want %s; stats %+v", got, want, c.ReadStats())
	}
	// Bytes corrupt in the arena fail both reads.
	f.corrupt(f.wids[0], "k")
	if _, err := c.Get(ctx, "k"); !errors.Is(err, base.ErrCorruption) {
		t.Fatalf("corrupt object: %v", err)
	}
	c.cfg.SkipChecksumVerify = true
	f.mu.Lock()
	w.verifies = nil
	f.mu.Unlock()
	if _, err := c.Get(ctx, "k"); err != nil {
		t.Fatal(err)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if got := fmt.Sprint(w.verifies); got != "[false]" {
		t.Fatalf("unverified read sent Verifies: %s", got)
	}
}

func TestRemoveListStatus(t *testing.T) {
	ctx := context.Background()
	f := newFakeCluster(1, 1)
	c := newFakeClient(t, f)
	for _, k := range []string{"a/1", "a/2", "a/3", "b/1", "b/2"} {
		if err := c.Put(ctx, k, []byte(k), ReplicateConfig{}); err != nil {
			t.Fatal(err)
		}
	}
	keys, err := c.List(ctx, "a/") // the fake pages by 2
	if err != nil || len(keys) != 3 || keys[2].Key != "a/3" || keys[2].Size != 3 {
		t.Fatalf("%v %v", keys, err)
	}
	if all, _ := c.List(ctx, ""); len(all) != 5 {
		t.Fatalf("%v", all)
	}
	st, err := c.Status(ctx)
	if err != nil || st.Leader != "m1" || st.Keys != 5 || !strings.Contains(string(st.Raw), `"leader"`) {
		t.Fatalf("%+v %v", st, err)
	}
	if err := c.Remove(ctx, "a/1"); err != nil {
		t.Fatal(err)
	}
	if n, err := c.RemoveByRegex(ctx, "^a/"); err != nil || n != 2 {
		t.Fatalf("%d %v", n, err)
	}
	if n, err := c.RemoveAll(ctx); err != nil || n != 2 {
		t.Fatalf("%d %v", n, err)
	}
}

func TestBatch(t *testing.T) {
	ctx := context.Background()
	f := newFakeCluster(1, 2)
	c := newFakeClient(t, f)
	if err := c.Put(ctx, "exists", []byte("x"), ReplicateConfig{}); err != nil {
		t.Fatal(err)
	}
	keys := []string{"b1", "b2", "exists", "b3", ""}
	vals := [][]byte{value(10, 1), value(200<<10, 2), []byte("y"), value(1, 3), []byte("z")}
	errs := c.BatchPut(ctx, keys, vals, ReplicateConfig{Replicas: 2})
	if errs[0] != nil || errs[1] != nil || errs[3] != nil || !errors.Is(errs[2], base.ErrObjectAlreadyExists) || !errors.Is(errs[4], base.ErrInvalidKey) {
		t.Fatalf("%v", errs)
	}
	got, gerrs := c.BatchGet(ctx, []string{"b1", "b2", "nope", "b3"})
	if gerrs[0] != nil || gerrs[1] != nil || !errors.Is(gerrs[2], base.ErrObjectNotFound) || gerrs[3] != nil ||
		!bytes.Equal(got[1], vals[1]) || !bytes.Equal(got[3], vals[3]) {
		t.Fatalf("%v", gerrs)
	}
	ex, err := c.BatchExists(ctx, []string{"b1", "nope", "exists"})
	if err != nil || !ex[0] || ex[1] || !ex[2] {
		t.Fatalf("%v %v", ex, err)
	}
	rerrs := c.BatchRemove(ctx, []string{"b1", "nope"})
	if rerrs[0] != nil || !errors.Is(rerrs[1], base.ErrObjectNotFound) {
		t.Fatalf("%v", rerrs)
	}
	if errs := c.BatchPut(ctx, []string{"a"}, nil, ReplicateConfig{}); !errors.Is(errs[0], base.ErrInvalidParams) {
		t.Fatalf("%v", errs)
	}
}

// TestReplicateConfigOnTheWire: every ReplicateConfig field reaches the master (placement) and
// the workers (persistence and pins).
func TestReplicateConfigOnTheWire(t *testing.T) {
	ctx := context.Background()
	f := newFakeCluster(1, 2)
	c := newFakeClient(t, f)
	rc := ReplicateConfig{Replicas: 2, PreferredWorker: "w2", SoftPinTTL: 90 * time.Second, HardPin: true,
		Persistence: base.PersistenceDurable, Upsert: true}
	if err := c.Put(ctx, "k", []byte("value"), rc); err != nil {
		t.Fatal(err)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	st, w := f.lastStart, f.lastWrite
	if st.Key != "k" || st.Size != 5 || st.Config.Replicas != 2 || st.Config.PreferredWorker != "w2" || !st.Config.Upsert ||
		st.Config.SoftPinTTL != 90*time.Second || !st.Config.HardPin || st.Config.Persistence != base.PersistenceDurable {
		t.Fatalf("PutStart %+v", st)
	}
	if w.Key != "k" || w.TotalSize != 5 || w.Persistence != base.PersistenceDurable || w.SoftPinTTL != 90*time.Second ||
		!w.HardPin || w.Checksum != base.Checksum([]byte("value")) {
		t.Fatalf("Write %+v", w)
	}
}
