package server

import (
	"context"
	"encoding/binary"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	mctest "github.com/mooncake-go/mooncake/internal/testutil"
	"github.com/mooncake-go/mooncake/server/master"

	"github.com/go-zeromq/zmq4"

	"github.com/mooncake-go/mooncake/transfer"
)

// kvEventsOn is the test publisher configuration: every master binds a free port.
func kvEventsOn(cfg *master.Config) {
	cfg.KVEvents = master.KVEventsConfig{Enabled: true, BindEndpoint: "tcp://127.0.0.1:0", BackendID: "test",
		ModelName: "m", EmitObjectKey: true, EmitLegacyCompat: true}
}

// kvSub is a subscriber connected to every master's publisher. It keeps the first message of
// each sequence (a new leader sends again what it retains) and fails the test on a gap.
type kvSub struct {
	t    *testing.T
	sock zmq4.Socket
	mu   struct {
		sync.Mutex
		last uint64
		ops  []string // "stored key" / "removed key" / "cleared", in sequence order
		gap  string
	}
}

func newKVSub(t *testing.T, c *testCluster) *kvSub {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	s := &kvSub{t: t, sock: zmq4.NewSub(ctx)}
	if err := s.sock.SetOption(zmq4.OptionSubscribe, ""); err != nil {
		t.Fatal(err)
	}
	for _, m := range c.masters {
		if err := s.sock.Dial(m.TestHooks().KVAddr()); err != nil {
			t.Fatal(err)
		}
	}
	// Wait for every publisher to have the subscription: a PUB drops what no one asked for.
	for _, m := range c.masters {
		eventually(t, "subscription reaches "+m.ID(), func() bool { return m.TestHooks().KVSubscribed() })
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			msg, err := s.sock.Recv()
			if err != nil {
				return
			}
			s.take(msg.Frames)
		}
	}()
	t.Cleanup(func() { cancel(); s.sock.Close(); <-done })
	return s
}

func (s *kvSub) take(frames [][]byte) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(frames) != 3 || len(frames[0]) != 0 || len(frames[1]) != 8 {
		s.mu.gap = fmt.Sprintf("bad message: %d frames", len(frames))
		return
	}
	seq := binary.BigEndian.Uint64(frames[1])
	if seq <= s.mu.last {
		return // sent again by a new leader
	}
	if seq != s.mu.last+1 && s.mu.gap == "" {
		s.mu.gap = fmt.Sprintf("sequence %d after %d", seq, s.mu.last)
	}
	s.mu.last = seq
	v, rest, err := mctest.MsgpackDecode(frames[2])
	if err != nil || len(rest) != 0 {
		s.mu.gap = fmt.Sprintf("payload of %d: %v", seq, err)
		return
	}
	batch := v.([]any)
	for _, e := range batch[1].([]any) {
		ev := e.(map[string]any)
		switch ev["event_type"] {
		case "cleared":
			s.mu.ops = append(s.mu.ops, "cleared")
		default:
			s.mu.ops = append(s.mu.ops, fmt.Sprint(ev["event_type"], " ", ev["object_key"]))
		}
	}
}

func (s *kvSub) snapshot() (uint64, []string, string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.mu.last, slices.Clone(s.mu.ops), s.mu.gap
}

// TestKVEventsLeaderKill: a subscriber of every master's publisher sees each acknowledged put
// and remove once, in commit order, with no gap in the sequence, across a crash of the leader
// that had committed (and acknowledged) operations it never sent: the new leader sends them.
func TestKVEventsLeaderKill(t *testing.T) {
	c := startMasters(t, 3, func(cfg *master.Config) { kvEventsOn(cfg); cfg.PutTimeout = 10 * time.Second })
	c.addWorker("", nil)
	c.addWorker("", nil)
	sub := newKVSub(t, c)
	d := newDriver(t, c.masterAddrs())

	var want []string // acknowledged operations, in the order they were acknowledged
	op := func(i int) {
		key := fmt.Sprintf("k%03d", i)
		if err := d.put(key, []byte(key), 2, false); err != nil {
			t.Fatalf("put %s: %v", key, err)
		}
		want = append(want, "stored "+key)
		if i%3 == 0 {
			if err := d.call(&transfer.RemoveRequest{Key: key}, nil); err != nil {
				t.Fatalf("remove %s: %v", key, err)
			}
			want = append(want, "removed "+key)
		}
	}
	for i := range 20 {
		op(i)
	}
	old := -1
	for i, m := range c.masters {
		if m.IsLeader() {
			old = i
		}
	}
	if old < 0 {
		t.Fatal("no leader")
	}
	c.masters[old].TestHooks().MuteKV(true)
	for i := 20; i < 26; i++ {
		op(i)
	}
	if err := crash(c.masters[old]); err != nil {
		t.Fatal(err)
	}
	for i := 26; i < 40; i++ {
		op(i)
	}
	eventually(t, "every acknowledged operation is in the stream", func() bool {
		_, got, gap := sub.snapshot()
		return len(got) >= len(want) || gap != ""
	})
	last, got, gap := sub.snapshot()
	if gap != "" {
		t.Fatal(gap)
	}
	if !slices.Equal(got, want) {
		t.Fatalf("stream:\n%v\nacknowledged:\n%v", got, want)
	}
	for i, m := range c.masters {
		if i == old {
			continue
		}
		eventually(t, m.ID()+" applies every batch", func() bool { return m.TestHooks().KVStatus()["committed_sequence"] == last })
		st := m.TestHooks().KVStatus()
		if m.IsLeader() && (st["last_sequence"] != last || st["subscribed"] != true) {
			t.Errorf("leader status %v, want last_sequence %d and subscribed", st, last)
		}
	}
}
