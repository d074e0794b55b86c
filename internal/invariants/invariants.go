package invariants

import (
	"errors"
	"fmt"
)

// ErrAssertionFailed marks the errors AssertionFailedf returns in builds without the
// invariants tag. Use errors.Is(err, ErrAssertionFailed).
var ErrAssertionFailed = errors.New("assertion failed")

// AssertionFailedf reports a bug. With the invariants tag it panics; without it, it returns an
// error wrapping ErrAssertionFailed that the caller must return, so release builds degrade to
// an error instead of a crash. Callers should also wrap the sentinel their API documents.
func AssertionFailedf(format string, args ...any) error {
	err := fmt.Errorf("%w: %s", ErrAssertionFailed, fmt.Sprintf(format, args...))
	if Enabled {
		panic(err)
	}
	return err
}
