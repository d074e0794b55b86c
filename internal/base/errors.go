package base

import (
	"context"
	"errors"
	"fmt"
	"strconv"
)

// Sentinel errors. Test for them with errors.Is: every package wraps them with %w and adds
// what it knows, and errors decoded from the wire match them too (see CodeError).
// Each has a wire Code whose name follows Mooncake's ErrorCode where Mooncake has one.
var (
	// ErrInternal marks a bug or an unexpected failure. Use errors.Is(err, ErrInternal).
	ErrInternal = errors.New("mooncake: internal error")
	// ErrInvalidParams marks a request that can never succeed as sent. Use errors.Is(err, ErrInvalidParams).
	ErrInvalidParams = errors.New("mooncake: invalid params")
	// ErrInvalidKey marks a key that is empty or longer than MaxKeyLen. Use errors.Is(err, ErrInvalidKey).
	ErrInvalidKey = errors.New("mooncake: invalid key")
	// ErrObjectNotFound marks a key (or key and version) that no store holds. Use errors.Is(err, ErrObjectNotFound).
	ErrObjectNotFound = errors.New("mooncake: object not found")
	// ErrObjectAlreadyExists marks a put of a key that exists, when the put is not an upsert.
	// Use errors.Is(err, ErrObjectAlreadyExists).
	ErrObjectAlreadyExists = errors.New("mooncake: object already exists")
	// ErrNoSpace marks a put that found no room: nothing evictable, no worker with room, or an
	// object larger than any segment. The wrapping error says which. Use errors.Is(err, ErrNoSpace).
	ErrNoSpace = errors.New("mooncake: no space")
	// ErrInvalidVersion marks a request for a version that is not the one stored. Use errors.Is(err, ErrInvalidVersion).
	ErrInvalidVersion = errors.New("mooncake: invalid version")
	// ErrReplicaNotReady marks an object that is still being written. Use errors.Is(err, ErrReplicaNotReady).
	ErrReplicaNotReady = errors.New("mooncake: replica is not ready")
	// ErrNotLeader marks a write (or linearizable read) sent to a master that is not the raft
	// leader. The wrapping error names the leader when it is known. Use errors.Is(err, ErrNotLeader).
	ErrNotLeader = errors.New("mooncake: not leader")
	// ErrSegmentNotFound marks an unknown or dead worker. Use errors.Is(err, ErrSegmentNotFound).
	ErrSegmentNotFound = errors.New("mooncake: segment not found")
	// ErrCorruption marks stored bytes whose checksum does not match. Use errors.Is(err, ErrCorruption).
	ErrCorruption = errors.New("mooncake: corrupted data")
	// ErrUnavailable marks a service that cannot answer now (starting, shutting down, no
	// quorum); a retry later may succeed. Use errors.Is(err, ErrUnavailable).
	ErrUnavailable = errors.New("mooncake: unavailable")
	// ErrTimeout marks a deadline that passed. Use errors.Is(err, ErrTimeout); errors that are
	// context.DeadlineExceeded map to the same wire code.
	ErrTimeout = errors.New("mooncake: timeout")
	// ErrNotSupported marks a feature this build or configuration does not have (e.g. protocol
	// "rdma"). Use errors.Is(err, ErrNotSupported).
	ErrNotSupported = errors.New("mooncake: not supported in this build")
	// ErrTooLarge marks a length over a configured bound (a value over the maximum value size,
	// a frame over its limit). Use errors.Is(err, ErrTooLarge).
	ErrTooLarge = errors.New("mooncake: too large")
	// ErrClusterMismatch marks a peer that belongs to another cluster_id. Use errors.Is(err, ErrClusterMismatch).
	ErrClusterMismatch = errors.New("mooncake: cluster id mismatch")
	// ErrProtocolVersion marks a peer that speaks another protocol version. Use errors.Is(err, ErrProtocolVersion).
	ErrProtocolVersion = errors.New("mooncake: protocol version mismatch")
	// ErrQuotaExceeded marks a put that would take its tenant over its quota (tenant.go). The
	// wrapping error names the tenant, the quota and its use. Use errors.Is(err, ErrQuotaExceeded).
	ErrQuotaExceeded = errors.New("mooncake: tenant quota exceeded")
	// ErrClosed marks use of something after Close. It travels as CodeUnavailable.
	// Use errors.Is(err, ErrClosed).
	ErrClosed = errors.New("mooncake: closed")
)

// Code is an error's number on the wire. The numbers are a contract (docs/protocol.md); add new
// ones at the end, never renumber.
type Code uint16

// The wire codes. Names follow Mooncake's ErrorCode enum where it has one. Each code's
// sentinel, name and Mooncake numbers are its row in errorTable (errtable.go).
const (
	CodeOK                  Code = 0
	CodeInternal            Code = 1  // INTERNAL_ERROR
	CodeInvalidParams       Code = 2  // INVALID_PARAMS
	CodeInvalidKey          Code = 3  // INVALID_KEY
	CodeObjectNotFound      Code = 4  // OBJECT_NOT_FOUND
	CodeObjectAlreadyExists Code = 5  // OBJECT_ALREADY_EXISTS
	CodeNoAvailableHandle   Code = 6  // NO_AVAILABLE_HANDLE
	CodeInvalidVersion      Code = 7  // INVALID_VERSION
	CodeReplicaNotReady     Code = 8  // REPLICA_IS_NOT_READY
	CodeNotLeader           Code = 9  // NOT_LEADER
	CodeSegmentNotFound     Code = 10 // SEGMENT_NOT_FOUND
	CodeCorrupted           Code = 11 // CORRUPTED_DATA
	CodeUnavailable         Code = 12 // UNAVAILABLE_IN_CURRENT_STATUS
	CodeTimeout             Code = 13 // RPC_TIMEOUT
	CodeNotSupported        Code = 14 // NOT_SUPPORTED
	CodeTooLarge            Code = 15 // OBJECT_TOO_LARGE
	CodeClusterMismatch     Code = 16 // CLUSTER_ID_MISMATCH
	CodeProtocolVersion     Code = 17 // PROTOCOL_VERSION_MISMATCH
	CodeQuotaExceeded       Code = 20 // TENANT_QUOTA_EXCEEDED
	numCodes                     = 21 // 18, 19: KV sessions (errtable.go)
)

// String returns Mooncake's name for the code, or "CODE_<n>" for an unknown one.
func (c Code) String() string {
	if c.Known() {
		return errorTable[c].name
	}
	return "CODE_" + strconv.Itoa(int(c))
}

// Known reports whether c is one of the codes this build defines.
func (c Code) Known() bool { return int(c) < numCodes }

// Sentinel returns the sentinel error for c: nil for CodeOK, ErrInternal for unknown codes.
func (c Code) Sentinel() error {
	if !c.Known() {
		return ErrInternal
	}
	return errorTable[c].sentinel
}

// CodeOf returns the wire code for err: CodeOK for nil, the code of the first sentinel err
// matches, CodeTimeout for context deadlines, CodeUnavailable for ErrClosed and cancellation,
// else CodeInternal.
func CodeOf(err error) Code {
	if err == nil {
		return CodeOK
	}
	var ce *CodeError
	if errors.As(err, &ce) {
		return ce.Code
	}
	// Start at 2: ErrInternal (1) is also the fallback below.
	for c := Code(2); c < numCodes; c++ {
		if errors.Is(err, errorTable[c].sentinel) {
			return c
		}
	}
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		return CodeTimeout
	case errors.Is(err, ErrClosed), errors.Is(err, context.Canceled):
		return CodeUnavailable
	}
	return CodeInternal
}

// CodeError is an error received from a peer: a wire code and the peer's message. It matches
// its code's sentinel under errors.Is, so callers test remote and local errors alike.
type CodeError struct {
	Code Code
	Msg  string
}

// NewCodeError returns a *CodeError for code with msg. Code OK gives nil.
func NewCodeError(code Code, msg string) error {
	if code == CodeOK {
		return nil
	}
	return &CodeError{Code: code, Msg: msg}
}

// Error returns the peer's message, prefixed by the code name when the message does not say
// more than the sentinel.
func (e *CodeError) Error() string {
	if e.Msg == "" {
		return fmt.Sprintf("%s (%s)", e.Code.Sentinel(), e.Code)
	}
	return e.Msg
}

// Is makes errors.Is(e, sentinel) true for the sentinel of e.Code.
func (e *CodeError) Is(target error) bool { return target != nil && target == e.Code.Sentinel() }
