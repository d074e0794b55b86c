package invariants

import (
	"errors"
	"testing"
)

func TestAssertionFailedf(t *testing.T) {
	defer func() {
		r := recover()
		if Enabled && r == nil {
			t.Fatal("invariants build: want a panic")
		}
		if !Enabled && r != nil {
			t.Fatalf("release build: unexpected panic %v", r)
		}
	}()
	err := AssertionFailedf("refcount %d < 0", -1)
	if !errors.Is(err, ErrAssertionFailed) || err.Error() != "assertion failed: refcount -1 < 0" {
		t.Fatalf("got %v", err)
	}
}
