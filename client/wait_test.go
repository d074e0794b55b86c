package client

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mooncake-go/mooncake/internal/base"
	"github.com/mooncake-go/mooncake/transfer"
)

// startingMaster is a fake cluster whose only master refuses connections for its first
// upAfter pings, as a master process that is still starting does.
type startingMaster struct {
	*fakeCluster
	pings   atomic.Int32
	upAfter int32
}

func (s *startingMaster) Call(ctx context.Context, addr string, req, resp transfer.Message) error {
	if req.Op() == transfer.OpPing && s.pings.Add(1) == s.upAfter {
		s.setDown(addr, false)
	}
	return s.fakeCluster.Call(ctx, addr, req, resp)
}

// TestConnectWaitsForMaster: Connect keeps trying a master that refuses connections within
// ConnectWait, and when it gives up its error says what it waited for.
func TestConnectWaitsForMaster(t *testing.T) {
	f := newFakeCluster(1, 1)
	f.setDown(f.masters[0], true)
	s := &startingMaster{fakeCluster: f, upAfter: 4}
	cfg := Config{MasterAddresses: f.masters, ConnectWait: time.Minute}
	cfg.EnsureDefaults()
	c, err := connectWith(context.Background(), cfg, s)
	if err != nil {
		t.Fatalf("connect to a starting master: %v", err)
	}
	if got := s.pings.Load(); got != 4 {
		t.Fatalf("pings: %d, want 4", got)
	}
	if err := c.Put(context.Background(), "k", []byte("v"), ReplicateConfig{}); err != nil {
		t.Fatal(err)
	}

	f.setDown(f.masters[0], true)
	cfg.ConnectWait = 100 * time.Millisecond
	_, err = connectWith(context.Background(), cfg, &startingMaster{fakeCluster: f, upAfter: -1})
	if !errors.Is(err, base.ErrUnavailable) || !strings.Contains(err.Error(), "no master reachable (waited 100ms") {
		t.Fatalf("gave up: %v", err)
	}
}

// startingWorker is a fake cluster whose only worker comes up after the upAfter-th put start
// (single or batch), as a worker that registers a moment after its master elected itself.
type startingWorker struct {
	*fakeCluster
	starts  atomic.Int32
	upAfter int32
}

func (s *startingWorker) Call(ctx context.Context, addr string, req, resp transfer.Message) error {
	if op := req.Op(); (op == transfer.OpPutStart || op == transfer.OpBatchPutStart) && s.starts.Add(1) == s.upAfter {
		s.setDown(s.wids[0], false)
	}
	return s.fakeCluster.Call(ctx, addr, req, resp)
}

// TestPutsWaitForAFirstWorker: a put and a batch put issued while no worker is alive wait
// for one (within the call's timeout) instead of failing; one that gives up says so.
func TestPutsWaitForAFirstWorker(t *testing.T) {
	for _, batch := range []bool{false, true} {
		f := newFakeCluster(1, 1)
		f.setDown(f.wids[0], true)
		s := &startingWorker{fakeCluster: f, upAfter: 3}
		cfg := Config{MasterAddresses: f.masters}
		cfg.EnsureDefaults()
		c, err := connectWith(context.Background(), cfg, s)
		if err != nil {
			t.Fatal(err)
		}
		if batch {
			errs := c.BatchPut(context.Background(), []string{"a", "b"}, [][]byte{[]byte("1"), []byte("2")}, ReplicateConfig{})
			if errs[0] != nil || errs[1] != nil {
				t.Fatalf("batch put while the worker starts: %v", errs)
			}
		} else if err := c.Put(context.Background(), "a", []byte("1"), ReplicateConfig{}); err != nil {
			t.Fatalf("put while the worker starts: %v", err)
		}
		if got := s.starts.Load(); got < 3 {
			t.Fatalf("put starts: %d, want at least 3 (it waited)", got)
		}

		f.setDown(f.wids[0], true)
		ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		if batch {
			errs := c.BatchPut(ctx, []string{"c"}, [][]byte{[]byte("3")}, ReplicateConfig{})
			err = errs[0]
		} else {
			err = c.Put(ctx, "c", []byte("3"), ReplicateConfig{})
		}
		cancel()
		if !strings.Contains(err.Error(), "waiting for") || !strings.Contains(err.Error(), "worker") {
			t.Fatalf("gave up (batch %v): %v", batch, err)
		}
	}
}
