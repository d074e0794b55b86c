package wire

import "github.com/mooncake-go/mooncake/internal/base"

// KV sessions (issue 21 item 2; opcodes 140-149): Mooncake's session-aware membership and
// soft pin, asked of the leader, which keeps the registry in raft. See docs/protocol.md,
// "KV sessions". Every call is safe to resend: pinning twice, attaching twice and repeating
// an update with the same keep set change nothing more.
const (
	// OpKVSessionPin and OpKVSessionUnpin set a session's pinned flag (KVSessionRequest with
	// no keys; Empty response). SESSION_NOT_FOUND when no session has that id.
	OpKVSessionPin   Op = 140
	OpKVSessionUnpin Op = 141
	// OpKVSessionUpdate keeps only the members in Keys (the complete keep set; none: close
	// the session). An absent session is OK. Empty response.
	OpKVSessionUpdate Op = 142
	// OpKVSessionGet answers a KVSessionInfoResponse, or SESSION_NOT_FOUND.
	OpKVSessionGet Op = 143
	// OpKVSessionList answers a page of member keys (KVSessionListRequest,
	// KVSessionPageResponse), or SESSION_NOT_FOUND.
	OpKVSessionList Op = 144
	// OpKVSessionAttach adds Keys to the session (creating it): a BatchResponse with one item
	// per key, OK, OBJECT_NOT_FOUND or SESSION_LIMIT_EXCEEDED.
	OpKVSessionAttach Op = 145
	// OpKVSessionPins is the leader's call to a worker: mark (or unmark) the listed object
	// versions as members of a pinned KV session, which the worker's eviction keeps with the
	// soft pins (KVSessionPinsRequest; a BatchResponse, one item each: OK, OBJECT_NOT_FOUND,
	// INVALID_VERSION).
	OpKVSessionPins Op = 146
)

// MaxKVSessionKeys bounds the keys of one KVSessionRequest: an update's keep set (Mooncake's
// MC_KV_SESSION_MAX_MEMBERS default). An attach takes at most 4096 (the leader checks).
const MaxKVSessionKeys = 1000000

// KVSessionRequest names a session and, for Update and Attach, keys.
type KVSessionRequest struct {
	Call Op
	ID   string
	Keys []string
}

func (m *KVSessionRequest) Op() Op { return m.Call }
func (m *KVSessionRequest) Encode(e *Encoder) {
	e.Str(m.ID)
	encodeKeys(e, m.Keys)
}
func (m *KVSessionRequest) Decode(d *Decoder) {
	m.ID = d.Str(base.MaxStoredKVSessionIDLen, "KV session id")
	if n := d.Count(minKey, MaxKVSessionKeys, "keys"); n > 0 {
		m.Keys = make([]string, n)
		for i := range m.Keys {
			m.Keys[i] = d.Key()
		}
	}
}

// KVSessionListRequest asks for up to Limit member keys sorting after Cursor ("" for the
// first page).
type KVSessionListRequest struct {
	ID     string
	Cursor string
	Limit  uint32
}

func (m *KVSessionListRequest) Op() Op { return OpKVSessionList }
func (m *KVSessionListRequest) Encode(e *Encoder) {
	e.Str(m.ID)
	e.Str(m.Cursor)
	e.U32(m.Limit)
}
func (m *KVSessionListRequest) Decode(d *Decoder) {
	m.ID = d.Str(base.MaxStoredKVSessionIDLen, "KV session id")
	m.Cursor = d.Str(base.MaxKeyLen, "cursor")
	m.Limit = d.U32()
}

// KVSessionInfoResponse is Mooncake's KvSessionInfo.
type KVSessionInfoResponse struct {
	ID          string
	Pinned      bool
	MemberCount uint64
}

func (m *KVSessionInfoResponse) Op() Op { return OpKVSessionGet }
func (m *KVSessionInfoResponse) Encode(e *Encoder) {
	e.Str(m.ID)
	e.Bool(m.Pinned)
	e.U64(m.MemberCount)
}
func (m *KVSessionInfoResponse) Decode(d *Decoder) {
	m.ID = d.Str(base.MaxStoredKVSessionIDLen, "KV session id")
	m.Pinned = d.Bool()
	m.MemberCount = d.U64()
}

// KVSessionPageResponse is Mooncake's KvSessionPage: keys in order, and the exclusive cursor
// of the next page ("" when this page is the last).
type KVSessionPageResponse struct {
	Keys       []string
	NextCursor string
}

func (m *KVSessionPageResponse) Op() Op { return OpKVSessionList }
func (m *KVSessionPageResponse) Encode(e *Encoder) {
	encodeKeys(e, m.Keys)
	e.Str(m.NextCursor)
}
func (m *KVSessionPageResponse) Decode(d *Decoder) {
	m.Keys = decodeKeys(d)
	m.NextCursor = d.Str(base.MaxKeyLen, "cursor")
}

// KVSessionPinsRequest (op 146, leader to worker) sets the session-pin mark of each item's
// version (0: whichever the worker holds) to Pinned.
type KVSessionPinsRequest struct {
	Pinned bool
	Items  []base.KeyVersion
}

func (m *KVSessionPinsRequest) Op() Op { return OpKVSessionPins }
func (m *KVSessionPinsRequest) Encode(e *Encoder) {
	e.Bool(m.Pinned)
	encodeKeyVersions(e, m.Items)
}
func (m *KVSessionPinsRequest) Decode(d *Decoder) {
	m.Pinned = d.Bool()
	m.Items = decodeBoundedKeyVersions(d, MaxPrefetch, "KV session pins")
}

func newKVSessionRequest(op Op) Message {
	switch op {
	case OpKVSessionPins:
		return new(KVSessionPinsRequest)
	case OpKVSessionPin, OpKVSessionUnpin, OpKVSessionUpdate, OpKVSessionGet, OpKVSessionAttach:
		return &KVSessionRequest{Call: op}
	case OpKVSessionList:
		return new(KVSessionListRequest)
	}
	return nil
}

func newKVSessionResponse(op Op) Message {
	switch op {
	case OpKVSessionPin, OpKVSessionUnpin, OpKVSessionUpdate:
		return NewEmpty(op)
	case OpKVSessionGet:
		return new(KVSessionInfoResponse)
	case OpKVSessionList:
		return new(KVSessionPageResponse)
	case OpKVSessionAttach, OpKVSessionPins:
		return NewBatchResponse(op, nil)
	}
	return nil
}
