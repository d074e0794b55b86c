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
// plus RestartGrace, or, when sooner, its connection's loss plus ConnGrace; a worker that
// left is never dead) and of repair (copies in flight are bounded, one per key, never to a
// worker that holds the object, never to a dead, leaving or draining worker).
//
// A run must finish tasks both ways (success and failure) for its task checks to mean
// something; a seed whose run does not is followed by the next seed, up to 8 in all.
func TestModel(t *testing.T) {
	s := *seed
	if s == 0 {
		s = uint64(time.Now().UnixNano())
	}
	for i := range uint64(8) {
		t.Logf("seed %d (rerun with -seed %d)", s+i, s+i)
		done := modelRun(t, s+i)
		if done[base.TaskSuccess] > 0 && done[base.TaskFailed] > 0 {
			return
		}
		t.Logf("tasks by status %v: no finished task of each kind, so the next seed too", done)
	}
	t.Fatal("8 seeds in a row finished no task of each kind: the model checked nothing about tasks")
}

// modelRun is one run of TestModel from seed s; it returns how many tasks ended in each status.
func modelRun(t *testing.T, s uint64) map[base.TaskStatus]int {
	t.Helper()
	r := rand.New(rand.NewPCG(s, 11))
	const ttl, grace, connGrace = 10 * time.Second, 25 * time.Second, 2 * time.Second
	m := New(Config{ClientTTL: ttl, RestartGrace: grace, ConnGrace: connGrace, PutTimeout: 30 * time.Second, HighWatermark: 0.95, Repair: RepairConfig{Concurrency: 3, BytesPerSec: 500}})
	ids := []base.WorkerID{"w0", "w1", "w2", "w3"}
	now := epoch
	type model struct {
		seen, leaving time.Time
		dead          bool
		// disc is when its attached connection broke (zero: attached, or never was); conn is
		// that connection's token (0: none); left: it left on purpose (LeaveWorker committed).
		disc time.Time
		conn uint64
		left bool
	}
	mw := map[base.WorkerID]*model{}
	var segs []raftmeta.Segment
	for _, id := range ids {
		segs = append(segs, raftmeta.Segment{ID: id, State: raftmeta.SegmentActive, DRAMCapacity: 1000, NVMeCapacity: 1000})
		mw[id] = &model{seen: now}
	}
	m.BecomeLeader(now, segs)
	inflight := map[string]CopyOrder{}
	placed := 0
	// tasks: the status each task had last; a status only moves forward.
	tasks := map[base.TaskID]base.TaskStatus{}
	var nextTask uint64
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
				if !w.disc.IsZero() && w.disc.Add(connGrace).Before(dl) {
					dl = w.disc.Add(connGrace)
				}
				if w.dead || w.left || !now.After(dl) {
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
			if (got.State == Dead) != w.dead || (got.State == Left) != w.left {
				t.Fatalf("%v: %s state %s, model dead=%t left=%t", now.Sub(epoch), id, got.State, w.dead, w.left)
			}
		}
	}
	for step := range 5000 {
		now = now.Add(time.Duration(r.IntN(3000)) * time.Millisecond)
		id := ids[r.IntN(len(ids))]
		w := mw[id]
		switch p := r.IntN(100); {
		case p < 36:
			leaving := r.IntN(30) == 0
			_, _, err := m.Heartbeat(now, id, Usage{}, leaving)
			if (err == nil) == (w.dead || w.left) {
				t.Fatalf("step %d: heartbeat of %s: %v, model dead=%t left=%t", step, id, err, w.dead, w.left)
			}
			if err == nil {
				w.seen = now
				if got, _ := m.Worker(id); got.State == Leaving {
					w.leaving = got.LeavingAt
				}
				if leaving {
					w.disc = time.Time{}
				}
			}
		case p < 40:
			// The worker's connection to the leader: attach, or the close of its current (or
			// an already replaced) connection.
			if r.IntN(2) == 0 {
				conn, err := m.Attach(now, id)
				if (err == nil) == (w.dead || w.left) {
					t.Fatalf("step %d: attach of %s: %v, model dead=%t left=%t", step, id, err, w.dead, w.left)
				}
				if err == nil {
					w.conn, w.disc, w.seen = conn, time.Time{}, now
				}
				break
			}
			conn := w.conn
			if r.IntN(4) == 0 && conn > 1 {
				conn-- // a stale token: some other connection
			}
			got := m.Detach(now, id, conn)
			want := conn != 0 && conn == w.conn && !w.dead && !w.left && w.leaving.IsZero()
			if got != want {
				t.Fatalf("step %d: detach of %s conn %d: unreachable=%t, model %t", step, id, conn, got, want)
			}
			if conn != 0 && conn == w.conn {
				w.conn = 0
			}
			if got {
				w.disc = now
			}
		case p < 43:
			// It leaves on purpose; the commit fails now and then (it is live again).
			out := m.Leave(now, id)
			if m.Placeable(id) {
				t.Fatalf("step %d: %s placeable after Leave", step, id)
			}
			// Left at once, whatever it was: never dead, no connection.
			w.left, w.dead, w.conn, w.disc = true, false, 0, time.Time{}
			if c := out.Propose[0]; r.IntN(3) == 0 {
				m.Failed(c) // live again, with the deadline of its last message
				w.left = false
			} else {
				m.Applied(c, raftmeta.Result{})
			}
		case p < 50:
			if w.dead || w.left {
				m.RegisterBegin(now, id)
				m.Registered(now, now, id, 1000, 1000)
				w.dead, w.left, w.seen, w.leaving, w.disc = false, false, now, time.Time{}, time.Time{}
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
			if r.IntN(2) == 0 {
				// A copy or move task on one of the same keys, to random targets: mostly
				// placeable ones not holding it (else most tasks are refused, draining workers
				// being common here), now and then any worker.
				c := cands[r.IntN(len(cands))]
				var fit []base.WorkerID
				for _, id := range ids {
					if m.Placeable(id) && !slices.Contains(c.Replicas, id) {
						fit = append(fit, id)
					}
				}
				if len(fit) == 0 || r.IntN(5) == 0 {
					fit = ids
				}
				typ, tgts := base.TaskType(r.IntN(2)), []base.WorkerID{fit[r.IntN(len(fit))]}
				if typ == base.TaskCopy && r.IntN(2) == 0 {
					tgts = append(tgts, fit[r.IntN(len(fit))])
				}
				nextTask++
				tid := base.TaskID{Lo: nextTask}
				err := m.CreateTask(now, tid, typ, TaskObject{Key: c.Key, Version: c.Version, Size: c.Size, Replicas: c.Replicas},
					c.Replicas[0], tgts, addrs)
				if err == nil {
					tasks[tid] = base.TaskPending
				}
			}
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
		for id, was := range tasks {
			tk, ok := m.Task(id)
			if !ok {
				t.Fatalf("step %d: task %s forgotten (fewer than MaxTasks)", step, id)
			}
			if tk.Status < was || (was >= base.TaskSuccess && tk.Status != was) {
				t.Fatalf("step %d: task %s went from %d to %d", step, id, was, tk.Status)
			}
			tasks[id] = tk.Status
		}
	}
	if placed == 0 {
		t.Fatal("no put was ever placed: the model checked nothing about reservations")
	}
	done := map[base.TaskStatus]int{}
	for _, st := range tasks {
		done[st]++
	}
	return done
}
