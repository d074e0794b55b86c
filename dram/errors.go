package dram

import (
	"github.com/mooncake-go/mooncake/internal/base"
)

// markedError is a package sentinel that also matches a base sentinel, so a caller can test
// for either: errors.Is(err, dram.ErrArenaFull) or errors.Is(err, base.ErrNoSpace).
type markedError struct {
	msg  string
	mark error
}

func (e *markedError) Error() string        { return e.msg }
func (e *markedError) Is(target error) bool { return target == e.mark }

// Errors. Test for them with errors.Is; each also matches the base sentinel it names.
var (
	// ErrInvalidSize marks an Alloc of zero or negative bytes. It matches base.ErrInvalidParams.
	ErrInvalidSize error = &markedError{"dram: invalid allocation size", base.ErrInvalidParams}
	// ErrTooLarge marks an Alloc larger than the arena's capacity: it can never succeed.
	// It matches base.ErrTooLarge.
	ErrTooLarge error = &markedError{"dram: allocation larger than the arena", base.ErrTooLarge}
	// ErrArenaFull marks an Alloc that found no free block large enough now; it may succeed
	// after releases. It matches base.ErrNoSpace.
	ErrArenaFull error = &markedError{"dram: arena full", base.ErrNoSpace}
	// ErrReleased marks a Retain or Release of a handle whose last reference is gone (a double
	// release). It is a bug in the caller and also an assertion in invariants builds. It
	// matches base.ErrInternal.
	ErrReleased error = &markedError{"dram: handle already released", base.ErrInternal}
	// ErrForeignHandle marks a handle this package did not hand out (nil, zero or forged) or
	// one that does not belong to the arena it is used with. It is a bug in the caller and
	// also an assertion in invariants builds. It matches base.ErrInternal.
	ErrForeignHandle error = &markedError{"dram: foreign handle", base.ErrInternal}
	// ErrLiveHandles marks a Close while handles are still held; the arena stays open. It is a
	// leak in the caller and also an assertion in invariants builds. It matches base.ErrInternal.
	ErrLiveHandles error = &markedError{"dram: arena has live handles", base.ErrInternal}
	// ErrClosed marks use of an arena after Close. It matches base.ErrClosed.
	ErrClosed error = &markedError{"dram: arena closed", base.ErrClosed}
	// ErrHugePagesUnavailable marks a HugePagesRequire arena that could not get huge pages
	// (too few reserved). It matches base.ErrNotSupported.
	ErrHugePagesUnavailable error = &markedError{"dram: huge pages unavailable", base.ErrNotSupported}
)
