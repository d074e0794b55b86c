package testutil

import (
	"io"
	"testing"
	"time"
)

// maxPollInterval bounds the pause between two checks of a polled condition: short enough
// that a test waits little past the moment its condition holds, long enough that a check (often
// an RPC or a metrics scrape) does not load a shared 2-core machine.
const maxPollInterval = 50 * time.Millisecond

// Poll checks cond until it returns nil or timeout passes, and returns cond's last error (nil
// when it held). The pause between checks starts at 1ms and doubles up to 50ms.
//
// Polling is for conditions no event reaches the test from: state in another process (the
// built binary, a Python or C client), in the kernel (a port being released), or behind an
// in-process cluster's RPC API (a worker's registration, a task's end), which the test
// observes as a user would. Code in the test's own process that can signal an event, or that
// runs on timers without real I/O (a testing/synctest bubble), is waited on that way instead.
func Poll(timeout time.Duration, cond func() error) error {
	deadline := time.Now().Add(timeout)
	pause := time.Millisecond
	for {
		err := cond()
		if err == nil {
			return nil
		}
		left := time.Until(deadline)
		if left <= 0 {
			return err
		}
		time.Sleep(min(pause, left))
		pause = min(2*pause, maxPollInterval)
	}
}

// WaitFor is Poll that fails t (Fatalf, naming what and cond's last error) when cond does not
// hold within timeout.
func WaitFor(t testing.TB, what string, timeout time.Duration, cond func() error) {
	t.Helper()
	if err := Poll(timeout, cond); err != nil {
		t.Fatalf("%s: not within %v: %v", what, timeout, err)
	}
}

// Trickle writes b to w one byte every interval, a peer too slow for a server's frame timeout,
// and returns at the first failed write (the server closed the connection) or at the end of b.
// The pace is the test's stimulus, measured by the server on its real clock; nothing waits on
// it.
func Trickle(w io.Writer, b []byte, interval time.Duration) {
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for i := range b {
		if _, err := w.Write(b[i : i+1]); err != nil {
			return
		}
		<-tick.C
	}
}
