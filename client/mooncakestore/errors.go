package mooncakestore

import (
	"errors"
	"fmt"
	"io"
	"net"
	"syscall"

	"github.com/mooncake-go/mooncake/internal/base"
)

// The error values of Mooncake's binding. Every error a Store returns wraps one of them and the
// cause: test with errors.Is(err, ErrPut), or errors.Is(err, base.ErrObjectNotFound).
var (
	ErrStoreNil         = errors.New("mooncakestore: store handle is nil")
	ErrSetupFailed      = errors.New("mooncakestore: setup failed")
	ErrInitAllFailed    = errors.New("mooncakestore: init_all failed")
	ErrHealthCheck      = errors.New("mooncakestore: health check failed")
	ErrPut              = errors.New("mooncakestore: put failed")
	ErrGet              = errors.New("mooncakestore: get failed")
	ErrRemove           = errors.New("mooncakestore: remove failed")
	ErrExist            = errors.New("mooncakestore: existence check failed")
	ErrGetSize          = errors.New("mooncakestore: get size failed")
	ErrRegisterBuffer   = errors.New("mooncakestore: register buffer failed")
	ErrUnregisterBuffer = errors.New("mooncakestore: unregister buffer failed")
	ErrBatchOp          = errors.New("mooncakestore: batch operation failed")
	ErrHostname         = errors.New("mooncakestore: get hostname failed")
	ErrInvalidArgument  = errors.New("mooncakestore: invalid argument")
	ErrBufferNotFound   = errors.New("mooncakestore: buffer not found")
)

// wrap returns an error matching both kind and cause (nil for a nil cause).
func wrap(kind, cause error) error {
	if cause == nil {
		return nil
	}
	return fmt.Errorf("%w: %w", kind, cause)
}

// CodeName returns Mooncake's name of an ErrorCode number ErrorCode returns
// ("OBJECT_NOT_FOUND"), or "" for a number it never returns.
func CodeName(code int) string {
	for _, m := range base.MooncakeCodes() {
		if int(m.Code) == code && m.Scope == base.ScopeC {
			return m.Name
		}
	}
	return ""
}

// Codes lists the numbers ErrorCode returns: the C-scope rows of internal/base's error table.
func Codes() []int {
	var out []int
	for _, m := range base.MooncakeCodes() {
		if m.Scope == base.ScopeC {
			out = append(out, int(m.Code))
		}
	}
	return out
}

// ErrorCode maps an error to Mooncake's ErrorCode number: 0 for nil; the sentinels of
// internal/base (raised here or by a server) to their Mooncake counterparts; a closed store to
// UNAVAILABLE_IN_CURRENT_STATUS; no master or leader reachable to RPC_FAIL; a failure of the
// network under a transfer to TRANSFER_FAIL; anything else to INTERNAL_ERROR.
func ErrorCode(err error) int {
	switch {
	case err == nil:
		return int(base.MooncakeOK)
	case errors.Is(err, base.ErrClosed):
		// Our own store closed: the store speaks of itself, not of a master it cannot reach.
		return int(base.MooncakeUnavailableInCurrentStatus)
	}
	// INTERNAL_ERROR, unknown codes (and a stray OK) look further: the cause may be the network.
	if code := base.CodeOf(err); code.Known() && code != base.CodeInternal && code != base.CodeOK {
		return int(code.Mooncake())
	}
	var ne net.Error
	var errno syscall.Errno
	if errors.As(err, &ne) || errors.As(err, &errno) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return int(base.MooncakeTransferFail)
	}
	return int(base.MooncakeInternalError)
}
