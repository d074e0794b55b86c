package lifecycle

import (
	"flag"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/mooncake-go/mooncake/internal/base"
	"github.com/mooncake-go/mooncake/raftmeta"
)

var seed = flag.Uint64("seed", 0, "TestModel's seed (0: a new one, printed)")

// TestModel drives the machine with random events and checks it against a dumb model of
// liveness (a worker is dead exactly when a MarkWorkerLost for it is outstanding, and one is
// only proposed past its last accepted message plus ClientTTL, or its leaving announcement
// plus RestartGrace) and of repair (copies in flight are bounded, one per key, never to a
// worker that holds the object, never to a dead, leaving or draining worker).
func TestModel(t *testing.T) {
	s := *seed
	if s == 0 {
		s = uint64(time.Now().UnixNano())
	}
	t.Logf("seed %d (rerun with -seed %d)", s, s)
	r := rand.New(rand.NewPCG(s, 11))
	const ttl, grace = 10 * time.Second, 25 * time.Second
	m := New(Config{ClientTTL: ttl, RestartGrace: grace, Repair: RepairConfig{Concurrency: 3, BytesPerSec: 500}})
	ids := []base.WorkerID{"w0", "w1", "w2", "w3"}
	now := epoch
	type model struct {
		seen, leaving time.Time
		dead          bool
	}
	mw := map[base.WorkerID]*model{}
	var segs []raftmeta.Segment
	for _, id := range ids {
		segs = append(segs, raftmeta.Segment{ID: id, State: raftmeta.SegmentActive, DRAMCapacity: 1000})
		mw[id] = &model{seen: now}
	}
	m.BecomeLeader(now, segs)
	inflight := map[string]CopyOrder{}
	placed := 0
	check := func(out Output) {
		t.Helper()
		for _, c := range out.Propose {
			switch c := c.(type) {
			case raftmeta.MarkWorkerLost:
				w := mw[c.ID]
				dl := w.seen.Add(ttl)
				if !w.leaving.IsZero() && w.leaving.Add(grace).After(dl) {
					dl = w.leaving.Add(grace)
				}
				if w.dead || !now.After(dl) {
					t.Fatalf("%v: MarkWorkerLost %s proposed (dead %t, deadline %v)", now.Sub(epoch), c.ID, w.dead, dl.Sub(epoch))
				}
				w.dead = true
				if r.IntN(4) == 0 { // the proposal fails
					m.Failed(c)
					w.dead = false
				}
			}
		}
		for _, o := range out.Copies {
			if _, dup := inflight[o.Key]; dup {
				t.Fatalf("two copies of %s in flight", o.Key)
			}
			if o.To == o.Src || !m.Placeable(o.To) {
				t.Fatalf("copy %+v to a holder or an unplaceable worker", o)
			}
			inflight[o.Key] = o
		}
		if len(inflight) > 3 {
			t.Fatalf("%d copies in flight, the bound is 3", len(inflight))
		}
		for id, w := range mw {
			got, _ := m.Worker(id)
			if (got.State == Dead) != w.dead {
				t.Fatalf("%v: %s state %s, model dead=%t", now.Sub(epoch), id, got.State, w.dead)
			}
		}
	}
	for step := range 5000 {
		now = now.Add(time.Duration(r.IntN(3000)) * time.Millisecond)
		id := ids[r.IntN(len(ids))]
		w := mw[id]
		switch p := r.IntN(100); {
		case p < 40:
			_, _, err := m.Heartbeat(now, id, Usage{}, r.IntN(30) == 0)
			if (err == nil) == w.dead {
				t.Fatalf("step %d: heartbeat of %s: %v, model dead=%t", step, id, err, w.dead)
			}
			if err == nil {
				w.seen = now
				if got, _ := m.Worker(id); got.State == Leaving {
					w.leaving = got.LeavingAt
				}
			}
		case p < 50:
			if w.dead {
				m.RegisterBegin(now, id)
				m.Registered(now, now, id, 1000, 0)
				w.dead, w.seen, w.leaving = false, now, time.Time{}
			}
		case p < 55:
			m.Applied(raftmeta.SetWorkerDraining{ID: id, Draining: r.IntN(2) == 0}, raftmeta.Result{})
		case p < 62:
			// Reservations: place, end, revoke or expire; the machine's Reserved per worker must
			// always equal the sizes of the puts in flight that name it.
			key := fmt.Sprintf("p%d", r.IntN(8))
			switch r.IntN(4) {
			case 0, 1:
				if ids, err := m.PlacePut(now, PutRequest{Key: key, Version: base.Version(step + 1), Size: int64(1 + r.IntN(100)),
					Replicas: 1 + r.IntN(2), Upsert: r.IntN(2) == 0}, segs, r); err == nil {
					placed++
					for _, pid := range ids {
						if w, _ := m.Worker(pid); w.State != Alive && w.State != Suspect {
							t.Fatalf("step %d: put placed on %s, which is %s", step, pid, w.State)
						}
					}
				}
			case 2:
				if res, ok := m.Reservation(key); ok {
					m.EndReservation(key, res.Version)
				}
			default:
				m.DropReservation(key, 0)
			}
			m.ExpireReservations(now)
			for _, w := range m.Workers() {
				var want int64
				for _, k := range m.sortedKeys() {
					if res, _ := m.Reservation(k); slices.Contains(res.Workers, w.ID) {
						want += res.Size
					}
				}
				if w.Reserved != want {
					t.Fatalf("step %d: %s reserved %d, its puts in flight hold %d", step, w.ID, w.Reserved, want)
				}
			}
		case p < 75:
			var cands []Candidate
			for k := range 6 {
				reps := []base.WorkerID{ids[r.IntN(4)]}
				cands = append(cands, Candidate{Key: fmt.Sprintf("k%d", k), Version: 1, Size: int64(1 + r.IntN(200)),
					Replicas: reps, Lost: []base.WorkerID{ids[r.IntN(4)]}})
				if cands[k].Lost[0] == reps[0] {
					cands[k].Lost = nil
				}
			}
			var targets []Target
			addrs := map[base.WorkerID]string{}
			for _, id := range ids {
				targets = append(targets, Target{ID: id, Address: "a", Free: int64(r.IntN(1000))})
				addrs[id] = "a"
			}
			m.Plan(cands, targets, addrs, 0, 0)
			continue
		case p < 90:
			for k, o := range inflight {
				var err error
				if r.IntN(3) == 0 {
					err = fmt.Errorf("failed")
				}
				out := m.CopyDone(o, err)
				for _, c := range out.Propose {
					res := raftmeta.Result{Items: []error{nil}}
					if r.IntN(3) == 0 {
						res.Items[0] = fmt.Errorf("refused")
					}
					m.Applied(c, res)
				}
				delete(inflight, k)
				break
			}
			continue
		}
		check(m.Tick(now))
		if got := m.RepairStats().InFlight; got != len(inflight) {
			t.Fatalf("step %d: %d in flight, the model has %d", step, got, len(inflight))
		}
	}
	if placed == 0 {
		t.Fatal("no put was ever placed: the model checked nothing about reservations")
	}
}
