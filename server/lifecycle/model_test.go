package lifecycle

import (
	"flag"
	"fmt"
	"maps"
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
// It also checks invariants over the effects every event returns: a worker is told to drop
// only what it had (a put placed on it, a copy sent to it, an object a scan or task listed
// on it), and is never owed a drop of a put that ended (its bytes are the object's), also
// when the put was superseded, revoked or expired while its PutEnd entry was in raft and the
// entry then committed it; a PutEnd of a put in flight commits its placed workers; a
// heartbeat answers only the worker that sent it; a scan is asked for only while the repair
// queue is idle, and no more often than ScanEvery unless forced; expired puts are exactly the
// reservations past their deadline; reports (WorkerLost, WorkerLeft, WorkerLeaving,
// WorkerBack, WorkerUnreachable) match the model.
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
	// had names what each worker was given or listed with (key@version); ended the puts that
	// ended (their bytes are the object's). drops counts the drops handed out.
	type holding struct {
		w   base.WorkerID
		key string
		v   base.Version
	}
	had := map[holding]bool{}
	ended := map[base.KeyVersion]bool{}
	// committing: the puts whose PutEnd entry is in raft (BeginEnd), by key; dropped: the
	// versions whose drop some worker was handed.
	type entry struct {
		base.KeyVersion
		workers []base.WorkerID
	}
	committing := map[string]entry{}
	var version base.Version // the last put's version
	dropped := map[base.KeyVersion]bool{}
	drops := 0
	var lastScan time.Time
	scans := 0
	// tasks: the status each task had last; a status only moves forward.
	tasks := map[base.TaskID]base.TaskStatus{}
	// taskEnds: the tasks a TaskEnded reported, each once, with the status the task holds.
	taskEnds := map[base.TaskID]base.TaskStatus{}
	var nextTask uint64
	var check func(effs []Effect)
	check = func(effs []Effect) {
		t.Helper()
		for _, e := range effs {
			switch e := e.(type) {
			case Propose:
				switch c := e.Cmd.(type) {
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
						if out := m.Failed(now, c); len(out) > 0 {
							t.Fatalf("%v: a failed MarkWorkerLost returned %v", now.Sub(epoch), out)
						}
						w.dead = false
						break
					}
					out := m.Applied(now, c, raftmeta.Result{})
					if want := (WorkerLost{ID: c.ID, Grace: !w.leaving.IsZero()}); len(out) != 1 || out[0] != Effect(want) {
						t.Fatalf("%v: MarkWorkerLost %s committed: %v, want %v", now.Sub(epoch), c.ID, out, want)
					}
				case raftmeta.MoveReplicas, raftmeta.AddReplicas:
					// A finished copy's commit: refused now and then, or not committed at all.
					res := raftmeta.Result{Items: []error{nil}}
					switch r.IntN(6) {
					case 0, 1:
						res.Items[0] = fmt.Errorf("refused")
					case 2:
						check(m.Failed(now, c))
						continue
					}
					check(m.Applied(now, c, res))
				default:
					t.Fatalf("%v: unexpected proposal %T", now.Sub(epoch), c)
				}
			case Copy:
				o := e.Order
				if _, dup := inflight[o.Key]; dup {
					t.Fatalf("two copies of %s in flight", o.Key)
				}
				if o.To == o.Src || !m.Placeable(o.To) {
					t.Fatalf("copy %+v to a holder or an unplaceable worker", o)
				}
				inflight[o.Key] = o
				had[holding{o.To, o.Key, o.Version}] = true
			case TaskEnded:
				tk, ok := m.Task(e.ID)
				if _, dup := taskEnds[e.ID]; dup || !ok || tk.Status != e.Status || e.Status < base.TaskSuccess ||
					tk.Type != e.Type || tk.Key != e.Key || tk.Message != e.Message {
					t.Fatalf("%v: %+v reported (ended before: %t; the task: %+v)", now.Sub(epoch), e, dup, tk)
				}
				taskEnds[e.ID] = e.Status
			case ScanRepairs:
				if st := m.RepairStats(); st.Queued+st.InFlight > 0 {
					t.Fatalf("%v: scan asked for with %d copies queued, %d in flight", now.Sub(epoch), st.Queued, st.InFlight)
				}
				if !e.Force && scans > 0 && now.Sub(lastScan) < m.cfg.Repair.ScanEvery {
					t.Fatalf("%v: scan asked for %v after the last one", now.Sub(epoch), now.Sub(lastScan))
				}
				lastScan = now
				scans++
			default:
				t.Fatalf("%v: unexpected effect %#v", now.Sub(epoch), e)
			}
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
	// answered checks a heartbeat's answer to worker id.
	answered := func(step int, id base.WorkerID, effs []Effect, leaving bool) {
		t.Helper()
		for i, e := range effs {
			switch e := e.(type) {
			case WorkerLeaving:
				if !leaving || i != 0 || e.ID != id || !e.Until.Equal(m.Deadline(id)) {
					t.Fatalf("step %d: heartbeat of %s (leaving %t): %#v at %d", step, id, leaving, e, i)
				}
			case Reregister:
				if e.Worker != id {
					t.Fatalf("step %d: heartbeat of %s answered %#v", step, id, e)
				}
			case Drop:
				if e.Worker != id {
					t.Fatalf("step %d: heartbeat of %s answered %#v", step, id, e)
				}
				for _, kv := range e.Items {
					if !had[holding{id, kv.Key, kv.Version}] {
						t.Fatalf("step %d: %s told to drop %s@%d, which it never had", step, id, kv.Key, kv.Version)
					}
					if ended[kv] {
						t.Fatalf("step %d: %s told to drop %s@%d, a put that ended", step, id, kv.Key, kv.Version)
					}
					drops++
					dropped[kv] = true
				}
			case Settled:
				// Last, and only when the leader owes the worker nothing more.
				if e.Worker != id || i != len(effs)-1 || m.DropsOwed(id) != 0 {
					t.Fatalf("step %d: heartbeat of %s answered %#v at %d of %d, %d drops owed", step, id, e, i, len(effs), m.DropsOwed(id))
				}
			default:
				t.Fatalf("step %d: heartbeat of %s answered %#v", step, id, e)
			}
		}
		if leaving && (len(effs) == 0 || effs[0] != Effect(WorkerLeaving{ID: id, Until: m.Deadline(id)})) {
			t.Fatalf("step %d: heartbeat of %s leaving: %v", step, id, effs)
		}
	}
	// 20000 steps: workers die often here, so drops reach a heartbeat rarely; with 5000 a
	// drop owed to the wrong worker went unnoticed in most runs.
	for step := range 20000 {
		now = now.Add(time.Duration(r.IntN(3000)) * time.Millisecond)
		id := ids[r.IntN(len(ids))]
		w := mw[id]
		switch p := r.IntN(100); {
		case p < 36:
			leaving := r.IntN(30) == 0
			effs, err := m.Heartbeat(now, id, Usage{}, leaving)
			if (err == nil) == (w.dead || w.left) {
				t.Fatalf("step %d: heartbeat of %s: %v, model dead=%t left=%t", step, id, err, w.dead, w.left)
			}
			answered(step, id, effs, leaving && err == nil)
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
			effs := m.Detach(now, id, conn)
			got := len(effs) == 1 && effs[0] == Effect(WorkerUnreachable{ID: id})
			want := conn != 0 && conn == w.conn && !w.dead && !w.left && w.leaving.IsZero()
			if got != want || (!got && len(effs) > 0) {
				t.Fatalf("step %d: detach of %s conn %d: %v, model unreachable=%t", step, id, conn, effs, want)
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
			want := raftmeta.LeaveWorker{ID: id, Keep: true, Now: now.UnixNano()} // every worker has an NVMe tier
			if len(out) != 1 || out[0] != Effect(Propose{want}) {
				t.Fatalf("step %d: Leave of %s: %v, want a LeaveWorker proposed", step, id, out)
			}
			if r.IntN(3) == 0 {
				if effs := m.Failed(now, want); len(effs) > 0 { // live again, with the deadline of its last message
					t.Fatalf("step %d: a failed LeaveWorker returned %v", step, effs)
				}
				w.left = false
			} else if effs := m.Applied(now, want, raftmeta.Result{}); len(effs) != 1 || effs[0] != Effect(WorkerLeft{ID: id, Keep: true}) {
				t.Fatalf("step %d: LeaveWorker of %s committed: %v", step, id, effs)
			}
		case p < 50:
			if w.dead || w.left {
				m.RegisterBegin(now, id)
				// A worker back from an announced restart is reported, and only such a one.
				_, effs := m.Registered(now, now, id, 1000, 1000)
				var want []Effect
				if !w.leaving.IsZero() {
					want = []Effect{WorkerBack{ID: id, Away: now.Sub(w.leaving)}}
				}
				if !slices.Equal(effs, want) {
					t.Fatalf("step %d: registration of %s: %v, want %v", step, id, effs, want)
				}
				w.dead, w.left, w.seen, w.leaving, w.disc = false, false, now, time.Time{}, time.Time{}
			}
		case p < 55:
			check(m.Applied(now, raftmeta.SetWorkerDraining{ID: id, Draining: r.IntN(2) == 0}, raftmeta.Result{}))
		case p < 62:
			// Reservations: place, end, revoke or expire, or commit a PutEnd (begin, then
			// committed, refused or unknown); the machine's Reserved per worker must always equal
			// the sizes of the puts in flight that name it.
			// Several operations a step: puts are few here (workers are often dead), and a
			// commit needs a put in flight.
			for range 4 {
				key := fmt.Sprintf("p%d", r.IntN(8))
				switch r.IntN(6) {
				case 0, 1:
					version++ // unique, as raftmeta's are
					if ids, err := m.PlacePut(now, base.Object{ObjectMeta: base.ObjectMeta{Key: key,
						Version: version, Size: int64(1 + r.IntN(100))}},
						base.PutConfig{Replicas: uint8(1 + r.IntN(2)), Upsert: r.IntN(2) == 0}, nil, TenantQuota{}, segs, r); err == nil {
						placed++
						for _, pid := range ids {
							had[holding{pid, key, version}] = true
							if w, _ := m.Worker(pid); w.State != Alive && w.State != Suspect {
								t.Fatalf("step %d: put placed on %s, which is %s", step, pid, w.State)
							}
						}
					}
				case 2:
					// (Not a put whose PutEnd entry is in raft: that entry decides, case 4.)
					if res, ok := m.Reservation(key); ok && committing[key].Version != res.Version {
						m.EndReservation(key, res.Version)
						ended[base.KeyVersion{Key: key, Version: res.Version}] = true
					}
				case 3:
					// A put's PutEnd entry goes to raft (any put in flight):
					// from here only the entry decides its drops.
					if keys := m.sortedKeys(); len(keys) > 0 {
						key = keys[r.IntN(len(keys))]
					}
					if res, ok := m.Reservation(key); ok && committing[key].Version == 0 {
						plan, err := m.BeginEnd(now, base.Object{ObjectMeta: base.ObjectMeta{Key: key, Version: res.Version, Size: res.Size}}, true)
						if err != nil || !plan.Reserved || !slices.Equal(plan.Workers, res.Workers) || !slices.Equal(plan.Replicas, res.Workers) {
							t.Fatalf("step %d: PutEnd of %s@%d (placed on %v): %+v, %v", step, key, res.Version, res.Workers, plan, err)
						}
						committing[key] = entry{base.KeyVersion{Key: key, Version: res.Version}, plan.Workers}
					}
				case 4:
					// The entry's outcome: committed (no drop of that version, ever), refused (its
					// workers are owed drops) or unknown (it keeps its reservation, if any).
					if keys := slices.Sorted(maps.Keys(committing)); len(keys) > 0 {
						key = keys[r.IntN(len(keys))]
					}
					c, ok := committing[key]
					if !ok {
						break
					}
					delete(committing, key)
					kv := base.KeyVersion{Key: key, Version: c.Version}
					switch r.IntN(3) {
					case 0:
						m.EndCommit(key, c.Version, c.workers, true)
						if dropped[kv] {
							t.Fatalf("step %d: %s@%d committed after its drop was handed out", step, key, c.Version)
						}
						ended[kv] = true
					case 1:
						m.EndCommit(key, c.Version, c.workers, false)
					default:
						m.AbandonCommit(key, c.Version)
					}
				default:
					m.DropReservation(key, 0)
				}
			}
			// No worker is owed (or was handed) a drop of a put that ended: the queues are read
			// here, as drops reach a heartbeat only now and then (workers die often here).
			for _, w := range m.workers {
				for _, kv := range w.drops {
					if ended[kv] {
						t.Fatalf("step %d: %s owed a drop of %s@%d, a put that ended", step, w.ID, kv.Key, kv.Version)
					}
				}
			}
			// The puts expired are exactly those past their deadline.
			var due []Effect
			for _, k := range m.sortedKeys() {
				if res, _ := m.Reservation(k); now.After(res.Deadline) {
					due = append(due, PutExpired{Key: k, Version: res.Version})
				}
			}
			if got := m.ExpireReservations(now); !slices.Equal(got, due) {
				t.Fatalf("step %d: expired %v, want %v", step, got, due)
			}
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
				for _, h := range append(slices.Clone(cands[k].Replicas), cands[k].Lost...) {
					had[holding{h, cands[k].Key, 1}] = true
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
				effs, err := m.CreateTask(now, tid, typ, TaskObject{Key: c.Key, Version: c.Version, Size: c.Size, Replicas: c.Replicas},
					c.Replicas[0], tgts, addrs)
				if err == nil {
					tasks[tid] = base.TaskPending
				}
				check(effs)
			}
			continue
		case p < 90:
			// One copy in flight ends (picked with r, so a seed replays the run).
			if keys := slices.Sorted(maps.Keys(inflight)); len(keys) > 0 {
				k := keys[r.IntN(len(keys))]
				o := inflight[k]
				var err error
				if r.IntN(3) == 0 {
					err = fmt.Errorf("failed")
				}
				delete(inflight, k)
				// Its MoveReplicas or AddReplicas is committed (or not) by check, and the
				// copies handed out next are checked as Tick's are.
				check(m.CopyDone(now, o, err))
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
	t.Logf("%d puts placed, %d drops handed out, %d scans asked for", placed, drops, scans)
	if drops == 0 || scans == 0 {
		t.Fatalf("%d drops handed out, %d scans asked for: the model checked nothing about them", drops, scans)
	}
	done := map[base.TaskStatus]int{}
	for id, st := range tasks {
		done[st]++
		if got, ok := taskEnds[id]; (st >= base.TaskSuccess) != ok || (ok && got != st) {
			t.Fatalf("task %s ended as %d, its TaskEnded report: %d (%t)", id, st, got, ok)
		}
	}
	return done
}
