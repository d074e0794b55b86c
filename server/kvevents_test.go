package server

import (
	"context"
	"encoding/binary"
	"fmt"
	"math"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/go-zeromq/zmq4"

	"github.com/mooncake-go/mooncake/transfer"
)

// kvEventsOn is the test publisher configuration: every master binds a free port.
func kvEventsOn(cfg *MasterConfig) {
	cfg.KVEvents = KVEventsConfig{Enabled: true, BindEndpoint: "tcp://127.0.0.1:0", BackendID: "test",
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
		if err := s.sock.Dial(m.kv.addr); err != nil {
			t.Fatal(err)
		}
	}
	// Wait for every publisher to have the subscription: a PUB drops what no one asked for.
	for _, m := range c.masters {
		eventually(t, "subscription reaches "+m.cfg.ID, func() bool { return len(m.kv.sock.(zmq4.Topics).Topics()) > 0 })
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
	v, rest, err := mpDecode(frames[2])
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
	c := startMasters(t, 3, func(cfg *MasterConfig) { kvEventsOn(cfg); cfg.PutTimeout = 10 * time.Second })
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
	c.masters[old].kv.testMute.Store(true)
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
		eventually(t, m.cfg.ID+" applies every batch", func() bool { return m.kv.status()["committed_sequence"] == last })
		st := m.kv.status()
		if m.IsLeader() && (st["last_sequence"] != last || st["subscribed"] != true) {
			t.Errorf("leader status %v, want last_sequence %d and subscribed", st, last)
		}
	}
}

// mpDecode decodes one MessagePack value (the subset the publisher writes) for the tests.
func mpDecode(b []byte) (any, []byte, error) {
	if len(b) == 0 {
		return nil, nil, fmt.Errorf("short")
	}
	t, b := b[0], b[1:]
	need := func(n int) ([]byte, []byte, error) {
		if len(b) < n {
			return nil, nil, fmt.Errorf("short")
		}
		return b[:n], b[n:], nil
	}
	items := func(n int, pairs bool) (any, []byte, error) {
		if pairs {
			m := map[string]any{}
			for range n {
				k, rest, err := mpDecode(b)
				if err != nil {
					return nil, nil, err
				}
				v, rest, err := mpDecode(rest)
				if err != nil {
					return nil, nil, err
				}
				m[fmt.Sprint(k)], b = v, rest
			}
			return m, b, nil
		}
		a := []any{}
		for range n {
			v, rest, err := mpDecode(b)
			if err != nil {
				return nil, nil, err
			}
			a, b = append(a, v), rest
		}
		return a, b, nil
	}
	var err error
	var p []byte
	switch {
	case t < 0x80:
		return uint64(t), b, nil
	case t&0xf0 == 0x80:
		return items(int(t&0x0f), true)
	case t&0xf0 == 0x90:
		return items(int(t&0x0f), false)
	case t&0xe0 == 0xa0:
		p, b, err = need(int(t & 0x1f))
		return string(p), b, err
	case t == 0xc0:
		return nil, b, nil
	case t == 0xcc, t == 0xcd, t == 0xce, t == 0xcf, t == 0xd3:
		n := map[byte]int{0xcc: 1, 0xcd: 2, 0xce: 4, 0xcf: 8, 0xd3: 8}[t]
		if p, b, err = need(n); err != nil {
			return nil, nil, err
		}
		var v uint64
		for _, c := range p {
			v = v<<8 | uint64(c)
		}
		if t == 0xd3 {
			return int64(v), b, nil
		}
		return v, b, nil
	case t == 0xd9, t == 0xda, t == 0xdb:
		n := map[byte]int{0xd9: 1, 0xda: 2, 0xdb: 4}[t]
		if p, b, err = need(n); err != nil {
			return nil, nil, err
		}
		l := 0
		for _, c := range p {
			l = l<<8 | int(c)
		}
		p, b, err = need(l)
		return string(p), b, err
	case t == 0xdc, t == 0xdd, t == 0xde, t == 0xdf:
		n := map[byte]int{0xdc: 2, 0xdd: 4, 0xde: 2, 0xdf: 4}[t]
		if p, b, err = need(n); err != nil {
			return nil, nil, err
		}
		l := 0
		for _, c := range p {
			l = l<<8 | int(c)
		}
		if l > math.MaxInt32 {
			return nil, nil, fmt.Errorf("too long")
		}
		return items(l, t >= 0xde)
	}
	return nil, nil, fmt.Errorf("type %#x", t)
}
