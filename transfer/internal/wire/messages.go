package wire

import (
	"fmt"
	"math"
	"time"

	"github.com/mooncake-go/mooncake/internal/base"
)

// Message is the body of one request or response. Every call has a request type and a
// response type (Empty when it returns nothing); both report the call's Op.
type Message interface {
	// Op returns the call this message belongs to.
	Op() Op
	// Encode appends the body to e.
	Encode(e *Encoder)
	// Decode reads the body from d; errors are left in d (check d.Finish()).
	Decode(d *Decoder)
}

// Field bounds (beyond base.MaxKeyLen and base.MaxWorkerIDLen).
const (
	// MaxPatternLen bounds a RemoveByRegex pattern.
	MaxPatternLen = 64 << 10
	// MaxStatusLen bounds the JSON of a Status response (the body bound applies too).
	MaxStatusLen = math.MaxUint32
)

func decodeWorkerID(d *Decoder) base.WorkerID {
	return base.WorkerID(d.Str(base.MaxWorkerIDLen, "worker id"))
}

func decodeDuration(d *Decoder) time.Duration {
	v := d.I64()
	if v < 0 {
		d.Fail(fmt.Errorf("%w: negative duration %d", base.ErrInvalidParams, v))
		return 0
	}
	return time.Duration(v)
}

func decodeCode(d *Decoder) base.Code { return base.Code(d.U16()) }

// encodeList appends a list: u32 count, then each item.
func encodeList[T any](e *Encoder, items []T, enc func(*Encoder, *T)) {
	e.Count(len(items))
	for i := range items {
		enc(e, &items[i])
	}
}

// decodeList reads a list whose items take at least minItem bytes each; the count is checked
// against the bytes left before the list is allocated.
func decodeList[T any](d *Decoder, minItem int, what string, dec func(*Decoder, *T)) []T {
	n := d.Count(minItem, 0, what)
	if n == 0 {
		return nil
	}
	items := make([]T, n)
	for i := range items {
		dec(d, &items[i])
	}
	return items
}

func decodePersistence(d *Decoder) base.Persistence {
	p := base.Persistence(d.U8())
	if p > base.PersistenceDurable {
		d.Fail(fmt.Errorf("%w: unknown persistence %d", base.ErrInvalidParams, p))
		return 0
	}
	return p
}

// Empty is the body of calls that carry nothing (requests of RemoveAll, Status, Ping;
// responses of PutEnd, PutRevoke, RegisterMaster, AddMaster, RemoveMaster, Remove, Write,
// Commit, Drop, Ping).
type Empty struct{ op Op }

// NewEmpty returns an Empty message for op.
func NewEmpty(op Op) *Empty { return &Empty{op: op} }

func (m *Empty) Op() Op          { return m.op }
func (m *Empty) Encode(*Encoder) {}
func (m *Empty) Decode(*Decoder) {}

// minimum encoded sizes, for Count checks.
const (
	minStr       = 4
	minReplica   = 2 * minStr
	minKey       = minStr + 1
	minPutStart  = minKey + 8 + minPutConfig
	minPutConfig = 1 + minStr + 8 + 1 + 1 + 1
)

// encodePlacements appends a list of placements (base.Placement):
// u32 count | count x { worker id string | address string }.
func encodePlacements(e *Encoder, ps []base.Placement) {
	encodeList(e, ps, func(e *Encoder, p *base.Placement) {
		e.Str(string(p.WorkerID))
		e.Str(p.Address)
	})
}

func decodePlacements(d *Decoder) []base.Placement {
	return decodeList(d, minReplica, "replicas", func(d *Decoder, p *base.Placement) {
		p.WorkerID = decodeWorkerID(d)
		p.Address = d.Str(MaxAddrLen, "address")
	})
}

// encodeKeyVersion appends a KeyVersion (base.KeyVersion): key | version.
func encodeKeyVersion(e *Encoder, kv *base.KeyVersion) {
	e.Str(kv.Key)
	e.U64(uint64(kv.Version))
}
func decodeKeyVersion(d *Decoder, kv *base.KeyVersion) {
	kv.Key = d.Key()
	kv.Version = base.Version(d.U64())
}

func encodeKeyVersions(e *Encoder, kvs []base.KeyVersion) {
	encodeList(e, kvs, encodeKeyVersion)
}

func decodeKeyVersions(d *Decoder) []base.KeyVersion {
	return decodeList(d, minKey+8, "key versions", decodeKeyVersion)
}

// decodeBoundedKeyVersions decodes a list<KeyVersion> of at most limit items (nil if empty).
func decodeBoundedKeyVersions(d *Decoder, limit int, what string) []base.KeyVersion {
	n := d.Count(minKey+8, limit, what)
	if n == 0 {
		return nil
	}
	items := make([]base.KeyVersion, n)
	for i := range items {
		decodeKeyVersion(d, &items[i])
	}
	return items
}

// ItemError is the outcome of one item of a batch: Code OK, or a code and message.
type ItemError struct {
	Code base.Code
	Msg  string
}

// Err returns nil for OK, else a *base.CodeError (errors.Is matches the code's sentinel).
func (ie ItemError) Err() error { return base.NewCodeError(ie.Code, ie.Msg) }

// ItemErrorOf converts a handler error into an ItemError (nil: OK).
func ItemErrorOf(err error) ItemError {
	if err == nil {
		return ItemError{}
	}
	return ItemError{Code: base.CodeOf(err), Msg: err.Error()}
}

func (ie *ItemError) encode(e *Encoder) {
	e.U16(uint16(ie.Code))
	e.Str(ie.Msg)
}
func (ie *ItemError) decode(d *Decoder) {
	ie.Code = decodeCode(d)
	ie.Msg = d.Str(MaxErrorMsgLen, "error message")
}

const minItemError = 2 + minStr

func encodeItemErrors(e *Encoder, errs []ItemError) {
	encodeList(e, errs, func(e *Encoder, ie *ItemError) { ie.encode(e) })
}

func decodeItemErrors(d *Decoder) []ItemError {
	return decodeList(d, minItemError, "item errors", func(d *Decoder, ie *ItemError) { ie.decode(d) })
}

// BatchResponse holds one ItemError per item of a BatchPutEnd, BatchRemove or
// BatchPutRevoke, in request order.
type BatchResponse struct {
	op    Op
	Items []ItemError
}

// NewBatchResponse returns a BatchResponse for op.
func NewBatchResponse(op Op, items []ItemError) *BatchResponse {
	return &BatchResponse{op: op, Items: items}
}

func (m *BatchResponse) Op() Op            { return m.op }
func (m *BatchResponse) Encode(e *Encoder) { encodeItemErrors(e, m.Items) }
func (m *BatchResponse) Decode(d *Decoder) { m.Items = decodeItemErrors(d) }

func encodeKeys(e *Encoder, keys []string) {
	encodeList(e, keys, func(e *Encoder, k *string) { e.Str(*k) })
}

func decodeKeys(d *Decoder) []string {
	return decodeList(d, minKey, "keys", func(d *Decoder, k *string) { *k = d.Key() })
}

// NewRequest returns an empty request message for op, ready to Decode; nil for an unknown op.
func NewRequest(op Op) Message {
	switch op {
	case OpPing, OpRemoveAll, OpStatus:
		return NewEmpty(op)
	case OpPutStart:
		return new(PutStartRequest)
	case OpPutEnd:
		return new(PutEndRequest)
	case OpPutRevoke:
		return new(PutRevokeRequest)
	case OpBatchPutRevoke:
		return new(BatchPutRevokeRequest)
	case OpRegisterMaster:
		return new(RegisterMasterRequest)
	case OpAddMaster:
		return new(AddMasterRequest)
	case OpRemoveMaster:
		return new(RemoveMasterRequest)
	case OpLookup:
		return new(LookupRequest)
	case OpExists:
		return new(ExistsRequest)
	case OpRemove:
		return new(RemoveRequest)
	case OpRemoveByRegex:
		return new(RemoveByRegexRequest)
	case OpBatchPutStart:
		return new(BatchPutStartRequest)
	case OpBatchPutEnd:
		return new(BatchPutEndRequest)
	case OpBatchLookup:
		return new(BatchLookupRequest)
	case OpBatchExists:
		return new(BatchExistsRequest)
	case OpBatchRemove:
		return new(BatchRemoveRequest)
	case OpList:
		return new(ListRequest)
	case OpRegisterWorker:
		return new(RegisterWorkerRequest)
	case OpHeartbeat:
		return new(HeartbeatRequest)
	case OpWrite:
		return new(WriteRequest)
	case OpCommit:
		return new(CommitRequest)
	case OpRead, OpReadRange:
		return new(ReadRequest)
	case OpDrop:
		return new(DropRequest)
	case OpShmOpen:
		return NewEmpty(op)
	case OpShmPin:
		return new(ShmPinRequest)
	case OpShmRelease:
		return new(ShmReleaseRequest)
	case OpShmTouch:
		return new(ShmTouchRequest)
	}
	if m := newModelRequest(op); m != nil {
		return m
	}
	if m := newShmPutRequest(op); m != nil {
		return m
	}
	if m := newPrefetchRequest(op); m != nil {
		return m
	}
	if m := newSessionRequest(op); m != nil {
		return m
	}
	if m := newKVSessionRequest(op); m != nil {
		return m
	}
	if m := newTenantRequest(op); m != nil {
		return m
	}
	return newLifecycleRequest(op)
}

// NewResponse returns an empty response message for op, ready to Decode; nil for an unknown op.
func NewResponse(op Op) Message {
	switch op {
	case OpPing, OpPutEnd, OpPutRevoke, OpRemove, OpWrite, OpCommit, OpDrop, OpRegisterMaster, OpAddMaster, OpRemoveMaster:
		return NewEmpty(op)
	case OpPutStart:
		return new(PutStartResponse)
	case OpLookup:
		return new(LookupResponse)
	case OpExists:
		return new(ExistsResponse)
	case OpRemoveByRegex, OpRemoveAll:
		return NewCountResponse(op, 0)
	case OpBatchPutStart:
		return new(BatchPutStartResponse)
	case OpBatchPutEnd, OpBatchRemove, OpBatchPutRevoke:
		return NewBatchResponse(op, nil)
	case OpBatchLookup:
		return new(BatchLookupResponse)
	case OpBatchExists:
		return new(BatchExistsResponse)
	case OpList:
		return new(ListResponse)
	case OpRegisterWorker:
		return new(RegisterWorkerResponse)
	case OpHeartbeat:
		return new(HeartbeatResponse)
	case OpStatus:
		return new(StatusResponse)
	case OpRead, OpReadRange:
		return NewReadResponse(op)
	case OpShmOpen:
		return new(ShmOpenResponse)
	case OpShmPin:
		return new(ShmPinResponse)
	case OpShmRelease:
		return NewCountResponse(op, 0)
	case OpShmTouch:
		return NewBatchResponse(op, nil)
	}
	if m := newModelResponse(op); m != nil {
		return m
	}
	if m := newShmPutResponse(op); m != nil {
		return m
	}
	if m := newPrefetchResponse(op); m != nil {
		return m
	}
	if m := newSessionResponse(op); m != nil {
		return m
	}
	if m := newKVSessionResponse(op); m != nil {
		return m
	}
	if m := newTenantResponse(op); m != nil {
		return m
	}
	return newLifecycleResponse(op)
}

// DecodeRequest decodes the body of a request with op. Errors wrap base.ErrInvalidParams.
func DecodeRequest(op Op, body []byte) (Message, error) {
	m := NewRequest(op)
	if m == nil {
		return nil, fmt.Errorf("%w: unknown opcode %d", base.ErrInvalidParams, op)
	}
	d := Decoder{b: body}
	m.Decode(&d)
	if err := d.Finish(); err != nil {
		return nil, fmt.Errorf("decode %s request: %w", op, err)
	}
	if r, ok := m.(*ReadRequest); ok && r.Op() != op && !(op == OpReadRange && r.Length == 0) {
		return nil, fmt.Errorf("%w: %s request with offset %d length %d", base.ErrInvalidParams, op, r.Offset, r.Length)
	}
	return m, nil
}

// DecodeResponse decodes the body of an OK response with op into m (which must be a response
// of op; nil: a new one). Errors wrap base.ErrInvalidParams.
func DecodeResponse(op Op, body []byte, m Message) (Message, error) {
	if m == nil {
		m = NewResponse(op)
		if m == nil {
			return nil, fmt.Errorf("%w: unknown opcode %d", base.ErrInvalidParams, op)
		}
	}
	d := Decoder{b: body}
	m.Decode(&d)
	if err := d.Finish(); err != nil {
		return nil, fmt.Errorf("decode %s response: %w", op, err)
	}
	return m, nil
}
