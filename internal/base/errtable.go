package base

import "errors"

// The error table: the one declaration of every error class, from which each language's codes
// are derived. Go reads it through Code (String, Sentinel, CodeOf) and the Mooncake* functions
// below; the C header's MOONCAKE_ERR_* defines, Python's mooncake.store.ErrorCode and the code
// tables of docs/protocol.md and docs/clib.md are checked against it by tests
// (internal/repotest TestErrorTable*), so a code added here and not there fails the build.

// MooncakeCode is a number of Mooncake's ErrorCode enum (mooncake-store/include/types.h): what
// the C library and the Python package return, and the error_code of the master's admin JSON.
// The numbers are Mooncake's contract, never ours to change.
type MooncakeCode int

// The Mooncake ErrorCode numbers this repository returns or names.
const (
	MooncakeOK                         MooncakeCode = 0
	MooncakeInternalError              MooncakeCode = -1
	MooncakeBufferOverflow             MooncakeCode = -10
	MooncakeSegmentNotFound            MooncakeCode = -101
	MooncakeNoAvailableHandle          MooncakeCode = -200
	MooncakeInvalidVersion             MooncakeCode = -300
	MooncakeInvalidKey                 MooncakeCode = -400
	MooncakeInvalidParams              MooncakeCode = -600
	MooncakeReplicaIsNotReady          MooncakeCode = -703
	MooncakeObjectNotFound             MooncakeCode = -704
	MooncakeObjectAlreadyExists        MooncakeCode = -705
	MooncakeTransferFail               MooncakeCode = -800
	MooncakeChecksumMismatch           MooncakeCode = -801
	MooncakeRPCFail                    MooncakeCode = -900
	MooncakeRPCTimeout                 MooncakeCode = -901
	MooncakeUnavailableInCurrentStatus MooncakeCode = -1010
	MooncakeNotSupported               MooncakeCode = -1012
	MooncakeFileNotFound               MooncakeCode = -1100
	MooncakeTenantQuotaExceeded        MooncakeCode = -1700
	// KV sessions (Mooncake's kv_session): -1801 is not one Mooncake's sources name.
	MooncakeSessionNotFound      MooncakeCode = -1800
	MooncakeSessionLimitExceeded MooncakeCode = -1802
)

// MooncakeScope says which layer can return a Mooncake code.
type MooncakeScope uint8

const (
	// ScopeC codes are returned by the C library (cmd/libmooncake_store), whose header defines
	// each as MOONCAKE_ERR_<name> (MOONCAKE_OK for 0) and whose mooncake_store_error_name
	// names it; the Python package passes them on, so Python's ErrorCode lists them too.
	ScopeC MooncakeScope = iota
	// ScopePython codes are returned only by the Python package's own code (FILE_NOT_FOUND
	// from save_tensor_to_safetensor) or only named there, as Mooncake's Python ErrorCode
	// names them (BUFFER_OVERFLOW).
	ScopePython
)

// MooncakeCodeInfo is one row of the Mooncake code table.
type MooncakeCodeInfo struct {
	Code  MooncakeCode
	Name  string // Mooncake's enumerator name, e.g. "OBJECT_NOT_FOUND"
	Scope MooncakeScope
}

// CDefine returns the C header's name for the code: MOONCAKE_OK, else MOONCAKE_ERR_<Name>,
// except INTERNAL_ERROR, which the header has always spelt MOONCAKE_ERR_INTERNAL.
func (m MooncakeCodeInfo) CDefine() string {
	switch m.Code {
	case MooncakeOK:
		return "MOONCAKE_OK"
	case MooncakeInternalError:
		return "MOONCAKE_ERR_INTERNAL"
	}
	return "MOONCAKE_ERR_" + m.Name
}

// mooncakeCodes lists the Mooncake codes in Mooncake's order (descending numbers).
var mooncakeCodes = []MooncakeCodeInfo{
	{MooncakeOK, "OK", ScopeC},
	{MooncakeInternalError, "INTERNAL_ERROR", ScopeC},
	{MooncakeBufferOverflow, "BUFFER_OVERFLOW", ScopePython},
	{MooncakeSegmentNotFound, "SEGMENT_NOT_FOUND", ScopeC},
	{MooncakeNoAvailableHandle, "NO_AVAILABLE_HANDLE", ScopeC},
	{MooncakeInvalidVersion, "INVALID_VERSION", ScopeC},
	{MooncakeInvalidKey, "INVALID_KEY", ScopeC},
	{MooncakeInvalidParams, "INVALID_PARAMS", ScopeC},
	{MooncakeReplicaIsNotReady, "REPLICA_IS_NOT_READY", ScopeC},
	{MooncakeObjectNotFound, "OBJECT_NOT_FOUND", ScopeC},
	{MooncakeObjectAlreadyExists, "OBJECT_ALREADY_EXISTS", ScopeC},
	{MooncakeTransferFail, "TRANSFER_FAIL", ScopeC},
	{MooncakeChecksumMismatch, "CHECKSUM_MISMATCH", ScopeC},
	{MooncakeRPCFail, "RPC_FAIL", ScopeC},
	{MooncakeRPCTimeout, "RPC_TIMEOUT", ScopeC},
	{MooncakeUnavailableInCurrentStatus, "UNAVAILABLE_IN_CURRENT_STATUS", ScopeC},
	{MooncakeNotSupported, "NOT_SUPPORTED", ScopeC},
	{MooncakeFileNotFound, "FILE_NOT_FOUND", ScopePython},
	{MooncakeTenantQuotaExceeded, "TENANT_QUOTA_EXCEEDED", ScopeC},
	{MooncakeSessionNotFound, "SESSION_NOT_FOUND", ScopeC},
	{MooncakeSessionLimitExceeded, "SESSION_LIMIT_EXCEEDED", ScopeC},
}

// MooncakeCodes returns the Mooncake code table (a copy), in Mooncake's order.
func MooncakeCodes() []MooncakeCodeInfo { return append([]MooncakeCodeInfo(nil), mooncakeCodes...) }

// String returns Mooncake's name of c, or "" for a number the table does not hold.
func (c MooncakeCode) String() string {
	for _, m := range mooncakeCodes {
		if m.Code == c {
			return m.Name
		}
	}
	return ""
}

// errorClass is one row of errorTable: everything a wire code means.
type errorClass struct {
	name     string // Mooncake's name for the wire code (Code.String)
	sentinel error  // what a *CodeError with this code matches under errors.Is
	// client is the code the C and Python API return for the class (mooncakestore.ErrorCode).
	// Classes Mooncake has no number for take the nearest: a failure to reach or agree with a
	// master (not leader, unavailable, another cluster or protocol) is RPC_FAIL.
	client MooncakeCode
	// master and httpStatus are the master's admin JSON answer (Mooncake's error_code and
	// ErrorCodeToHttpStatus). NB: they differ from client where the master speaks of itself:
	// a master that does not lead is UNAVAILABLE_IN_CURRENT_STATUS (503), not RPC_FAIL, and the
	// admin endpoints, like Mooncake's, know only the classes they meet (others are
	// INTERNAL_ERROR, 500).
	master     MooncakeCode
	httpStatus int
}

// errorTable holds one row per wire Code, indexed by it.
var errorTable = [numCodes]errorClass{
	CodeOK:                  {"OK", nil, MooncakeOK, MooncakeOK, 200},
	CodeInternal:            {"INTERNAL_ERROR", ErrInternal, MooncakeInternalError, MooncakeInternalError, 500},
	CodeInvalidParams:       {"INVALID_PARAMS", ErrInvalidParams, MooncakeInvalidParams, MooncakeInvalidParams, 400},
	CodeInvalidKey:          {"INVALID_KEY", ErrInvalidKey, MooncakeInvalidKey, MooncakeInvalidParams, 400},
	CodeObjectNotFound:      {"OBJECT_NOT_FOUND", ErrObjectNotFound, MooncakeObjectNotFound, MooncakeObjectNotFound, 404},
	CodeObjectAlreadyExists: {"OBJECT_ALREADY_EXISTS", ErrObjectAlreadyExists, MooncakeObjectAlreadyExists, MooncakeInternalError, 500},
	CodeNoAvailableHandle:   {"NO_AVAILABLE_HANDLE", ErrNoSpace, MooncakeNoAvailableHandle, MooncakeInternalError, 500},
	CodeInvalidVersion:      {"INVALID_VERSION", ErrInvalidVersion, MooncakeInvalidVersion, MooncakeInternalError, 500},
	CodeReplicaNotReady:     {"REPLICA_IS_NOT_READY", ErrReplicaNotReady, MooncakeReplicaIsNotReady, MooncakeInternalError, 500},
	CodeNotLeader:           {"NOT_LEADER", ErrNotLeader, MooncakeRPCFail, MooncakeUnavailableInCurrentStatus, 503},
	CodeSegmentNotFound:     {"SEGMENT_NOT_FOUND", ErrSegmentNotFound, MooncakeSegmentNotFound, MooncakeSegmentNotFound, 404},
	CodeCorrupted:           {"CORRUPTED_DATA", ErrCorruption, MooncakeChecksumMismatch, MooncakeInternalError, 500},
	CodeUnavailable:         {"UNAVAILABLE_IN_CURRENT_STATUS", ErrUnavailable, MooncakeRPCFail, MooncakeUnavailableInCurrentStatus, 503},
	CodeTimeout:             {"RPC_TIMEOUT", ErrTimeout, MooncakeRPCTimeout, MooncakeInternalError, 500},
	CodeNotSupported:        {"NOT_SUPPORTED", ErrNotSupported, MooncakeNotSupported, MooncakeInternalError, 500},
	CodeTooLarge:            {"OBJECT_TOO_LARGE", ErrTooLarge, MooncakeInvalidParams, MooncakeInternalError, 500},
	CodeClusterMismatch:     {"CLUSTER_ID_MISMATCH", ErrClusterMismatch, MooncakeRPCFail, MooncakeInternalError, 500},
	CodeProtocolVersion:     {"PROTOCOL_VERSION_MISMATCH", ErrProtocolVersion, MooncakeRPCFail, MooncakeInternalError, 500},
	// KV sessions: the admin endpoints never meet them (INTERNAL_ERROR, 500, as other classes).
	CodeSessionNotFound:      {"SESSION_NOT_FOUND", ErrSessionNotFound, MooncakeSessionNotFound, MooncakeInternalError, 500},
	CodeSessionLimitExceeded: {"SESSION_LIMIT_EXCEEDED", ErrSessionLimitExceeded, MooncakeSessionLimitExceeded, MooncakeInternalError, 500},
	CodeQuotaExceeded:        {"TENANT_QUOTA_EXCEEDED", ErrQuotaExceeded, MooncakeTenantQuotaExceeded, MooncakeTenantQuotaExceeded, 429},
}

// The KV-session error classes (Mooncake's SESSION_NOT_FOUND and SESSION_LIMIT_EXCEEDED).
var (
	// ErrSessionNotFound: no KV session of that id (it never had a member, or lost its last).
	// Use errors.Is(err, ErrSessionNotFound).
	ErrSessionNotFound = errors.New("mooncake: KV session not found")
	// ErrSessionLimitExceeded: a KV-session limit (sessions, members per session, sessions
	// per object) would be passed. Use errors.Is(err, ErrSessionLimitExceeded).
	ErrSessionLimitExceeded = errors.New("mooncake: KV session limit exceeded")
)

// The KV-session wire codes.
const (
	CodeSessionNotFound      Code = 18 // SESSION_NOT_FOUND
	CodeSessionLimitExceeded Code = 19 // SESSION_LIMIT_EXCEEDED
)

// row returns c's row; an unknown code reads as INTERNAL_ERROR, as receivers must treat it.
func (c Code) row() errorClass {
	if !c.Known() {
		return errorTable[CodeInternal]
	}
	return errorTable[c]
}

// Mooncake returns the Mooncake code the C and Python API return for wire code c.
func (c Code) Mooncake() MooncakeCode { return c.row().client }

// MooncakeMaster returns the Mooncake code and HTTP status the master's admin endpoints answer
// for wire code c (Mooncake's ErrorCodeToHttpStatus).
func (c Code) MooncakeMaster() (MooncakeCode, int) {
	r := c.row()
	return r.master, r.httpStatus
}
