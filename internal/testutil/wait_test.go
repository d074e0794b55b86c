package testutil

import (
	"errors"
	"testing"
	"time"
)

// TestPoll: Poll returns nil once cond holds, and cond's last error when it never does within
// the timeout (without waiting much past it).
func TestPoll(t *testing.T) {
	n := 0
	if err := Poll(time.Minute, func() error {
		if n++; n < 5 {
			return errors.New("not yet")
		}
		return nil
	}); err != nil || n != 5 {
		t.Fatalf("Poll = %v after %d checks, want nil after 5", err, n)
	}
	errLast := errors.New("last")
	start := time.Now()
	if err := Poll(20*time.Millisecond, func() error { return errLast }); !errors.Is(err, errLast) {
		t.Fatalf("Poll of a condition that never holds = %v, want %v", err, errLast)
	}
	if took := time.Since(start); took < 20*time.Millisecond {
		t.Fatalf("Poll gave up after %v, before its 20ms timeout", took)
	}
}
