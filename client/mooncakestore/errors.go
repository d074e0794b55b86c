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

// Mooncake's ErrorCode numbers (mooncake-store types.h), for per-key batch results. The C
// library (cmd/libmooncake_store) and the Python package over it return the same numbers,
// through ErrorCode.
const (
	codeOK                  = 0
	codeInternal            = -1
	codeSegmentNotFound     = -101
	codeNoAvailableHandle   = -200
	codeInvalidVersion      = -300
	codeInvalidKey          = -400
	codeInvalidParams       = -600
	codeReplicaNotReady     = -703
	codeObjectNotFound      = -704
	codeObjectAlreadyExists = -705
	codeTransferFail        = -800
	codeChecksumMismatch    = -801
	codeRPCFail             = -900
	codeRPCTimeout          = -901
	codeUnavailable         = -1010
	codeNotSupported        = -1012
)

var codeNames = map[int]string{
	codeOK: "OK", codeInternal: "INTERNAL_ERROR", codeSegmentNotFound: "SEGMENT_NOT_FOUND",
	codeNoAvailableHandle: "NO_AVAILABLE_HANDLE", codeInvalidVersion: "INVALID_VERSION",
	codeInvalidKey: "INVALID_KEY", codeInvalidParams: "INVALID_PARAMS",
	codeReplicaNotReady: "REPLICA_IS_NOT_READY", codeObjectNotFound: "OBJECT_NOT_FOUND",
	codeObjectAlreadyExists: "OBJECT_ALREADY_EXISTS", codeTransferFail: "TRANSFER_FAIL",
	codeChecksumMismatch: "CHECKSUM_MISMATCH", codeRPCFail: "RPC_FAIL", codeRPCTimeout: "RPC_TIMEOUT",
	codeUnavailable: "UNAVAILABLE_IN_CURRENT_STATUS", codeNotSupported: "NOT_SUPPORTED",
}

// CodeName returns Mooncake's name of an ErrorCode number ErrorCode returns
// ("OBJECT_NOT_FOUND"), or "" for a number it never returns.
func CodeName(code int) string { return codeNames[code] }

// Codes lists the numbers ErrorCode returns.
func Codes() []int {
	out := make([]int, 0, len(codeNames))
	for c := range codeNames {
		out = append(out, c)
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
		return codeOK
	case errors.Is(err, base.ErrClosed):
		return codeUnavailable
	}
	switch base.CodeOf(err) {
	case base.CodeInvalidParams, base.CodeTooLarge:
		return codeInvalidParams
	case base.CodeNotSupported:
		return codeNotSupported
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
		return codeChecksumMismatch
	case base.CodeTimeout:
		return codeRPCTimeout
	case base.CodeUnavailable, base.CodeNotLeader, base.CodeClusterMismatch, base.CodeProtocolVersion:
		return codeRPCFail
	}
	var ne net.Error
	var errno syscall.Errno
	if errors.As(err, &ne) || errors.As(err, &errno) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return codeTransferFail
	}
	return codeInternal
}
