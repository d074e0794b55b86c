package mooncakestore

import (
	"errors"
	"fmt"

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

// Mooncake's ErrorCode numbers (mooncake-store types.h), for per-key batch results.
const (
	codeOK                  = 0
	codeInternal            = -1
	codeSegmentNotFound     = -101
	codeNoAvailableHandle   = -200
	codeInvalidVersion      = -300
	codeInvalidKey          = -400
	codeInvalidParams       = -600
	codeInvalidRead         = -701
	codeReplicaNotReady     = -703
	codeObjectNotFound      = -704
	codeObjectAlreadyExists = -705
	codeRPCFail             = -900
	codeUnavailable         = -1010
)

// mooncakeCode maps an error to Mooncake's ErrorCode number.
func mooncakeCode(err error) int {
	switch base.CodeOf(err) {
	case base.CodeOK:
		return codeOK
	case base.CodeInvalidParams, base.CodeNotSupported, base.CodeTooLarge:
		return codeInvalidParams
	case base.CodeInvalidKey:
		return codeInvalidKey
	case base.CodeObjectNotFound:
		return codeObjectNotFound
	case base.CodeObjectAlreadyExists:
		return codeObjectAlreadyExists
	case base.CodeNoAvailableHandle:
		return codeNoAvailableHandle
	case base.CodeInvalidVersion:
		return codeInvalidVersion
	case base.CodeReplicaNotReady:
		return codeReplicaNotReady
	case base.CodeSegmentNotFound:
		return codeSegmentNotFound
	case base.CodeCorrupted:
		return codeInvalidRead
	case base.CodeUnavailable:
		return codeUnavailable
	case base.CodeNotLeader, base.CodeTimeout, base.CodeClusterMismatch, base.CodeProtocolVersion:
		return codeRPCFail
	}
	return codeInternal
}
