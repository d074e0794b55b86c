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
