package policy

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/cockroachdb/datadriven"
	"github.com/mooncake-go/mooncake/internal/base"
	"github.com/mooncake-go/mooncake/internal/testutil"
)

func TestMain(m *testing.M) { testutil.VerifyNoLeaks(m) }

// TestPolicy runs the scripts in testdata/. Commands:
//
//	init capacity=N [high=F] [low=F] [protected=F] [promote=N] [lower]
//	add id=N size=N [mode=cache|spill|durable] [hard] [soft=T] [onlower] [keep]   (AddDRAM)
//	add-lower id=N size=N [mode=...] [hard] [keep]                                (AddLower)
//	hit id=N | acquire id=N | release id=N | remove id=N | promoted id=N
//	pin id=N [hard] [soft=T] | spill-done id=N [fail] | mark-on-lower id=N
//	reserve n=N | unreserve n=N
//	evict need=N [now=T] | need
//	evict-lower need=N [busy=ID,ID...]
//	state
//	shares TENANT=N ... | tenants        (SetTenantShares; add takes tenant=T)
//	nvme-shares TENANT=N ... | nvme-tenants | spill-plan id=N [busy=ID,ID...]
func TestPolicy(t *testing.T) {
	datadriven.Walk(t, "testdata", func(t *testing.T, path string) {
		var p *Policy
		datadriven.RunTest(t, path, func(t *testing.T, d *datadriven.TestData) string {
			id := func() ID {
				var n uint64
				d.ScanArgs(t, "id", &n)
				return ID(n)
			}
			errStr := func(err error) string {
				if err != nil {
					return "error: " + err.Error() + "\n"
				}
				return ""
			}
			switch d.Cmd {
			case "init":
				cfg := Config{HasLower: d.HasArg("lower")}
				d.ScanArgs(t, "capacity", &cfg.Capacity)
				d.MaybeScanArgs(t, "high", &cfg.HighWatermark)
				d.MaybeScanArgs(t, "low", &cfg.LowWatermark)
				d.MaybeScanArgs(t, "protected", &cfg.ProtectedShare)
				d.MaybeScanArgs(t, "promote", &cfg.PromoteOnHit)
				var err error
				p, err = New(cfg)
				if err != nil {
					return errStr(err)
				}
				return state(p)
			case "add", "add-lower":
				o := Object{ID: id(), Persistence: base.PersistenceSpill, HardPin: d.HasArg("hard"), OnLower: d.HasArg("onlower"),
					KeepLower: d.HasArg("keep")}
				d.ScanArgs(t, "size", &o.Size)
				d.MaybeScanArgs(t, "soft", &o.SoftPinUntil)
				d.MaybeScanArgs(t, "tenant", &o.Tenant)
				if d.HasArg("mode") {
					var m string
					d.ScanArgs(t, "mode", &m)
					var err error
					if o.Persistence, err = base.ParsePersistence(m); err != nil {
						t.Fatal(err)
					}
				}
				if d.Cmd == "add" {
					p.AddDRAM(o)
				} else {
					p.AddLower(o)
				}
				return state(p)
			case "hit":
				r := p.Hit(id())
				return fmt.Sprintf("loc=%s promote=%t\n", r.Loc, r.Promote) + state(p)
			case "acquire":
				p.Acquire(id())
				return ""
			case "release":
				p.Release(id())
				return ""
			case "remove":
				n := p.Remove(id())
				return fmt.Sprintf("freed %d\n", n) + state(p)
			case "promoted":
				release, err := p.Promoted(id())
				if err == nil {
					return fmt.Sprintf("release-lower=%t\n", release) + state(p)
				}
				return errStr(err) + state(p)
			case "pin":
				var soft int64
				d.MaybeScanArgs(t, "soft", &soft)
				return errStr(p.SetPins(id(), d.HasArg("hard"), soft)) + state(p)
			case "spill-done":
				return errStr(p.SpillDone(id(), !d.HasArg("fail"))) + state(p)
			case "mark-on-lower":
				return errStr(p.MarkOnLower(id())) + state(p)
			case "reserve", "unreserve":
				var n int64
				d.ScanArgs(t, "n", &n)
				if d.Cmd == "reserve" {
					p.Reserve(n)
				} else {
					p.Unreserve(n)
				}
				return state(p)
			case "evict", "evict-to-low":
				var need, now int64
				if d.Cmd == "evict" {
					d.ScanArgs(t, "need", &need)
				}
				d.MaybeScanArgs(t, "now", &now)
				var plan Plan
				if d.Cmd == "evict" {
					plan = p.Evict(need, now)
				} else {
					plan = p.EvictToLow(now)
				}
				var b strings.Builder
				for _, v := range plan.Victims {
					fmt.Fprintf(&b, "victim %d size=%d %s\n", v.ID, v.Size, v.Action)
				}
				if plan.NoSpace.Reason != ReasonNone {
					fmt.Fprintf(&b, "no space: %s\n", plan.NoSpace)
				}
				return b.String() + state(p)
			case "evict-lower":
				var need int64
				d.ScanArgs(t, "need", &need)
				busy := busyArg(t, d)
				var b strings.Builder
				for _, v := range p.EvictLower(need, busy) {
					fmt.Fprintf(&b, "victim %d size=%d %s\n", v.ID, v.Size, v.Action)
				}
				return b.String() + state(p)
			case "need":
				return fmt.Sprintf("need %d\n", p.NeedEviction())
			case "state":
				return state(p)
			case "shares":
				p.SetTenantShares(sharesArg(t, d))
				return formatTenants(p)
			case "tenants":
				return formatTenants(p)
			case "nvme-shares":
				p.SetTenantNVMeShares(sharesArg(t, d))
				return formatNVMeTenants(p)
			case "nvme-tenants":
				return formatNVMeTenants(p)
			case "spill-plan":
				victims, spill := p.SpillPlan(id(), busyArg(t, d))
				var b strings.Builder
				for _, v := range victims {
					fmt.Fprintf(&b, "victim %d size=%d %s\n", v.ID, v.Size, v.Action)
				}
				fmt.Fprintf(&b, "spill=%t\n", spill)
				return b.String() + state(p) + formatNVMeTenants(p)
			}
			t.Fatalf("unknown command %q", d.Cmd)
			return ""
		})
	})
}

// sharesArg reads TENANT=N arguments.
func sharesArg(t *testing.T, d *datadriven.TestData) map[string]int64 {
	shares := map[string]int64{}
	for _, a := range d.CmdArgs {
		n, err := strconv.ParseInt(a.Vals[0], 10, 64)
		if err != nil {
			t.Fatal(err)
		}
		shares[a.Key] = n
	}
	return shares
}

// busyArg reads busy=ID,ID... into a busy function for EvictLower and SpillPlan.
func busyArg(t *testing.T, d *datadriven.TestData) func(ID) bool {
	busy := map[ID]bool{}
	if d.HasArg("busy") {
		var ids []string
		d.ScanArgs(t, "busy", &ids)
		for _, s := range ids {
			var n uint64
			if _, err := fmt.Sscan(s, &n); err != nil {
				t.Fatal(err)
			}
			busy[ID(n)] = true
		}
	}
	return func(id ID) bool { return busy[id] }
}

// formatNVMeTenants shows each tenant's lower-tier bytes and NVMe share.
func formatNVMeTenants(p *Policy) string {
	var b strings.Builder
	for _, t := range slices.Sorted(maps.Keys(p.tenantLower)) {
		fmt.Fprintf(&b, "tenant %s lower=%d nvme-share=%d\n", t, p.TenantLower(t), p.nvmeShares[t])
	}
	return b.String()
}

// formatTenants shows each tenant's DRAM bytes and share, and who is over it.
func formatTenants(p *Policy) string {
	var b strings.Builder
	for _, t := range slices.Sorted(maps.Keys(p.tenantDRAM)) {
		fmt.Fprintf(&b, "tenant %s dram=%d share=%d\n", t, p.TenantDRAM(t), p.shares[t])
	}
	fmt.Fprintf(&b, "over share: %v\n", p.TenantsOverShare())
	return b.String()
}

func state(p *Policy) string {
	var b strings.Builder
	s := p.Stats()
	fmt.Fprintf(&b, "used=%d dram=%d/%dB spilling=%d/%dB pinned=%d/%dB lower=%d/%dB reserved=%d\n",
		p.Used(), s.DRAMObjects, s.DRAMBytes, s.SpillingObjects, s.SpillingBytes, s.PinnedObjects,
		s.PinnedBytes, s.LowerObjects, s.LowerBytes, s.Reserved)
	list := func(name string, l *list) {
		fmt.Fprintf(&b, "%s:", name)
		for e := l.front(); e != nil; e = l.next(e) {
			fmt.Fprintf(&b, " %d", e.ID)
		}
		b.WriteString("\n")
	}
	list("probation", &p.probation)
	list("protected", &p.protected)
	list("lower-lru", &p.lowerLRU)
	return b.String()
}

func TestConfigValidate(t *testing.T) {
	f := func(c Config) {
		t.Helper()
		if _, err := New(c); !errors.Is(err, base.ErrInvalidParams) {
			t.Fatalf("New(%+v) = %v, want ErrInvalidParams", c, err)
		}
	}
	f(Config{})
	f(Config{Capacity: -1})
	f(Config{Capacity: 10, HighWatermark: 0.5, LowWatermark: 0.6})
	f(Config{Capacity: 10, HighWatermark: 1.5})
	f(Config{Capacity: 10, ProtectedShare: 2})
	f(Config{Capacity: 10, PromoteOnHit: -1})
	if _, err := New(Config{Capacity: 10}); err != nil {
		t.Fatal(err)
	}
}

func TestUnknownIDs(t *testing.T) {
	p, _ := New(Config{Capacity: 100, HasLower: true})
	_, perr := p.Promoted(7)
	for _, err := range []error{perr, p.SetPins(7, true, 0), p.SpillDone(7, true), p.MarkOnLower(7)} {
		if !errors.Is(err, ErrUnknownObject) {
			t.Fatalf("got %v", err)
		}
	}
	if r := p.Hit(7); r.Loc != LocNone || r.Promote {
		t.Fatalf("hit of unknown: %+v", r)
	}
	if p.Remove(7) != 0 || p.Location(7) != LocNone {
		t.Fatal("unknown id")
	}
}
