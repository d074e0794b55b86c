package server

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/mooncake-go/mooncake/internal/base"
	"github.com/mooncake-go/mooncake/server/lifecycle"
	"github.com/mooncake-go/mooncake/server/master"
	"github.com/mooncake-go/mooncake/server/worker"
	"github.com/mooncake-go/mooncake/transfer"
)

// regClient sends RegisterWorker pages straight to one master, as a worker would, without
// the worker's retries (a refused page is returned to the test).
type regClient struct {
	t   *testing.T
	cli *transfer.Client
}

func newRegClient(t *testing.T) *regClient {
	t.Helper()
	cli, err := transfer.NewClient(transfer.ClientOptions{Logger: testLogger()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cli.Close() })
	return &regClient{t: t, cli: cli}
}

// page sends one page of worker id to addr and returns the drops of the reply.
func (r *regClient) page(addr string, id base.WorkerID, inv []base.ObjectMeta, session uint64, page uint32, more bool) ([]string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), testWait)
	defer cancel()
	req := &transfer.RegisterWorkerRequest{WorkerID: id, Address: "127.0.0.1:1", DRAMCapacity: 1 << 20,
		Inventory: inv, Session: session, Page: page, More: more}
	resp := &transfer.RegisterWorkerResponse{}
	if err := r.cli.Call(ctx, addr, req, resp); err != nil {
		return nil, err
	}
	var keys []string
	for _, kv := range resp.Drop {
		keys = append(keys, kv.Key)
	}
	slices.Sort(keys)
	return keys, nil
}

// fakeInventory returns n objects the master does not know, keys u00, u01, ...
func fakeInventory(n int) []base.ObjectMeta {
	inv := make([]base.ObjectMeta, n)
	for i := range inv {
		inv[i] = base.ObjectMeta{Key: fmt.Sprintf("u%02d", i), Version: base.Version(i + 1), Size: 1, Checksum: 7}
	}
	return inv
}

func keysOf(inv []base.ObjectMeta) []string {
	var out []string
	for _, o := range inv {
		out = append(out, o.Key)
	}
	slices.Sort(out)
	return out
}

// TestRegisterPages drives the leader's paged registration directly: an unpaged request (a
// worker that predates paging) and a paged one both register and reconcile their whole
// inventory (objects the master does not know are dropped, and only the final page's reply
// names them); pages out of order, of a replaced session or of no session are refused with
// UNAVAILABLE and the worker's retry from page 0 succeeds; the leader's bounds refuse what
// exceeds them.
func TestRegisterPages(t *testing.T) {
	objectBytes := int64(3 + (master.TestHooks{}).RegisterObjectOverhead()) // inventoryBytes of one fakeInventory entry
	c := startMasters(t, 1, func(cfg *master.Config) {
		// A short leader grace (in it unknown objects are spared, not dropped). NB: not
		// shorter: PutTimeout sets the leader loop's tick, and a 10 ms tick makes the race
		// detector report a race in raftmeta's test-only Bootstrap path (Node.cfg.Peers).
		cfg.PutTimeout = 200 * time.Millisecond
		cfg.Test.Lifecycle = func(c *lifecycle.Config) {
			c.Sessions.PerWorkerObjects = 30
			c.Sessions.TotalBytes = 45 * objectBytes
		}
	})
	m := c.masters[0]
	addr := m.Addr()
	r := newRegClient(t)
	inv := fakeInventory(20)
	unavailable := func(what string, err error) {
		t.Helper()
		if !errors.Is(err, base.ErrUnavailable) {
			t.Fatalf("%s: got %v, want UNAVAILABLE", what, err)
		}
	}
	mustDrop := func(what string, got []string, err error, want []base.ObjectMeta) {
		t.Helper()
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		if w := keysOf(want); !slices.Equal(got, w) {
			t.Fatalf("%s: drops %v, want %v", what, got, w)
		}
	}

	// Unpaged: the whole inventory in one request. Until the master leads it refuses it,
	// and until the leader's grace has passed it spares the unknown objects instead of
	// dropping them.
	var drops []string
	var err error
	eventually(t, "the master leads and its grace passes", func() bool {
		drops, err = r.page(addr, "w-a", inv[:3], 0, 0, false)
		var nl *transfer.NotLeaderError
		return !errors.As(err, &nl) && (err != nil || len(drops) > 0)
	})
	mustDrop("unpaged registration", drops, err, inv[:3])

	// Paged: three pages; only the last reply carries the drops, and they cover every page.
	for i, p := range [][]base.ObjectMeta{inv[:7], inv[7:14]} {
		drops, err := r.page(addr, "w-a", p, 0xa, uint32(i), true)
		mustDrop(fmt.Sprintf("page %d", i), drops, err, nil)
	}
	drops, err = r.page(addr, "w-a", inv[14:], 0xa, 2, false)
	mustDrop("final page", drops, err, inv)

	// A page out of order is refused and ends the session; the retry from page 0 succeeds.
	if _, err := r.page(addr, "w-a", inv[:7], 0xb, 0, true); err != nil {
		t.Fatal(err)
	}
	_, err = r.page(addr, "w-a", inv[14:], 0xb, 2, false)
	unavailable("page 2 after page 0", err)
	_, err = r.page(addr, "w-a", inv[7:14], 0xb, 1, true)
	unavailable("page 1 of a session refused before", err)
	if _, err := r.page(addr, "w-a", inv[:7], 0xc, 0, true); err != nil {
		t.Fatal(err)
	}
	drops, err = r.page(addr, "w-a", inv[7:14], 0xc, 1, false)
	mustDrop("retry from page 0", drops, err, inv[:14])

	// A new session replaces the old one: the old one's pages are refused.
	if _, err := r.page(addr, "w-a", inv[:7], 0xd, 0, true); err != nil {
		t.Fatal(err)
	}
	if _, err := r.page(addr, "w-a", inv[:5], 0xe, 0, true); err != nil {
		t.Fatal(err)
	}
	_, err = r.page(addr, "w-a", inv[7:14], 0xd, 1, false)
	unavailable("page of a replaced session", err)
	drops, err = r.page(addr, "w-a", inv[5:9], 0xe, 1, false)
	mustDrop("the replacing session", drops, err, inv[:9])

	// A page of a session the leader never saw.
	_, err = r.page(addr, "w-a", inv[:3], 0xf, 1, false)
	unavailable("page of an unknown session", err)

	// Idle sessions (refused, then swept) are the lifecycle machine's decision, tested in
	// server/lifecycle/testdata/sessions.

	// Bounds: 30 objects per worker, 45 objects' bytes over all sessions in progress.
	big := fakeInventory(25)
	if _, err := r.page(addr, "w-b", big, 0x10, 0, true); err != nil {
		t.Fatal(err)
	}
	_, err = r.page(addr, "w-b", big[:6], 0x10, 1, true)
	unavailable("past the bound per worker", err)
	if _, err := r.page(addr, "w-b", big, 0x11, 0, true); err != nil {
		t.Fatal(err)
	}
	_, err = r.page(addr, "w-c", big, 0x12, 0, true)
	unavailable("past the bound over all workers", err)
	drops, err = r.page(addr, "w-b", nil, 0x11, 1, false) // an empty final page ends w-b's session, freeing its bytes
	mustDrop("w-b final page", drops, err, big)
	if _, err := r.page(addr, "w-c", big, 0x12, 0, true); err != nil {
		t.Fatalf("w-c after w-b finished: %v", err)
	}
	n, b := m.TestHooks().RegisterSessions()
	if n != 1 || b != 25*objectBytes {
		t.Fatalf("leader holds %d sessions, %d bytes; want 1 and %d", n, b, 25*objectBytes)
	}
}

// TestRegisterPagesLeaderChange: a paged registration interrupted by a leader change is
// refused by the new leader (it never saw page 0; the old one answers NOT_LEADER), and the
// registration from page 0 at the new leader succeeds.
func TestRegisterPagesLeaderChange(t *testing.T) {
	c := startMasters(t, 3, nil)
	r := newRegClient(t)
	inv := fakeInventory(10)
	// leaderBy sends a page to each master until one accepts it or answers it otherwise than
	// NOT_LEADER (an election in progress), and returns that master's index and error.
	leaderBy := func(what string, inv []base.ObjectMeta, session uint64, page uint32, more bool) (int, error) {
		t.Helper()
		var idx int
		var err error
		eventually(t, what, func() bool {
			for i, m := range c.masters {
				if m == nil {
					continue
				}
				_, err = r.page(m.Addr(), "w-a", inv, session, page, more)
				var nl *transfer.NotLeaderError
				if !errors.As(err, &nl) {
					idx = i
					return true
				}
			}
			return false
		})
		return idx, err
	}
	old, err := leaderBy("a master leads", inv[:5], 0xa, 0, true)
	if err != nil {
		t.Fatalf("page 0: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), testWait)
	defer cancel()
	if err := c.masters[old].Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	c.masters[old] = nil
	// Page 1 of the session: every follower redirects it, the new leader refuses it.
	leader, err := leaderBy("a new master leads", inv[5:], 0xa, 1, false)
	if !errors.Is(err, base.ErrUnavailable) {
		t.Fatalf("page 1 at the new leader: got %v, want UNAVAILABLE", err)
	}
	addr := c.masters[leader].Addr()
	if _, err := r.page(addr, "w-a", inv[:5], 0xc, 0, true); err != nil {
		t.Fatal(err)
	}
	// In the new leader's grace the unknown objects are spared, not dropped.
	if _, err := r.page(addr, "w-a", inv[5:], 0xc, 1, false); err != nil {
		t.Fatalf("registration from page 0 at the new leader: %v", err)
	}
	if pages := c.masters[leader].TestHooks().RegisterPages(); pages != 2 {
		t.Fatalf("the new leader accepted %d pages, want 2", pages)
	}
}

// TestWorkerRegisterPagesRetry: a worker whose paged registration is cut off mid-way (the
// leader drops its soft state as on losing leadership, so page 1 is refused) starts over from
// page 0 with a new session and registers; every object it restored from NVMe reads back.
func TestWorkerRegisterPagesRetry(t *testing.T) {
	var mu sync.Mutex
	var armed, cut bool
	var sessions []uint64 // the sessions of page 0, in order
	c := startMasters(t, 1, func(cfg *master.Config) {
		cfg.Test.BeforeRegisterPage = func(m *master.Master, _ base.WorkerID, session uint64, page uint32) {
			mu.Lock()
			defer mu.Unlock()
			if !armed {
				return
			}
			if page == 0 {
				sessions = append(sessions, session)
			}
			if page == 1 && !cut {
				cut = true
				m.TestHooks().SetLeader(false) // what losing leadership does to the soft state...
				m.TestHooks().SetLeader(true)  // ...and winning it again: no session is known
			}
		}
	})
	root := t.TempDir()
	paged := func(cfg *worker.Config) { cfg.Test.RegisterPageObjects = 2 }
	w := c.addWorker(root, paged)
	d := newDriver(t, c.masterAddrs())
	rng := rand.New(rand.NewPCG(9, 9))
	vals := map[string][]byte{}
	for i := range 7 {
		k := fmt.Sprintf("p%d", i)
		vals[k] = value(rng, 1000+i)
		if err := d.put(k, vals[k], 1, false); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), testWait)
	defer cancel()
	if err := w.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	c.workers[0] = nil
	mu.Lock()
	armed = true
	mu.Unlock()
	c.addWorker(root, paged)
	mu.Lock()
	got := slices.Clone(sessions)
	mu.Unlock()
	if !cut || len(got) < 2 || got[0] == got[1] || got[0] == 0 || got[1] == 0 {
		t.Fatalf("cut %v, sessions of page 0 %x: want the cut attempt and a retry with a new non-zero session", cut, got)
	}
	for k, v := range vals {
		d.mustGet(k, v, 1)
	}
}
