package raftmeta

import (
	"bytes"
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/cockroachdb/datadriven"

	"github.com/mooncake-go/mooncake/internal/base"
	"github.com/mooncake-go/mooncake/internal/testutil"
)

// TestFSMDataDriven runs the scripts in testdata/fsm/*. Commands:
//
//	register-worker id=<w> [addr=<a>] [dram=<n>] [nvme=<n>]
//	unregister-worker id=<w> | mark-dead id=<w> | register-master id=<m> [addr=<a>]
//	mark-lost id=<w> [now=<n>] | drain id=<w> [cancel] | leave id=<w> [keep]
//	adopt worker=<w>                  input: <key> version=<n>
//	move                              input: <key> version=<n> from=<w> to=<w>
//	put [upsert] [now=<n>]            input: <key> size=<n> version=<n> [checksum=<n>] replicas=<w,...> [soft=<n>] [hard]
//	remove                            input: one key per line
//	remove-regex pattern=<re> | remove-all
//	drop worker=<w>                   input: <key> [version=<n>]
//	pin key=<k> [version=<n>] [soft=<n>] [hard]
//	objects | segments | masters | stats | snapshot-restore
//	tenant-quota (tenant=<t> | default) [dram=<n>] [nvme=<n>] | remove-tenant tenant=<t> (pattern=<re> | all) | tenants
//
// A key written @<tenant>/<key> is <key> in tenant <tenant> (base.TenantKey), and is shown so.
//
// Every command checks the invariants afterwards. Rewrite with -rewrite; only commit changes
// you understand.
func TestFSMDataDriven(t *testing.T) {
	datadriven.Walk(t, "testdata/fsm", func(t *testing.T, path string) {
		f := newFSM()
		var index uint64
		datadriven.RunTest(t, path, func(t *testing.T, d *datadriven.TestData) string {
			apply := func(c Command) string {
				index++
				if err := c.Validate(); err != nil {
					return "invalid: " + err.Error()
				}
				res := applyEncoded(t, f, index, c)
				checkInvariants(t, f.st)
				return formatResult(res)
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
			switch d.Cmd {
			case "register-worker":
				addr := str("addr")
				if addr == "" {
					addr = "127.0.0.1:1"
				}
				return apply(RegisterWorker{ID: base.WorkerID(str("id")), Address: addr, DRAMCapacity: num("dram"), NVMeCapacity: num("nvme")})
			case "unregister-worker":
				return apply(UnregisterWorker{ID: base.WorkerID(str("id"))})
			case "mark-dead":
				return apply(MarkWorkerDead{ID: base.WorkerID(str("id"))})
			case "mark-lost":
				return apply(MarkWorkerLost{ID: base.WorkerID(str("id")), Now: num("now")})
			case "leave":
				return apply(LeaveWorker{ID: base.WorkerID(str("id")), Keep: d.HasArg("keep"), Now: num("now")})
			case "drain":
				return apply(SetWorkerDraining{ID: base.WorkerID(str("id")), Draining: !d.HasArg("cancel")})
			case "adopt", "add":
				c := DropReplicas{Worker: base.WorkerID(str("worker"))}
				for _, line := range lines(d.Input) {
					f := strings.Fields(line)
					v, _ := strings.CutPrefix(f[1], "version=")
					c.Items = append(c.Items, base.KeyVersion{Key: f[0], Version: base.Version(atoi(t, v))})
				}
				if d.Cmd == "add" {
					return apply(AddReplicas(c))
				}
				return apply(AdoptReplicas(c))
			case "move":
				var c MoveReplicas
				for _, line := range lines(d.Input) {
					f := strings.Fields(line)
					mv := ReplicaMove{Key: f[0]}
					for _, kv := range f[1:] {
						k, v, _ := strings.Cut(kv, "=")
						switch k {
						case "version":
							mv.Version = base.Version(atoi(t, v))
						case "from":
							mv.From = base.WorkerID(v)
						case "to":
							mv.To = base.WorkerID(v)
						}
					}
					c.Items = append(c.Items, mv)
				}
				return apply(c)
			case "register-master":
				return apply(RegisterMaster{ID: str("id"), RPCAddr: str("addr")})
			case "put":
				c := PutEnd{Upsert: d.HasArg("upsert"), Now: num("now")}
				for _, line := range lines(d.Input) {
					c.Items = append(c.Items, parsePutItem(t, line))
				}
				return apply(c)
			case "remove":
				keys := lines(d.Input)
				for i, k := range keys {
					keys[i] = testutil.ScriptKey(k)
				}
				return apply(Remove{Keys: keys})
			case "tenant-quota":
				return apply(SetTenantQuota{Tenant: str("tenant"), DRAMBytes: num("dram"), NVMeBytes: num("nvme"), Default: d.HasArg("default")})
			case "remove-tenant":
				return apply(RemoveTenant{Tenant: str("tenant"), Pattern: str("pattern"), All: d.HasArg("all")})
			case "tenants":
				return formatTenants(f)
			case "remove-regex":
				return apply(RemoveRegex{Pattern: str("pattern")})
			case "remove-all":
				return apply(RemoveAll{})
			case "drop":
				c := DropReplicas{Worker: base.WorkerID(str("worker"))}
				for _, line := range lines(d.Input) {
					kv := base.KeyVersion{}
					for i, field := range strings.Fields(line) {
						if i == 0 {
							kv.Key = field
						} else if v, ok := strings.CutPrefix(field, "version="); ok {
							kv.Version = base.Version(atoi(t, v))
						}
					}
					c.Items = append(c.Items, kv)
				}
				return apply(c)
			case "register-model":
				return apply(RegisterModel{Name: str("name"), BytesPerToken: num("bpt"), Description: str("desc")})
			case "remove-model":
				return apply(RemoveModel{Name: str("name")})
			case "models":
				return formatModels(f.st.models())
			case "pin":
				return apply(SetPin{Key: str("key"), Version: base.Version(num("version")), SoftPinUntil: num("soft"), HardPin: d.HasArg("hard")})
			case "objects":
				var out []string
				f.rangePrefix("", func(o Object) bool {
					line := fmt.Sprintf("%s size=%d version=%d checksum=%d replicas=%s soft=%d hard=%t created=%d",
						testutil.ShowKey(o.Key), o.Size, o.Version, o.Checksum, joinWorkers(o.Replicas), o.SoftPinUntil, o.HardPin, o.Created)
					if o.Tokens != 0 || o.Model != "" {
						line += fmt.Sprintf(" tokens=%d model=%s", o.Tokens, o.Model)
					}
					if len(o.Lost) > 0 {
						line += " lost=" + joinWorkers(o.Lost)
					}
					out = append(out, line)
					return true
				})
				return strings.Join(out, "\n") + "\n"
			case "segments":
				var out []string
				for _, s := range f.st.segments() {
					line := fmt.Sprintf("%s addr=%s dram=%d nvme=%d state=%s objects=%d bytes=%d",
						s.ID, s.Address, s.DRAMCapacity, s.NVMeCapacity, s.State, s.Objects, s.Bytes)
					if s.DeadSince != 0 || s.Draining || s.LostReplicas != 0 {
						line += fmt.Sprintf(" dead_since=%d draining=%t lost=%d", s.DeadSince, s.Draining, s.LostReplicas)
					}
					out = append(out, line)
				}
				return strings.Join(out, "\n") + "\n"
			case "masters":
				var out []string
				for _, m := range f.st.masterList() {
					out = append(out, m.ID+" "+m.RPCAddr)
				}
				return strings.Join(out, "\n") + "\n"
			case "stats":
				s := f.stats()
				out := fmt.Sprintf("keys=%d key_bytes=%d bytes=%d replicas=%d soft_pinned=%d hard_pinned=%d segments=%d active=%d masters=%d applied=%d",
					s.Keys, s.KeyBytes, s.Bytes, s.Replicas, s.SoftPinned, s.HardPinned, s.Segments, s.Active, s.Masters, s.AppliedIndex)
				if s.Invisible != 0 || s.LostReplicas != 0 {
					out += fmt.Sprintf(" invisible=%d lost_replicas=%d", s.Invisible, s.LostReplicas)
				}
				return out + "\n"
			case "snapshot-restore":
				var buf bytes.Buffer
				if err := writeSnapshot(&buf, f.st, f.applied); err != nil {
					t.Fatal(err)
				}
				n := buf.Len()
				g := newFSM()
				if err := g.Restore(nopCloser{&buf}); err != nil {
					t.Fatal(err)
				}
				if diff := statesEqual(f.st, g.st); diff != "" {
					t.Fatal(diff)
				}
				f = g
				return fmt.Sprintf("restored %d bytes\n", n)
			}
			if out, ok := kvSessionScript(t, f, d, apply); ok {
				return out
			}
			t.Fatalf("unknown command %q", d.Cmd)
			return ""
		})
	})
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

func atoi(t *testing.T, s string) int64 {
	t.Helper()
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func parsePutItem(t *testing.T, line string) base.Object {
	t.Helper()
	fields := strings.Fields(line)
	it := base.Object{ObjectMeta: base.ObjectMeta{Key: testutil.ScriptKey(fields[0])}}
	for _, f := range fields[1:] {
		k, v, _ := strings.Cut(f, "=")
		switch k {
		case "size":
			it.Size = atoi(t, v)
		case "version":
			it.Version = base.Version(atoi(t, v))
		case "checksum":
			it.Checksum = uint64(atoi(t, v))
		case "soft":
			it.SoftPinUntil = atoi(t, v)
		case "hard":
			it.HardPin = true
		case "tokens":
			it.Tokens = atoi(t, v)
		case "model":
			it.Model = v
		case "replicas":
			for _, w := range strings.Split(v, ",") {
				it.Replicas = append(it.Replicas, base.WorkerID(w))
			}
		default:
			t.Fatalf("unknown put field %q", f)
		}
	}
	return it
}

func joinWorkers(ws []base.WorkerID) string {
	s := make([]string, len(ws))
	for i, w := range ws {
		s[i] = string(w)
	}
	return strings.Join(s, ",")
}

// formatResult prints a Result without its index, one line per item.
func formatResult(r Result) string {
	var b strings.Builder
	switch {
	case r.Items != nil:
		for i, err := range r.Items {
			fmt.Fprintf(&b, "item %d: %s\n", i, errOrOK(err))
		}
	case r.Err != nil:
		fmt.Fprintf(&b, "error: %v\n", r.Err)
	default:
		b.WriteString("ok\n")
	}
	if r.Removed != 0 || r.Dropped != 0 {
		fmt.Fprintf(&b, "removed=%d dropped=%d\n", r.Removed, r.Dropped)
	}
	return b.String()
}

func errOrOK(err error) string {
	if err == nil {
		return "ok"
	}
	return err.Error()
}
