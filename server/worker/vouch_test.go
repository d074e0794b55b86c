package worker

import (
	"fmt"
	"testing"
	"time"

	"github.com/cockroachdb/datadriven"
)

// TestVouch runs testdata/vouch: when a worker may serve reads from kept lookups, after a
// script of heartbeat answers, failures, drop fetches and registrations. Times are offsets
// from an epoch; the window is vouchWindow of a 1 s heartbeat interval (1.5 s).
//
//	answer sent=<d> [settled] [reregister] [fetch]  a heartbeat call's answer (drops applied)
//	fail [fetch]                                      a heartbeat call that failed
//	fetch                                             an early drop fetch starts
//	register-start / register-done                    a registration (reconciles earlier failures)
//	ok now=<d>                                        whether a kept-lookup read is served
func TestVouch(t *testing.T) {
	epoch := time.Unix(1_700_000_000, 0)
	window := vouchWindow(time.Second)
	datadriven.Walk(t, "testdata/vouch", func(t *testing.T, path string) {
		var v vouch
		var regs []uint64 // registrations started, not done (a stack: the script nests none)
		datadriven.RunTest(t, path, func(t *testing.T, d *datadriven.TestData) string {
			at := func() time.Time {
				var s string
				for _, a := range d.CmdArgs {
					if a.Key == "sent" || a.Key == "now" {
						s = a.Vals[0]
					}
				}
				dur, err := time.ParseDuration(s)
				if err != nil {
					d.Fatalf(t, "time %q: %v", s, err)
				}
				return epoch.Add(dur)
			}
			switch d.Cmd {
			case "answer":
				v.answered(d.HasArg("fetch"), d.HasArg("settled"), d.HasArg("reregister"), at(), window)
			case "fail":
				v.failed(d.HasArg("fetch"))
			case "fetch":
				v.fetchStarted()
			case "register-start":
				regs = append(regs, v.registering())
			case "register-done":
				v.registered(regs[len(regs)-1])
				regs = regs[:len(regs)-1]
			case "ok":
				return fmt.Sprint(v.ok(at()))
			default:
				d.Fatalf(t, "unknown command %q", d.Cmd)
			}
			return "ok"
		})
	})
}
