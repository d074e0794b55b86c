package lifecycle

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/datadriven"

	"github.com/mooncake-go/mooncake/internal/base"
	"github.com/mooncake-go/mooncake/internal/testutil"
	"github.com/mooncake-go/mooncake/raftmeta"
)

func TestMain(m *testing.M) { testutil.VerifyNoLeaks(m) }

// epoch is the scripts' time zero: times in scripts are durations after it.
var epoch = time.Unix(1_000_000, 0)

// TestMachine runs the scripts in testdata/. Commands (times are durations from time zero):
//
//	new ttl=<d> [grace=<d>] [conn-grace=<d>] [concurrency=<n>] [rate=<bytes/s>]
//	leader now=<d>              input: <id> active|dead|left [bytes=<n>] [cap=<n>] [draining]
//	step-down
//	heartbeat id=<w> now=<d> [leaving] [used=<n>]
//	tick now=<d>
//	register-begin id=<w> now=<d> | registered id=<w> now=<d> [recv=<d>] [cap=<n>] [nvme=<n>]
//	attach id=<w> now=<d>       (prints the connection's token)
//	detach id=<w> now=<d> conn=<n>
//	leave id=<w> now=<d>        (prints the LeaveWorker to propose)
//	leave-committed id=<w> [keep] [err|refused] | leave-failed id=<w> [keep]
//	register-failed id=<w>      (the RegisterWorker commit failed)
//	failed-lost id=<w>          (the MarkWorkerLost proposal was not committed)
//	lost-committed id=<w>       (it committed)
//	drain id=<w> [cancel]       (SetWorkerDraining committed)
//	unregister id=<w>           (UnregisterWorker committed)
//	drop id=<w> key=<k> version=<n>
//	resync id=<w> [after=<d>]
//	reconciled id=<w> [overflow=<k@v>] [deferred=<n>] [spared=<n>]
//	plan [targets=<w>:<free>,...] [under=<n>] [draining=<n>]
//	                            input: <key> version=<n> size=<n> replicas=<w,...> [lost=<w,...>]
//	copy-done key=<k> [to=<w>] [now=<d>] [err]   (then the MoveReplicas is proposed)
//	move-applied key=<k> [err]  (the MoveReplicas of the copy of key committed, or failed)
//	place now=<d> key=<k> version=<n> size=<n> [replicas=<n>] [preferred=<w>] [upsert] [exclude=<w,...>]
//	                            input: the active segments, <id> cap=<n>
//	end key=<k> version=<n> | revoke key=<k> [version=<n>] | expire-puts now=<d>
//	begin-end key=<k> version=<n> size=<n> [replicas=(<w>,...)] [issued] [now=<d>]
//	                            (a PutEnd item; issued: this leadership issued its version)
//	end-commit key=<k> version=<n> workers=(<w>,...) [committed] | abandon-commit key=<k> version=<n>
//	page id=<w> now=<d> session=<n> page=<n> objects=<n> [more]   (one registration page)
//	expire-sessions now=<d>
//	new [max-objects=<n>] [total-bytes=<n>] [session-ttl=<d>] [put-timeout=<d>]
//	workers | repair | puts | sessions
//
// Every event prints the effects it returned (formatEffects; "ok" for none), then, for most,
// the state it changed. An event without now= happens at the latest time the script named.
func TestMachine(t *testing.T) {
	datadriven.Walk(t, "testdata", func(t *testing.T, path string) {
		var m *Machine
		var rng *rand.Rand
		orders := map[string]CopyOrder{}
		// clock is the latest time the script named (now=), for events that take none.
		clock := epoch
		datadriven.RunTest(t, path, func(t *testing.T, d *datadriven.TestData) string {
			at := func(key string) time.Time {
				var s string
				d.ScanArgs(t, key, &s)
				clock = epoch.Add(dur(t, s))
				return clock
			}
			// nowOr is now= when given, else the clock.
			nowOr := func() time.Time {
				if d.HasArg("now") {
					return at("now")
				}
				return clock
			}
			str := func(key string) string {
				var s string
				d.MaybeScanArgs(t, key, &s)
				return s
			}
			num := func(key string) int64 {
				var n int64
				d.MaybeScanArgs(t, key, &n)
				return n
			}
			id := base.WorkerID(str("id"))
			// workerIDs reads a list of worker ids, key=(w1,w2); nil when key is absent.
			workerIDs := func(key string) []base.WorkerID {
				var names []string
				d.MaybeScanArgs(t, key, &names)
				var out []base.WorkerID
				for _, n := range names {
					out = append(out, base.WorkerID(n))
				}
				return out
			}
			show := func(effs []Effect) string {
				for _, e := range effs {
					if c, ok := e.(Copy); ok {
						orders[c.Order.Key] = c.Order
						orders[c.Order.Key+">"+string(c.Order.To)] = c.Order
					}
				}
				return formatEffects(effs)
			}
			switch d.Cmd {
			case "new":
				cfg := Config{ClientTTL: dur(t, str("ttl")), Repair: RepairConfig{Concurrency: int(num("concurrency")), BytesPerSec: num("rate")},
					Sessions: SessionLimits{PerWorkerObjects: int(num("max-objects")), TotalBytes: num("total-bytes")}}
				if g := str("grace"); g != "" {
					cfg.RestartGrace = dur(t, g)
				}
				if g := str("conn-grace"); g != "" {
					cfg.ConnGrace = dur(t, g)
				}
				if g := str("session-ttl"); g != "" {
					cfg.Sessions.TTL = dur(t, g)
				}
				// The scripts' put timeout is 30s unless they name one, their high watermark
				// 0.95 (both are required).
				cfg.PutTimeout, cfg.HighWatermark = 30*time.Second, 0.95
				if g := str("put-timeout"); g != "" {
					cfg.PutTimeout = dur(t, g)
				}
				rng = rand.New(rand.NewPCG(1, 2))
				m = New(cfg)
				return "ok\n"
			case "leader":
				var segs []raftmeta.Segment
				for _, line := range lines(d.Input) {
					f := strings.Fields(line)
					s := raftmeta.Segment{ID: base.WorkerID(f[0]), State: raftmeta.SegmentActive}
					switch f[1] {
					case "dead":
						s.State = raftmeta.SegmentDead
					case "left":
						s.State = raftmeta.SegmentLeft
					}
					for _, kv := range f[2:] {
						k, v, _ := strings.Cut(kv, "=")
						switch k {
						case "bytes":
							s.Bytes = atoi(t, v)
						case "cap":
							s.DRAMCapacity = atoi(t, v)
						case "draining":
							s.Draining = true
						}
					}
					segs = append(segs, s)
				}
				m.BecomeLeader(at("now"), segs)
				return formatWorkers(m)
			case "step-down":
				m.StepDown()
				return formatWorkers(m)
			case "heartbeat":
				effs, err := m.Heartbeat(at("now"), id, Usage{DRAMUsed: num("used")}, d.HasArg("leaving"))
				if err != nil {
					return "error: " + err.Error() + "\n"
				}
				return show(effs)
			case "tick":
				return show(m.Tick(at("now"))) + formatWorkers(m)
			case "register-begin":
				m.RegisterBegin(at("now"), id)
				return formatWorkers(m)
			case "register-failed":
				m.RegisterFailed(id)
				return formatWorkers(m)
			case "registered":
				now := at("now")
				recv := now
				if r := str("recv"); r != "" {
					recv = epoch.Add(dur(t, r))
				}
				reg, effs := m.Registered(now, recv, id, num("cap"), num("nvme"))
				out := show(effs)
				if !reg.Prev.IsZero() {
					out += fmt.Sprintf("previous registration at %v\n", reg.Prev.Sub(epoch))
				}
				if reg.InGrace {
					out += "in the leader's grace\n"
				}
				return out + formatWorkers(m)
			case "attach":
				conn, err := m.Attach(at("now"), id)
				if err != nil {
					return "error: " + err.Error() + "\n" + formatWorkers(m)
				}
				return fmt.Sprintf("conn=%d\n", conn) + formatWorkers(m)
			case "detach":
				return show(m.Detach(at("now"), id, uint64(num("conn")))) + formatWorkers(m)
			case "leave":
				return show(m.Leave(at("now"), id)) + formatWorkers(m)
			case "leave-committed":
				var res raftmeta.Result
				switch {
				case d.HasArg("err"):
					res.Err = fmt.Errorf("leave: %w", base.ErrSegmentNotFound)
				case d.HasArg("refused"):
					res.Err = fmt.Errorf("leave: %w", base.ErrInvalidParams)
				}
				return show(m.Applied(clock, raftmeta.LeaveWorker{ID: id, Keep: d.HasArg("keep")}, res)) + formatPuts(m) + formatWorkers(m)
			case "leave-failed":
				return show(m.Failed(clock, raftmeta.LeaveWorker{ID: id, Keep: d.HasArg("keep")})) + formatWorkers(m)
			case "lost-committed":
				return show(m.Applied(clock, raftmeta.MarkWorkerLost{ID: id}, raftmeta.Result{})) + formatPuts(m)
			case "failed-lost":
				return show(m.Failed(clock, raftmeta.MarkWorkerLost{ID: id})) + formatWorkers(m)
			case "drain":
				return show(m.Applied(clock, raftmeta.SetWorkerDraining{ID: id, Draining: !d.HasArg("cancel")}, raftmeta.Result{})) + formatWorkers(m)
			case "unregister":
				return show(m.Applied(clock, raftmeta.UnregisterWorker{ID: id}, raftmeta.Result{})) + formatWorkers(m)
			case "drop":
				m.QueueDrop(id, str("key"), base.Version(num("version")))
				return fmt.Sprintf("owed %d\n", m.DropsOwed(id))
			case "reconciled":
				var overflow []base.KeyVersion
				for _, kv := range workerIDs("overflow") {
					k, v, _ := strings.Cut(string(kv), "@")
					overflow = append(overflow, base.KeyVersion{Key: k, Version: base.Version(atoi(t, v))})
				}
				m.Reconciled(id, overflow, int(num("deferred")), int(num("spared")))
				return formatWorkers(m)
			case "resync":
				var after time.Time
				if a := str("after"); a != "" {
					after = epoch.Add(dur(t, a))
				}
				m.resync(id, after)
				return "ok\n"
			case "plan":
				var targets []Target
				addrs := map[base.WorkerID]string{}
				for _, w := range m.Workers() {
					if w.State != Dead {
						addrs[w.ID] = string(w.ID) + ":1"
					}
				}
				if ts := str("targets"); ts != "" {
					for _, tv := range strings.Split(ts, ",") {
						w, free, _ := strings.Cut(tv, ":")
						targets = append(targets, Target{ID: base.WorkerID(w), Address: w + ":1", Free: atoi(t, free)})
					}
				}
				var cands []Candidate
				for _, line := range lines(d.Input) {
					cands = append(cands, parseCandidate(t, line))
				}
				planned := m.Plan(cands, targets, addrs, int(num("under")), int(num("draining")))
				return fmt.Sprintf("planned=%t\n", planned) + formatRepair(m)
			case "copy-done":
				o, ok := orders[orderName(str("key"), str("to"))]
				if !ok {
					t.Fatalf("no copy order for %q", str("key"))
				}
				var err error
				if d.HasArg("err") {
					err = errors.New("copy failed")
				}
				return show(m.CopyDone(nowOr(), o, err))
			case "task":
				effs, err := createTask(t, m, d, at("now"), str, workerIDs)
				if err != nil {
					return fmt.Sprintf("error: %v\n", err)
				}
				return show(effs) + formatRepair(m)
			case "query":
				return formatTask(m, base.TaskID{Lo: uint64(num("id"))})
			case "resent":
				typ := base.TaskCopy
				if str("type") == "move" {
					typ = base.TaskMove
				}
				resent, err := m.TaskResent(base.TaskID{Lo: uint64(num("id"))}, typ, str("key"))
				if err != nil {
					return fmt.Sprintf("error: %v\n", err)
				}
				return fmt.Sprintf("resent=%t\n", resent)
			case "add-applied":
				o := orders[orderName(str("key"), str("to"))]
				c := raftmeta.AddReplicas{Worker: o.To, Items: []base.KeyVersion{{Key: o.Key, Version: o.Version}}}
				res := raftmeta.Result{Items: []error{nil}}
				if d.HasArg("err") {
					res.Items[0] = fmt.Errorf("add: %w", base.ErrObjectNotFound)
				}
				effs := m.Applied(nowOr(), c, res)
				return show(effs) + formatRepair(m) + fmt.Sprintf("drops owed: to %d\n", m.DropsOwed(o.To))
			case "move-applied":
				o := orders[orderName(str("key"), str("to"))]
				c := raftmeta.MoveReplicas{Items: []raftmeta.ReplicaMove{{Key: o.Key, Version: o.Version, From: o.From, To: o.To}}}
				res := raftmeta.Result{Items: []error{nil}}
				if d.HasArg("err") {
					res.Items[0] = fmt.Errorf("move: %w", base.ErrObjectNotFound)
				}
				effs := m.Applied(nowOr(), c, res)
				return show(effs) + formatRepair(m) + fmt.Sprintf("drops owed: from %d, to %d\n", m.DropsOwed(o.From), m.DropsOwed(o.To))
			case "place":
				var segs []raftmeta.Segment
				for _, line := range lines(d.Input) {
					f := strings.Fields(line)
					cp, _ := strings.CutPrefix(f[1], "cap=")
					segs = append(segs, raftmeta.Segment{ID: base.WorkerID(f[0]), DRAMCapacity: atoi(t, cp), State: raftmeta.SegmentActive})
				}
				ids, err := m.PlacePut(at("now"), base.Object{ObjectMeta: base.ObjectMeta{Key: testutil.ScriptKey(str("key")),
					Version: base.Version(num("version")), Size: num("size")}},
					base.PutConfig{Replicas: uint8(num("replicas")), PreferredWorker: base.WorkerID(str("preferred")), Upsert: d.HasArg("upsert")},
					workerIDs("exclude"), TenantQuota{DRAMBytes: num("quota"), Used: num("used")}, segs, rng)
				if err != nil {
					return "error: " + err.Error() + "\n"
				}
				return fmt.Sprintf("placed on %v\n", ids) + formatPuts(m)
			case "end":
				m.EndReservation(testutil.ScriptKey(str("key")), base.Version(num("version")))
				return formatPuts(m)
			case "revoke":
				ok := m.DropReservation(testutil.ScriptKey(str("key")), base.Version(num("version")))
				return fmt.Sprintf("revoked=%t\n", ok) + formatPuts(m)
			case "begin-end":
				plan, err := m.BeginEnd(nowOr(), base.Object{ObjectMeta: base.ObjectMeta{Key: str("key"), Version: base.Version(num("version")),
					Size: num("size")}, Replicas: workerIDs("replicas")}, d.HasArg("issued"))
				if err != nil {
					return "error: " + err.Error() + "\n"
				}
				return fmt.Sprintf("commit replicas=%v reserved=%t workers=%v upsert=%t\n", plan.Replicas, plan.Reserved, plan.Workers, plan.Upsert) +
					formatPuts(m)
			case "end-commit":
				m.EndCommit(str("key"), base.Version(num("version")), workerIDs("workers"), d.HasArg("committed"))
				return formatPuts(m) + formatWorkers(m)
			case "abandon-commit":
				m.AbandonCommit(str("key"), base.Version(num("version")))
				return formatPuts(m)
			case "expire-puts":
				return show(m.ExpireReservations(at("now"))) + formatPuts(m)
			case "page":
				inv := make([]base.ObjectMeta, num("objects"))
				for i := range inv {
					inv[i] = base.ObjectMeta{Key: fmt.Sprintf("o%d", i), Version: 1}
				}
				earlier, began, done, err := m.RegisterPage(at("now"), id, uint64(num("session")), uint32(num("page")),
					d.HasArg("more"), inv, int64(len(inv))*10)
				switch {
				case err != nil:
					return "error: " + err.Error() + "\n"
				case done:
					n := len(inv)
					for _, p := range earlier {
						n += len(p)
					}
					return fmt.Sprintf("done: %d earlier pages, %d objects, began %v\n", len(earlier), n, began.Sub(epoch)) + formatSessions(m)
				}
				return "accepted\n" + formatSessions(m)
			case "expire-sessions":
				return show(m.ExpireSessions(at("now"))) + formatSessions(m)
			case "puts":
				return formatPuts(m)
			case "sessions":
				return formatSessions(m)
			case "workers":
				return formatWorkers(m)
			case "repair":
				return formatRepair(m)
			}
			t.Fatalf("unknown command %q", d.Cmd)
			return ""
		})
	})
}

func dur(t *testing.T, s string) time.Duration {
	t.Helper()
	d, err := time.ParseDuration(s)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func atoi(t *testing.T, s string) int64 {
	t.Helper()
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func lines(s string) []string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if l = strings.TrimSpace(l); l != "" {
			out = append(out, l)
		}
	}
	return out
}

func workerList(s string) []base.WorkerID {
	var out []base.WorkerID
	for _, w := range strings.Split(s, ",") {
		if w != "" {
			out = append(out, base.WorkerID(w))
		}
	}
	return out
}

func parseCandidate(t *testing.T, line string) Candidate {
	t.Helper()
	f := strings.Fields(line)
	c := Candidate{Key: f[0]}
	for _, kv := range f[1:] {
		k, v, _ := strings.Cut(kv, "=")
		switch k {
		case "version":
			c.Version = base.Version(atoi(t, v))
		case "size":
			c.Size = atoi(t, v)
		case "replicas":
			c.Replicas = workerList(v)
		case "lost":
			c.Lost = workerList(v)
		default:
			t.Fatalf("unknown candidate field %q", kv)
		}
	}
	return c
}

// formatEffects prints effects one a line, in order ("ok" for none).
func formatEffects(effs []Effect) string {
	var b strings.Builder
	for _, e := range effs {
		switch e := e.(type) {
		case Propose:
			formatPropose(&b, e.Cmd)
		case Copy:
			o := e.Order
			fmt.Fprintf(&b, "copy %s@%d size=%d src=%s to=%s from=%s drain=%t", o.Key, o.Version, o.Size, o.Src, o.To, o.From, o.Drain)
			if o.Task != (base.TaskID{}) {
				fmt.Fprintf(&b, " task=%d add=%t", o.Task.Lo, o.Add)
			}
			b.WriteString("\n")
		case Drop:
			fmt.Fprintf(&b, "drop %s:", e.Worker)
			for _, kv := range e.Items {
				fmt.Fprintf(&b, " %s@%d", kv.Key, kv.Version)
			}
			b.WriteString("\n")
		case Reregister:
			fmt.Fprintf(&b, "reregister %s\n", e.Worker)
		case Settled:
			fmt.Fprintf(&b, "settled %s\n", e.Worker)
		case ScanRepairs:
			fmt.Fprintf(&b, "scan-repairs force=%t\n", e.Force)
		case Answer:
			fmt.Fprintf(&b, "answer err=%v\n", e.Err)
		case WorkerLost:
			fmt.Fprintf(&b, "worker-lost %s grace=%t replicas=%d\n", e.ID, e.Grace, e.Replicas)
		case WorkerLeft:
			fmt.Fprintf(&b, "worker-left %s keep=%t replicas=%d removed=%d\n", e.ID, e.Keep, e.Replicas, e.Removed)
		case WorkerLeaving:
			fmt.Fprintf(&b, "worker-leaving %s until=%v\n", e.ID, e.Until.Sub(epoch))
		case WorkerBack:
			fmt.Fprintf(&b, "worker-back %s away=%v\n", e.ID, e.Away)
		case WorkerUnreachable:
			fmt.Fprintf(&b, "worker-unreachable %s\n", e.ID)
		case PutExpired:
			fmt.Fprintf(&b, "put-expired %s@%d\n", e.Key, e.Version)
		case SessionExpired:
			fmt.Fprintf(&b, "session-expired %s pages=%d objects=%d idle=%v\n", e.ID, e.Pages, e.Objects, e.Idle)
		case TaskEnded:
			fmt.Fprintf(&b, "task-ended %d type=%d key=%s status=%d", e.ID.Lo, e.Type, e.Key, e.Status)
			if e.Message != "" {
				fmt.Fprintf(&b, " message=%s", e.Message)
			}
			b.WriteString("\n")
		default:
			panic(fmt.Sprintf("unknown effect %T", e))
		}
	}
	if b.Len() == 0 {
		return "ok\n"
	}
	return b.String()
}

func formatPropose(b *strings.Builder, c raftmeta.Command) {
	switch c := c.(type) {
	case raftmeta.MarkWorkerLost:
		fmt.Fprintf(b, "propose MarkWorkerLost %s now=%v\n", c.ID, time.Unix(0, c.Now).Sub(epoch))
	case raftmeta.LeaveWorker:
		fmt.Fprintf(b, "propose LeaveWorker %s keep=%t now=%v\n", c.ID, c.Keep, time.Unix(0, c.Now).Sub(epoch))
	case raftmeta.MoveReplicas:
		for _, it := range c.Items {
			fmt.Fprintf(b, "propose MoveReplicas %s@%d %s->%s\n", it.Key, it.Version, it.From, it.To)
		}
	case raftmeta.AddReplicas:
		for _, it := range c.Items {
			fmt.Fprintf(b, "propose AddReplicas %s@%d ->%s\n", it.Key, it.Version, c.Worker)
		}
	default:
		fmt.Fprintf(b, "propose %T\n", c)
	}
}

func formatWorkers(m *Machine) string {
	var b strings.Builder
	for _, w := range m.Workers() {
		fmt.Fprintf(&b, "%s %s last_seen=%v", w.ID, w.State, w.LastSeen.Sub(epoch))
		if !w.LeavingAt.IsZero() {
			fmt.Fprintf(&b, " leaving_at=%v", w.LeavingAt.Sub(epoch))
		}
		if !w.DisconnectedAt.IsZero() {
			fmt.Fprintf(&b, " disconnected_at=%v", w.DisconnectedAt.Sub(epoch))
		}
		if !w.LeftAt.IsZero() {
			fmt.Fprintf(&b, " left_at=%v", w.LeftAt.Sub(epoch))
		}
		if dl := m.Deadline(w.ID); !dl.IsZero() {
			fmt.Fprintf(&b, " deadline=%v", dl.Sub(epoch))
		}
		if w.Draining {
			b.WriteString(" draining")
		}
		if n := m.DropsOwed(w.ID); n > 0 {
			fmt.Fprintf(&b, " drops=%d", n)
		}
		b.WriteString("\n")
	}
	if b.Len() == 0 {
		return "(none)\n"
	}
	return b.String()
}

func formatRepair(m *Machine) string {
	s := m.RepairStats()
	return fmt.Sprintf("queued=%d in_flight=%d under_replicated=%d draining=%d copied=%d failed=%d copied_bytes=%d\n",
		s.Queued, s.InFlight, s.UnderReplicated, s.Draining, s.Copied, s.Failed, s.CopiedBytes)
}

func formatPuts(m *Machine) string {
	var b strings.Builder
	for _, k := range m.sortedKeys() {
		r, _ := m.Reservation(k)
		fmt.Fprintf(&b, "put %s@%d size=%d workers=%v deadline=%v upsert=%t\n", testutil.ShowKey(k), r.Version, r.Size, r.Workers, r.Deadline.Sub(epoch), r.Upsert)
	}
	for _, w := range m.Workers() {
		if w.Reserved != 0 {
			fmt.Fprintf(&b, "%s reserved=%d\n", w.ID, w.Reserved)
		}
	}
	b.WriteString(formatTenantsInFlight(m))
	if b.Len() == 0 {
		return "(no puts in flight)\n"
	}
	return b.String()
}

func formatSessions(m *Machine) string {
	n, bytes := m.Sessions()
	return fmt.Sprintf("sessions=%d bytes=%d\n", n, bytes)
}

// orderName is the name a script gives an order: its key, or key>to where a task copies a
// key to several targets.
func orderName(key, to string) string {
	if to != "" {
		return key + ">" + to
	}
	return key
}

// createTask runs a script's task command: task id=N type=copy|move now=D key=K version=V
// size=S replicas=(..) [source=W] targets=(..).
func createTask(t *testing.T, m *Machine, d *datadriven.TestData, now time.Time, str func(string) string,
	workerIDs func(string) []base.WorkerID) ([]Effect, error) {
	ids := func(key string) []base.WorkerID {
		return slices.DeleteFunc(workerIDs(key), func(id base.WorkerID) bool { return id == "" })
	}
	typ := base.TaskCopy
	if str("type") == "move" {
		typ = base.TaskMove
	}
	obj := TaskObject{Key: str("key"), Version: base.Version(atoi(t, str("version"))), Size: atoi(t, str("size")),
		Replicas: ids("replicas")}
	addrs := map[base.WorkerID]string{}
	for _, w := range m.Workers() {
		if w.State != Dead {
			addrs[w.ID] = string(w.ID) + ":1"
		}
	}
	id := base.TaskID{Lo: uint64(atoi(t, str("id")))}
	return m.CreateTask(now, id, typ, obj, base.WorkerID(str("source")), ids("targets"), addrs)
}

func formatTask(m *Machine, id base.TaskID) string {
	tk, ok := m.Task(id)
	if !ok {
		return "not found\n"
	}
	names := [...]string{"pending", "processing", "success", "failed"}
	s := fmt.Sprintf("task %d type=%d key=%s@%d status=%s created=%v updated=%v", id.Lo, tk.Type, tk.Key, tk.Version,
		names[tk.Status], tk.Created.Sub(epoch), tk.Updated.Sub(epoch))
	if tk.Message != "" {
		s += " message=" + tk.Message
	}
	return s + "\n"
}
