package client

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/mooncake-go/mooncake/internal/base"
	"github.com/mooncake-go/mooncake/transfer"
)

// settle waits until every goroutine of the test's synctest bubble is durably blocked (the
// work under test has gone as far as it can), then fails the test unless cond holds. Call it
// only inside synctest.Test.
func settle(t *testing.T, what string, cond func() bool) {
	t.Helper()
	synctest.Wait()
	if !cond() {
		t.Fatalf("not so once every goroutine waits: %s", what)
	}
}

func queued[Req, Res any](c *coalescer[Req, Res]) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.mu.queue)
}

// TestCoalescer: a call made while none is in flight leaves alone; calls made meanwhile
// leave together when it returns, never two of one key in one call, and an item whose
// context ended before its call left is not sent.
func TestCoalescer(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var mu sync.Mutex
		var batches [][]string
		first := make(chan struct{})
		gate := make(chan struct{})
		c := &coalescer[string, string]{timeout: time.Minute, key: func(s string) string { return strings.TrimSuffix(s, "'") }}
		c.send = func(_ context.Context, reqs []string) ([]itemResult[string], error) {
			mu.Lock()
			batches = append(batches, slices.Clone(reqs))
			n := len(batches)
			mu.Unlock()
			if n == 1 {
				close(first)
				<-gate
			}
			out := make([]itemResult[string], len(reqs))
			for i, r := range reqs {
				if r == "bad" {
					out[i].err = errors.New("refused")
					continue
				}
				out[i].res = "ok " + r
			}
			return out, nil
		}
		ctx := context.Background()
		var wg sync.WaitGroup
		results := make(map[string]string)
		run := func(ctx context.Context, req string) {
			wg.Add(1)
			go func() {
				defer wg.Done()
				res, err := c.do(ctx, req)
				mu.Lock()
				defer mu.Unlock()
				results[req] = fmt.Sprintf("%s|%v", res, err)
			}()
		}
		n := 0
		runInOrder := func(ctx context.Context, req string) {
			run(ctx, req)
			n++
			settle(t, req+" queued", func() bool { return queued(c) == n })
		}
		run(ctx, "a")
		<-first
		cctx, cancel := context.WithCancel(ctx)
		runInOrder(cctx, "gone")
		runInOrder(ctx, "b")
		runInOrder(ctx, "b'") // the same key as b: the next call
		runInOrder(ctx, "bad")
		runInOrder(ctx, "c")
		cancel()
		close(gate)
		wg.Wait()
		want := [][]string{{"a"}, {"b", "bad", "c"}, {"b'"}}
		if !slices.EqualFunc(batches, want, slices.Equal) {
			t.Fatalf("batches %q, want %q", batches, want)
		}
		wantRes := map[string]string{"a": "ok a|<nil>", "b": "ok b|<nil>", "b'": "ok b'|<nil>", "c": "ok c|<nil>",
			"bad": "|refused", "gone": "|context canceled"}
		for k, v := range wantRes {
			if results[k] != v {
				t.Errorf("%s: %q, want %q", k, results[k], v)
			}
		}
		c.mu.Lock()
		defer c.mu.Unlock()
		if c.mu.busy || len(c.mu.queue) != 0 {
			t.Fatalf("coalescer not idle: busy %v, %d queued", c.mu.busy, len(c.mu.queue))
		}
	})
}

// groupPuts holds the PutEnd of put "k0" at the fake master, starts puts k1..k(n-1) while it
// is held, waits until their PutEnds queue behind it, releases it and returns every put's
// outcome.
func groupPuts(t *testing.T, f *fakeCluster, c *Client, n int) []error {
	t.Helper()
	ctx := context.Background()
	arrived, release := f.hold(transfer.OpPutEnd)
	errs := make([]error, n)
	var wg sync.WaitGroup
	put := func(i int) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = c.Put(ctx, fmt.Sprintf("k%d", i), value(100+i, byte(i)), ReplicateConfig{Tokens: int64(256 + i), Model: "m"})
		}()
	}
	put(0)
	<-arrived
	for i := 1; i < n; i++ {
		put(i)
	}
	settle(t, "the PutEnds to queue", func() bool { return queued(&c.group.ends) == n-1 })
	release()
	wg.Wait()
	return errs
}

func (f *fakeCluster) callCount(op transfer.Op) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.calls[op]
}

// TestPutGroupCommit: puts that end while another PutEnd is in flight are committed by one
// BatchPutEnd; every one is acknowledged and readable.
func TestPutGroupCommit(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFakeCluster(1, 1)
		c := newFakeClient(t, f)
		errs := groupPuts(t, f, c, 8)
		for i, err := range errs {
			if err != nil {
				t.Fatalf("put k%d: %v", i, err)
			}
		}
		if n, b := f.callCount(transfer.OpPutEnd), f.callCount(transfer.OpBatchPutEnd); n != 1 || b != 1 {
			t.Fatalf("%d PutEnd and %d BatchPutEnd calls, want 1 and 1", n, b)
		}
		for i := range 8 {
			key := fmt.Sprintf("k%d", i)
			if got, err := c.Get(context.Background(), key); err != nil || string(got) != string(value(100+i, byte(i))) {
				t.Fatalf("get %s: %v", key, err)
			}
			f.mu.Lock()
			o := f.objects[key]
			f.mu.Unlock()
			if o.tokens != int64(256+i) || o.model != "m" {
				t.Fatalf("%s committed with %d tokens of model %q, want %d of \"m\"", key, o.tokens, o.model, 256+i)
			}
		}
	})
}

// TestPutGroupCommitItemFails: an item of a coalesced BatchPutEnd that the master refuses
// fails alone (and is revoked); its neighbours commit.
func TestPutGroupCommitItemFails(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFakeCluster(1, 1)
		c := newFakeClient(t, f)
		f.mu.Lock()
		f.failPutEnd = map[string]error{"k3": codeErr(base.ErrInvalidParams, "refused for the test")}
		f.mu.Unlock()
		errs := groupPuts(t, f, c, 6)
		for i, err := range errs {
			if i == 3 {
				if !errors.Is(err, base.ErrInvalidParams) {
					t.Fatalf("put k3: %v, want the master's refusal", err)
				}
				continue
			}
			if err != nil {
				t.Fatalf("put k%d: %v", i, err)
			}
		}
		if b := f.callCount(transfer.OpBatchPutEnd); b != 1 {
			t.Fatalf("%d BatchPutEnd calls, want 1", b)
		}
		if _, err := c.Get(context.Background(), "k3"); !errors.Is(err, base.ErrObjectNotFound) {
			t.Fatalf("get k3: %v", err)
		}
		f.mu.Lock()
		_, pending := f.pending["k3"]
		f.mu.Unlock()
		if pending {
			t.Fatal("the refused put was not revoked")
		}
	})
}

// TestPutGroupCommitAmbiguous: the leader commits a coalesced BatchPutEnd and dies before
// answering; the retry on the new leader finds every key taken by our own versions, and
// every put succeeds (the rule a PutEnd of its own follows, TestPutEndAmbiguous).
func TestPutGroupCommitAmbiguous(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFakeCluster(3, 1)
		c := newFakeClient(t, f)
		f.mu.Lock()
		f.dropFirstBatchPutEndReply = true
		f.mu.Unlock()
		for i, err := range groupPuts(t, f, c, 5) {
			if err != nil {
				t.Fatalf("put k%d: %v", i, err)
			}
		}
		f.mu.Lock()
		dropped := !f.dropFirstBatchPutEndReply
		f.mu.Unlock()
		if !dropped {
			t.Fatal("no BatchPutEnd reply was dropped")
		}
		for i := range 5 {
			if _, err := c.Get(context.Background(), fmt.Sprintf("k%d", i)); err != nil {
				t.Fatalf("get k%d: %v", i, err)
			}
		}
	})
}

// TestPutSequentialNotBatched: one put at a time makes exactly the calls it made before
// coalescing (PutStart, PutEnd), with nothing waiting for company.
func TestPutSequentialNotBatched(t *testing.T) {
	f := newFakeCluster(1, 1)
	c := newFakeClient(t, f)
	for i := range 5 {
		if err := c.Put(context.Background(), fmt.Sprintf("s%d", i), []byte("v"), ReplicateConfig{}); err != nil {
			t.Fatal(err)
		}
	}
	for op, want := range map[transfer.Op]int{transfer.OpPutStart: 5, transfer.OpPutEnd: 5, transfer.OpBatchPutStart: 0, transfer.OpBatchPutEnd: 0} {
		if got := f.callCount(op); got != want {
			t.Errorf("%s: %d calls, want %d", op, got, want)
		}
	}
}

// batchStartingWorker brings the fake's worker up at the second BatchPutStart call.
type batchStartingWorker struct {
	*fakeCluster
	batches atomic.Int32
}

func (s *batchStartingWorker) Call(ctx context.Context, addr string, req, resp transfer.Message) error {
	if req.Op() == transfer.OpBatchPutStart && s.batches.Add(1) == 2 {
		s.setDown(s.wids[0], false)
	}
	return s.fakeCluster.Call(ctx, addr, req, resp)
}

// TestCoalescedPutsWaitForAFirstWorker: puts whose PutStarts were coalesced into one
// BatchPutStart while no worker is alive wait for one, as a single put does
// (TestPutsWaitForAFirstWorker), instead of failing item by item.
func TestCoalescedPutsWaitForAFirstWorker(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFakeCluster(1, 1)
		f.setDown(f.wids[0], true)
		s := &batchStartingWorker{fakeCluster: f}
		cfg := Config{MasterAddresses: f.masters, MaxBackoff: 20 * time.Millisecond}
		cfg.EnsureDefaults()
		c, err := connectWith(context.Background(), cfg, s)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		// The first put's PutStart is held, then retried (no worker) until its short deadline;
		// the others queue behind it and leave together as one BatchPutStart.
		arrived, release := f.hold(transfer.OpPutStart)
		first := make(chan error, 1)
		go func() {
			ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
			defer cancel()
			first <- c.Put(ctx, "first", []byte("0"), ReplicateConfig{})
		}()
		<-arrived
		const n = 4
		errs := make(chan error, n)
		for i := range n {
			go func() { errs <- c.Put(context.Background(), fmt.Sprintf("k%d", i), []byte("v"), ReplicateConfig{}) }()
		}
		settle(t, "the PutStarts to queue", func() bool { return queued(&c.group.starts) == n })
		release()
		if err := <-first; !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, base.ErrUnavailable) {
			t.Fatalf("first put: %v, want its deadline", err)
		}
		for range n {
			if err := <-errs; err != nil {
				t.Fatalf("coalesced put while the worker starts: %v", err)
			}
		}
		if got := s.batches.Load(); got < 2 {
			t.Fatalf("%d BatchPutStart calls, want at least 2 (the batch waited)", got)
		}
	})
}
