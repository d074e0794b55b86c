package testutil

import (
	"testing"

	"go.uber.org/goleak"
)

// VerifyNoLeaks runs the package's tests and fails the run if any goroutine started by them is
// still running at the end. Call it from TestMain:
//
//	func TestMain(m *testing.M) { testutil.VerifyNoLeaks(m) }
//
// Extra options ignore goroutines the package cannot stop (a library's global worker).
func VerifyNoLeaks(m *testing.M, opts ...goleak.Option) {
	opts = append(opts,
		// pebble and raft start these process-wide and never stop them.
		goleak.IgnoreAnyFunction("github.com/cockroachdb/pebble/v2/internal/invariants.CloseChecker"),
		goleak.IgnoreTopFunction("github.com/hashicorp/go-metrics.(*InmemSink).run"),
		goleak.IgnoreTopFunction("github.com/armon/go-metrics.(*InmemSink).run"),
	)
	goleak.VerifyTestMain(m, opts...)
}
