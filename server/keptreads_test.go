package server

import (
	"bytes"
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mooncake-go/mooncake/internal/base"
	"github.com/mooncake-go/mooncake/server/master"
	"github.com/mooncake-go/mooncake/server/worker"
	"github.com/mooncake-go/mooncake/transfer"
)

// keptReader reads key at the version of its lookup from its first replica, as an ordinary
// read or as a read from a kept lookup (ReadRequest.Cached), and checks the bytes.
type keptReader struct {
	t    *testing.T
	d    *driver
	key  string
	val  []byte
	addr string
	ver  base.Version
}

func newKeptReader(t *testing.T, d *driver, key string, val []byte) *keptReader {
	t.Helper()
	var lr transfer.LookupResponse
	if err := d.call(&transfer.LookupRequest{Key: key}, &lr); err != nil {
		t.Fatal(err)
	}
	return &keptReader{t: t, d: d, key: key, val: val, addr: lr.Replicas[0].Address, ver: lr.Version}
}

func (r *keptReader) read(cached bool) error {
	ctx, cancel := context.WithTimeout(context.Background(), testWait)
	defer cancel()
	buf := make([]byte, len(r.val))
	_, n, err := r.d.cli.Read(ctx, r.addr, transfer.ReadRequest{Key: r.key, Version: r.ver, Cached: cached}, buf)
	if err == nil && !bytes.Equal(buf[:n], r.val) {
		err = errors.New("wrong bytes")
	}
	return err
}

// TestKeptReadsNeedLeader: a read from a kept lookup (ReadRequest.Cached) is served only
// while the worker's heartbeats get settled answers; with the master gone it is refused with
// INVALID_VERSION (the client then looks the key up again), while an ordinary read of the
// same version is still served.
func TestKeptReadsNeedLeader(t *testing.T) {
	c := startMasters(t, 1, nil)
	c.addWorker("", nil) // heartbeats every 50 ms
	d := newDriver(t, c.masterAddrs())
	val := bytes.Repeat([]byte{7}, 5000)
	if err := d.put("k", val, 1, false); err != nil {
		t.Fatal(err)
	}
	r := newKeptReader(t, d, "k", val)
	eventually(t, "a kept-lookup read served once a heartbeat answer is settled", func() bool {
		return r.read(true) == nil
	})
	ctx, cancel := context.WithTimeout(context.Background(), testWait)
	defer cancel()
	if err := c.masters[0].Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	c.masters[0] = nil
	eventually(t, "kept-lookup reads refused once the leader is silent", func() bool {
		return errors.Is(r.read(true), base.ErrInvalidVersion)
	})
	if err := r.read(false); err != nil {
		t.Fatalf("ordinary read without a leader: %v", err)
	}
}

// TestKeptReadsAfterLostAnswer: a heartbeat answer that carried a removal's drop is lost on
// the way. The leader hands each drop out once, so its next answers are settled although
// the worker still holds the removed object. From the failed call until a registration
// reconciles the worker, reads from kept lookups are refused; the removed object is never
// served to one. Then the registrations drop it (the first spares it for the leader's grace,
// and the answers are not settled until the second) and kept reads are served again.
func TestKeptReadsAfterLostAnswer(t *testing.T) {
	var lose atomic.Bool // lose the next answer that carries drops
	lost := make(chan struct{}, 1)
	var gate atomic.Bool // hold registrations until release is closed
	release := make(chan struct{})
	var once sync.Once
	open := func() { once.Do(func() { close(release) }) }
	t.Cleanup(open) // a failed check must not leave a registration held for the cluster's shutdown
	holding := make(chan struct{}, 1)
	// A new leader spares objects the metadata does not list for put_timeout (they may be
	// puts of a previous leader); a short one lets the test see the removed object dropped.
	c := startMasters(t, 1, func(cfg *master.Config) { cfg.PutTimeout = time.Second })
	c.addWorker("", func(cfg *worker.Config) {
		// The checks below run within one vouch window (1.5 intervals) of the last settled
		// answer, so that only the failed call can be what refuses them.
		cfg.HeartbeatInterval = 2 * time.Second
		cfg.Test.LoseHeartbeatAnswer = func(drops []base.KeyVersion) bool {
			if len(drops) == 0 || !lose.CompareAndSwap(true, false) {
				return false
			}
			lost <- struct{}{}
			return true
		}
		cfg.Test.BeforeRegister = func() {
			if gate.Load() {
				holding <- struct{}{}
				<-release
			}
		}
	})
	d := newDriver(t, c.masterAddrs())
	gone, stays := bytes.Repeat([]byte{1}, 5000), bytes.Repeat([]byte{2}, 5000)
	for k, v := range map[string][]byte{"gone": gone, "stays": stays} {
		if err := d.put(k, v, 1, false); err != nil {
			t.Fatal(err)
		}
	}
	rg, rs := newKeptReader(t, d, "gone", gone), newKeptReader(t, d, "stays", stays)
	eventually(t, "kept-lookup reads served", func() bool { return rg.read(true) == nil && rs.read(true) == nil })

	lose.Store(true)
	gate.Store(true)
	if err := d.call(&transfer.RemoveRequest{Key: "gone"}, nil); err != nil {
		t.Fatal(err)
	}
	<-lost
	<-holding // the failed heartbeat was recorded before the control loop registers again
	if err := rg.read(false); err != nil {
		t.Fatalf("the removed object's drop was lost, so an ordinary read still finds it: %v", err)
	}
	for _, r := range []*keptReader{rg, rs} {
		if err := r.read(true); !errors.Is(err, base.ErrInvalidVersion) {
			t.Fatalf("a kept-lookup read of %q after the lost answer, before the registration: %v", r.key, err)
		}
	}
	gate.Store(false)
	open()
	eventually(t, "the registration drops the removed object", func() bool {
		return errors.Is(rg.read(false), base.ErrObjectNotFound)
	})
	eventually(t, "kept-lookup reads served again", func() bool { return rs.read(true) == nil })
	if err := rg.read(true); !errors.Is(err, base.ErrObjectNotFound) {
		t.Fatalf("kept-lookup read of the removed object: %v", err)
	}
}
