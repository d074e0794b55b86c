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

// Replica names a worker holding (or chosen to hold) a replica and its data address.
type Replica struct {
	WorkerID base.WorkerID
	Address  string
}

// minimum encoded sizes, for Count checks.
const (
	minStr       = 4
	minReplica   = 2 * minStr
	minKey       = minStr + 1
	minPutStart  = minKey + 8 + minPutConfig
	minPutConfig = 1 + minStr + 8 + 1 + 1 + 1
)

func (r *Replica) encode(e *Encoder) {
	e.Str(string(r.WorkerID))
	e.Str(r.Address)
}

func (r *Replica) decode(d *Decoder) {
	r.WorkerID = decodeWorkerID(d)
	r.Address = d.Str(MaxAddrLen, "address")
}

func encodeReplicas(e *Encoder, rs []Replica) {
	encodeList(e, rs, func(e *Encoder, r *Replica) { r.encode(e) })
}

func decodeReplicas(d *Decoder) []Replica {
	return decodeList(d, minReplica, "replicas", func(d *Decoder, r *Replica) { r.decode(d) })
}

// PutConfig is the replication configuration of a put (client.ReplicateConfig on the wire).
type PutConfig struct {
	Replicas        uint8         // replica_num; 0: the master's default (1)
	PreferredWorker base.WorkerID // "" none; else place the first replica there if it has room
	SoftPinTTL      time.Duration // 0: no soft pin
	HardPin         bool          // never evicted until unpinned or removed
	Persistence     base.Persistence
	Upsert          bool // replace an existing key instead of failing with OBJECT_ALREADY_EXISTS
}

func (c *PutConfig) encode(e *Encoder) {
	e.U8(c.Replicas)
	e.Str(string(c.PreferredWorker))
	e.I64(int64(c.SoftPinTTL))
	e.Bool(c.HardPin)
	e.U8(uint8(c.Persistence))
	e.Bool(c.Upsert)
}

func (c *PutConfig) decode(d *Decoder) {
	c.Replicas = d.U8()
	c.PreferredWorker = decodeWorkerID(d)
	c.SoftPinTTL = decodeDuration(d)
	c.HardPin = d.Bool()
	c.Persistence = decodePersistence(d)
	c.Upsert = d.Bool()
}

// PutStartRequest asks the leader to place a new object: it picks workers and a version.
type PutStartRequest struct {
	Key    string
	Size   int64
	Config PutConfig
	// Exclude (trailing optional field, messages_exclude.go): workers the leader must not
	// place this put on, because an earlier attempt's write to them failed. At most
	// MaxExclude.
	Exclude []base.WorkerID
}

func (m *PutStartRequest) Op() Op { return OpPutStart }
func (m *PutStartRequest) Encode(e *Encoder) {
	m.encodeRecord(e)
	m.encodeExcludeField(e)
}
func (m *PutStartRequest) Decode(d *Decoder) {
	m.decodeRecord(d)
	m.decodeExcludeField(d)
}

func (m *PutStartRequest) encodeRecord(e *Encoder) {
	e.Str(m.Key)
	e.I64(m.Size)
	m.Config.encode(e)
}
func (m *PutStartRequest) decodeRecord(d *Decoder) {
	m.Key = d.Key()
	m.Size = d.Size()
	m.Config.decode(d)
}

// PutStartResponse is the placement: the object's new version and the workers to write to.
type PutStartResponse struct {
	Version  base.Version
	Replicas []Replica
}

func (m *PutStartResponse) Op() Op { return OpPutStart }
func (m *PutStartResponse) Encode(e *Encoder) {
	e.U64(uint64(m.Version))
	encodeReplicas(e, m.Replicas)
}
func (m *PutStartResponse) Decode(d *Decoder) {
	m.Version = base.Version(d.U64())
	m.Replicas = decodeReplicas(d)
}

// PutEndRequest commits a written object: one raft entry with the complete record. Replicas
// lists the workers that acknowledged their Write+Commit. Config repeats the put's config, so
// the record is complete even if the leader changed since PutStart.
type PutEndRequest struct {
	Key      string
	Version  base.Version
	Size     int64
	Checksum uint64
	Replicas []base.WorkerID
	Config   PutConfig
	// Tokens and Model (trailing optional fields, models.go): the KV-cache tokens the object
	// holds and their model; 0 and "" when the put does not say.
	Tokens int64
	Model  string
}

func (m *PutEndRequest) Op() Op { return OpPutEnd }
func (m *PutEndRequest) Encode(e *Encoder) {
	m.encodeRecord(e)
	m.encodeTokens(e)
}
func (m *PutEndRequest) Decode(d *Decoder) {
	m.decodeRecord(d)
	m.decodeTokens(d)
}

func (m *PutEndRequest) encodeRecord(e *Encoder) {
	e.Str(m.Key)
	e.U64(uint64(m.Version))
	e.I64(m.Size)
	e.U64(m.Checksum)
	encodeList(e, m.Replicas, func(e *Encoder, w *base.WorkerID) { e.Str(string(*w)) })
	m.Config.encode(e)
}
func (m *PutEndRequest) decodeRecord(d *Decoder) {
	m.Key = d.Key()
	m.Version = base.Version(d.U64())
	m.Size = d.Size()
	m.Checksum = d.U64()
	m.Replicas = decodeList(d, minStr, "replicas", func(d *Decoder, w *base.WorkerID) { *w = decodeWorkerID(d) })
	m.Config.decode(d)
}

// KeyVersion names one version of an object (version 0: any).
type KeyVersion struct {
	Key     string
	Version base.Version
}

func (kv *KeyVersion) encode(e *Encoder) {
	e.Str(kv.Key)
	e.U64(uint64(kv.Version))
}
func (kv *KeyVersion) decode(d *Decoder) {
	kv.Key = d.Key()
	kv.Version = base.Version(d.U64())
}

func encodeKeyVersions(e *Encoder, kvs []KeyVersion) {
	encodeList(e, kvs, func(e *Encoder, kv *KeyVersion) { kv.encode(e) })
}

func decodeKeyVersions(d *Decoder) []KeyVersion {
	return decodeList(d, minKey+8, "key versions", func(d *Decoder, kv *KeyVersion) { kv.decode(d) })
}

// PutRevokeRequest abandons a put that will not be committed: the leader drops its
// reservation and the workers drop the pending bytes.
type PutRevokeRequest struct {
	Key     string
	Version base.Version
}

func (m *PutRevokeRequest) Op() Op            { return OpPutRevoke }
func (m *PutRevokeRequest) Encode(e *Encoder) { (*KeyVersion)(m).encode(e) }
func (m *PutRevokeRequest) Decode(d *Decoder) { (*KeyVersion)(m).decode(d) }

// BatchPutRevokeRequest revokes several puts.
type BatchPutRevokeRequest struct{ Items []KeyVersion }

func (m *BatchPutRevokeRequest) Op() Op            { return OpBatchPutRevoke }
func (m *BatchPutRevokeRequest) Encode(e *Encoder) { encodeKeyVersions(e, m.Items) }
func (m *BatchPutRevokeRequest) Decode(d *Decoder) { m.Items = decodeKeyVersions(d) }

// RegisterMasterRequest asks the leader to record a master's client RPC address in the
// masters table (raftmeta.RegisterMaster), so every master's status lists it. A follower
// sends it for itself; the leader skips the raft commit when the table already holds that
// address. Its response is Empty; a follower answers NOT_LEADER.
type RegisterMasterRequest struct {
	MasterID string
	RPCAddr  string
}

func (m *RegisterMasterRequest) Op() Op { return OpRegisterMaster }
func (m *RegisterMasterRequest) Encode(e *Encoder) {
	e.Str(m.MasterID)
	e.Str(m.RPCAddr)
}
func (m *RegisterMasterRequest) Decode(d *Decoder) {
	m.MasterID = d.Str(MaxAddrLen, "master id")
	m.RPCAddr = d.Str(MaxAddrLen, "master RPC address")
}

// AddMasterRequest asks the leader to add a master to the raft configuration as a voter
// (raftmeta.Node.AddVoter) and, when RPCAddr is set, to record its client address in the
// masters table. The new master must already run without a cluster of its own (`mooncake
// master --join`). Its response is Empty; a follower answers NOT_LEADER. Adding a member
// already in the configuration at RaftAddr is OK (nothing changes).
type AddMasterRequest struct {
	MasterID string
	RaftAddr string
	RPCAddr  string // "" when unknown: the new master registers its own address once it follows
}

func (m *AddMasterRequest) Op() Op { return OpAddMaster }
func (m *AddMasterRequest) Encode(e *Encoder) {
	e.Str(m.MasterID)
	e.Str(m.RaftAddr)
	e.Str(m.RPCAddr)
}
func (m *AddMasterRequest) Decode(d *Decoder) {
	m.MasterID = d.Str(MaxAddrLen, "master id")
	m.RaftAddr = d.Str(MaxAddrLen, "master raft address")
	m.RPCAddr = d.Str(MaxAddrLen, "master RPC address")
}

// RemoveMasterRequest asks the leader to remove a master from the raft configuration (and
// its entry in the masters table). Its response is Empty; a follower answers NOT_LEADER, and
// a master id that is not in the configuration OBJECT_NOT_FOUND.
type RemoveMasterRequest struct {
	MasterID string
}

func (m *RemoveMasterRequest) Op() Op            { return OpRemoveMaster }
func (m *RemoveMasterRequest) Encode(e *Encoder) { e.Str(m.MasterID) }
func (m *RemoveMasterRequest) Decode(d *Decoder) { m.MasterID = d.Str(MaxAddrLen, "master id") }

// LookupRequest asks where an object is. AllowStale lets a follower answer from its local
// state; otherwise the leader answers (linearizable) and followers refuse with NOT_LEADER.
type LookupRequest struct {
	Key        string
	AllowStale bool
}

func (m *LookupRequest) Op() Op { return OpLookup }
func (m *LookupRequest) Encode(e *Encoder) {
	e.Str(m.Key)
	e.Bool(m.AllowStale)
}
func (m *LookupRequest) Decode(d *Decoder) {
	m.Key = d.Key()
	m.AllowStale = d.Bool()
}

// LookupResponse describes the committed object and its replicas.
type LookupResponse struct {
	Version  base.Version
	Size     int64
	Checksum uint64
	Replicas []Replica
}

func (m *LookupResponse) Op() Op { return OpLookup }
func (m *LookupResponse) Encode(e *Encoder) {
	e.U64(uint64(m.Version))
	e.I64(m.Size)
	e.U64(m.Checksum)
	encodeReplicas(e, m.Replicas)
}
func (m *LookupResponse) Decode(d *Decoder) {
	m.Version = base.Version(d.U64())
	m.Size = d.Size()
	m.Checksum = d.U64()
	m.Replicas = decodeReplicas(d)
}

// ExistsRequest asks whether a key is committed.
type ExistsRequest struct {
	Key        string
	AllowStale bool
}

func (m *ExistsRequest) Op() Op            { return OpExists }
func (m *ExistsRequest) Encode(e *Encoder) { (*LookupRequest)(m).Encode(e) }
func (m *ExistsRequest) Decode(d *Decoder) { (*LookupRequest)(m).Decode(d) }

// ExistsResponse answers Exists.
type ExistsResponse struct{ Exists bool }

func (m *ExistsResponse) Op() Op            { return OpExists }
func (m *ExistsResponse) Encode(e *Encoder) { e.Bool(m.Exists) }
func (m *ExistsResponse) Decode(d *Decoder) { m.Exists = d.Bool() }

// RemoveRequest removes a key (all versions). Its response is Empty; a missing key is
// OBJECT_NOT_FOUND.
type RemoveRequest struct{ Key string }

func (m *RemoveRequest) Op() Op            { return OpRemove }
func (m *RemoveRequest) Encode(e *Encoder) { e.Str(m.Key) }
func (m *RemoveRequest) Decode(d *Decoder) { m.Key = d.Key() }

// RemoveByRegexRequest removes every key matching a Go RE2 pattern (regexp syntax).
type RemoveByRegexRequest struct{ Pattern string }

func (m *RemoveByRegexRequest) Op() Op            { return OpRemoveByRegex }
func (m *RemoveByRegexRequest) Encode(e *Encoder) { e.Str(m.Pattern) }
func (m *RemoveByRegexRequest) Decode(d *Decoder) {
	m.Pattern = d.Str(MaxPatternLen, "pattern")
}

// CountResponse reports how many objects a RemoveByRegex or RemoveAll removed.
type CountResponse struct {
	op    Op
	Count int64
}

// NewCountResponse returns a CountResponse for op (OpRemoveByRegex or OpRemoveAll).
func NewCountResponse(op Op, n int64) *CountResponse { return &CountResponse{op: op, Count: n} }

func (m *CountResponse) Op() Op            { return m.op }
func (m *CountResponse) Encode(e *Encoder) { e.I64(m.Count) }
func (m *CountResponse) Decode(d *Decoder) { m.Count = d.I64() }

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

// BatchPutStartRequest places several objects at once.
type BatchPutStartRequest struct{ Items []PutStartRequest }

func (m *BatchPutStartRequest) Op() Op { return OpBatchPutStart }
func (m *BatchPutStartRequest) Encode(e *Encoder) {
	encodeList(e, m.Items, func(e *Encoder, r *PutStartRequest) { r.encodeRecord(e) })
	encodeBatchExclude(e, m.Items)
}
func (m *BatchPutStartRequest) Decode(d *Decoder) {
	m.Items = decodeList(d, minPutStart, "items", func(d *Decoder, r *PutStartRequest) { r.decodeRecord(d) })
	decodeBatchExclude(d, m.Items)
}

// PutStartResult is one item of a BatchPutStartResponse: an error, or a placement.
type PutStartResult struct {
	Err ItemError
	PutStartResponse
}

// BatchPutStartResponse holds one result per item, in request order.
type BatchPutStartResponse struct{ Items []PutStartResult }

func (m *BatchPutStartResponse) Op() Op { return OpBatchPutStart }
func (m *BatchPutStartResponse) Encode(e *Encoder) {
	encodeList(e, m.Items, func(e *Encoder, r *PutStartResult) {
		r.Err.encode(e)
		r.PutStartResponse.Encode(e)
	})
}
func (m *BatchPutStartResponse) Decode(d *Decoder) {
	m.Items = decodeList(d, minItemError+8+4, "items", func(d *Decoder, r *PutStartResult) {
		r.Err.decode(d)
		r.PutStartResponse.Decode(d)
	})
}

// BatchPutEndRequest commits several objects in one raft entry. The response is a
// BatchResponse (one ItemError per item; OBJECT_ALREADY_EXISTS for duplicates).
type BatchPutEndRequest struct{ Items []PutEndRequest }

func (m *BatchPutEndRequest) Op() Op { return OpBatchPutEnd }
func (m *BatchPutEndRequest) Encode(e *Encoder) {
	encodeList(e, m.Items, func(e *Encoder, r *PutEndRequest) { r.encodeRecord(e) })
	encodeBatchTokens(e, m.Items)
}
func (m *BatchPutEndRequest) Decode(d *Decoder) {
	m.Items = decodeList(d, minKey+8+8+8+4+minPutConfig, "items", func(d *Decoder, r *PutEndRequest) { r.decodeRecord(d) })
	decodeBatchTokens(d, m.Items)
}

func encodeKeys(e *Encoder, keys []string) {
	encodeList(e, keys, func(e *Encoder, k *string) { e.Str(*k) })
}

func decodeKeys(d *Decoder) []string {
	return decodeList(d, minKey, "keys", func(d *Decoder, k *string) { *k = d.Key() })
}

// BatchLookupRequest looks up several keys.
type BatchLookupRequest struct {
	Keys       []string
	AllowStale bool
}

func (m *BatchLookupRequest) Op() Op { return OpBatchLookup }
func (m *BatchLookupRequest) Encode(e *Encoder) {
	encodeKeys(e, m.Keys)
	e.Bool(m.AllowStale)
}
func (m *BatchLookupRequest) Decode(d *Decoder) {
	m.Keys = decodeKeys(d)
	m.AllowStale = d.Bool()
}

// LookupResult is one item of a BatchLookupResponse: an error (OBJECT_NOT_FOUND...) or the object.
type LookupResult struct {
	Err ItemError
	LookupResponse
}

// BatchLookupResponse holds one result per key, in request order.
type BatchLookupResponse struct{ Items []LookupResult }

func (m *BatchLookupResponse) Op() Op { return OpBatchLookup }
func (m *BatchLookupResponse) Encode(e *Encoder) {
	encodeList(e, m.Items, func(e *Encoder, r *LookupResult) {
		r.Err.encode(e)
		r.LookupResponse.Encode(e)
	})
}
func (m *BatchLookupResponse) Decode(d *Decoder) {
	m.Items = decodeList(d, minItemError+24+4, "items", func(d *Decoder, r *LookupResult) {
		r.Err.decode(d)
		r.LookupResponse.Decode(d)
	})
}

// BatchExistsRequest asks about several keys.
type BatchExistsRequest struct {
	Keys       []string
	AllowStale bool
}

func (m *BatchExistsRequest) Op() Op            { return OpBatchExists }
func (m *BatchExistsRequest) Encode(e *Encoder) { (*BatchLookupRequest)(m).Encode(e) }
func (m *BatchExistsRequest) Decode(d *Decoder) { (*BatchLookupRequest)(m).Decode(d) }

// BatchExistsResponse holds one answer per key, in request order.
type BatchExistsResponse struct{ Exists []bool }

func (m *BatchExistsResponse) Op() Op { return OpBatchExists }
func (m *BatchExistsResponse) Encode(e *Encoder) {
	encodeList(e, m.Exists, func(e *Encoder, x *bool) { e.Bool(*x) })
}
func (m *BatchExistsResponse) Decode(d *Decoder) {
	m.Exists = decodeList(d, 1, "answers", func(d *Decoder, x *bool) { *x = d.Bool() })
}

// BatchRemoveRequest removes several keys; the response is a BatchResponse.
type BatchRemoveRequest struct{ Keys []string }

func (m *BatchRemoveRequest) Op() Op            { return OpBatchRemove }
func (m *BatchRemoveRequest) Encode(e *Encoder) { encodeKeys(e, m.Keys) }
func (m *BatchRemoveRequest) Decode(d *Decoder) { m.Keys = decodeKeys(d) }

// ListRequest lists keys with a prefix, in key order, after Cursor ("" from the start), at
// most Limit (0: the server's default page size).
type ListRequest struct {
	Prefix string
	Cursor string
	Limit  uint32
}

func (m *ListRequest) Op() Op { return OpList }
func (m *ListRequest) Encode(e *Encoder) {
	e.Str(m.Prefix)
	e.Str(m.Cursor)
	e.U32(m.Limit)
}
func (m *ListRequest) Decode(d *Decoder) {
	m.Prefix = d.Str(base.MaxKeyLen, "prefix")
	m.Cursor = d.Str(base.MaxKeyLen, "cursor")
	m.Limit = d.U32()
}

// ListItem is one listed key.
type ListItem struct {
	Key  string
	Size int64
}

// ListResponse is one page; NextCursor "" means the listing is complete.
type ListResponse struct {
	Items      []ListItem
	NextCursor string
}

func (m *ListResponse) Op() Op { return OpList }
func (m *ListResponse) Encode(e *Encoder) {
	encodeList(e, m.Items, func(e *Encoder, it *ListItem) {
		e.Str(it.Key)
		e.I64(it.Size)
	})
	e.Str(m.NextCursor)
}
func (m *ListResponse) Decode(d *Decoder) {
	m.Items = decodeList(d, minKey+8, "items", func(d *Decoder, it *ListItem) {
		it.Key = d.Key()
		it.Size = d.Size()
	})
	m.NextCursor = d.Str(base.MaxKeyLen, "cursor")
}

// RegisterWorkerRequest announces a worker (at start and after a master asks it to
// re-register) with its capacities and the inventory of committed objects it holds.
//
// An inventory too large for one body is sent in pages: Session, Page and More are trailing
// optional fields, added within protocol version 1 (docs/protocol.md, "Evolving a message
// within a version", and "RegisterWorker in pages"). They travel together: a body that ends
// after the inventory comes from a sender that predates them, or from a worker whose whole
// inventory fits one page, and decodes with Session 0 (one whole registration, as before).
// Encode writes the three only when Session is non-zero, and Decode refuses a present Session
// of 0, so the encoding stays canonical.
type RegisterWorkerRequest struct {
	WorkerID     base.WorkerID
	Address      string
	DRAMCapacity int64
	NVMeCapacity int64
	// Inventory is this page's objects (all of them when Session is 0).
	Inventory []base.ObjectMeta
	// Session identifies one paged registration attempt: random and non-zero, the same on
	// every page of the attempt, a new one for each attempt. 0: the request is a whole
	// registration in one message (Page and More are then 0 and false and not on the wire).
	Session uint64
	// Page numbers the pages of a session from 0; the master takes them only in order.
	Page uint32
	// More says more pages follow; the page with More false ends the registration, and only
	// its response carries the drops.
	More bool
}

func (m *RegisterWorkerRequest) Op() Op { return OpRegisterWorker }
func (m *RegisterWorkerRequest) Encode(e *Encoder) {
	e.Str(string(m.WorkerID))
	e.Str(m.Address)
	e.I64(m.DRAMCapacity)
	e.I64(m.NVMeCapacity)
	encodeList(e, m.Inventory, func(e *Encoder, o *base.ObjectMeta) {
		e.Str(o.Key)
		e.U64(uint64(o.Version))
		e.I64(o.Size)
		e.U64(o.Checksum)
	})
	if m.Session != 0 {
		e.U64(m.Session)
		e.U32(m.Page)
		e.Bool(m.More)
	}
}
func (m *RegisterWorkerRequest) Decode(d *Decoder) {
	m.WorkerID = decodeWorkerID(d)
	m.Address = d.Str(MaxAddrLen, "address")
	m.DRAMCapacity = d.Size()
	m.NVMeCapacity = d.Size()
	m.Inventory = decodeList(d, minKey+24, "inventory", func(d *Decoder, o *base.ObjectMeta) {
		o.Key = d.Key()
		o.Version = base.Version(d.U64())
		o.Size = d.Size()
		o.Checksum = d.U64()
	})
	// The paging fields are present when bytes remain: all three, exactly 13 bytes (a short
	// group fails in U64/U32/Bool, extra bytes in Finish).
	if d.Err() == nil && d.Remaining() > 0 {
		m.Session = d.U64()
		m.Page = d.U32()
		m.More = d.Bool()
		if d.Err() == nil && m.Session == 0 {
			d.Fail(fmt.Errorf("%w: register_worker session 0 on the wire (0 means unpaged: leave the fields out)", base.ErrInvalidParams))
		}
	}
}

// RegisterWorkerResponse lists inventory entries the master does not know (or knows at
// another version): the worker drops them. HeartbeatInterval is how often to heartbeat.
type RegisterWorkerResponse struct {
	Drop              []KeyVersion
	HeartbeatInterval time.Duration
}

func (m *RegisterWorkerResponse) Op() Op { return OpRegisterWorker }
func (m *RegisterWorkerResponse) Encode(e *Encoder) {
	encodeKeyVersions(e, m.Drop)
	e.I64(int64(m.HeartbeatInterval))
}
func (m *RegisterWorkerResponse) Decode(d *Decoder) {
	m.Drop = decodeKeyVersions(d)
	m.HeartbeatInterval = decodeDuration(d)
}

// HeartbeatRequest reports a worker alive with its usage per tier.
//
// NVMeObjects and then Leaving are trailing optional fields, added within protocol version 1
// (docs/protocol.md, "Evolving a message within a version"): a body that ends after
// DRAMObjects comes from a sender that predates both and decodes with HasNVMeObjects false; one
// that ends after NVMeObjects decodes with HasLeaving false. Encode writes each field only when
// its Has flag is set (NVMeObjects also when HasLeaving is: a later field needs the earlier
// ones on the wire), so the encoding stays canonical (decode then encode gives back the same
// bytes).
type HeartbeatRequest struct {
	WorkerID base.WorkerID
	// DRAMUsed is the bytes of the worker's DRAM arena in use (committed objects, pending
	// writes, alignment): what placement subtracts from the capacity.
	DRAMUsed int64
	// NVMeUsed is the bytes of the objects on the worker's NVMe tier; 0 without one.
	NVMeUsed int64
	// DRAMObjects counts the objects with a copy in DRAM (the wire field `dram_objects`,
	// called `objects` before NVMeObjects was added; it always counted DRAM copies).
	DRAMObjects int64
	// NVMeObjects counts the objects whose bytes are on NVMe. An object with a copy in both
	// tiers (durable, or promoted after a hit) counts in both.
	NVMeObjects int64
	// HasNVMeObjects says NVMeObjects is on the wire. A sender sets it whenever it fills
	// NVMeObjects (0 included).
	HasNVMeObjects bool
	// Leaving says the worker is shutting down to restart (its last heartbeat, sent by a
	// graceful shutdown): the leader keeps it and its replicas for its restart grace instead of
	// the usual ClientTTL of silence. Only the final heartbeat sets it.
	Leaving bool
	// HasLeaving says Leaving is on the wire. A sender sets it on its final heartbeat, and
	// whenever it sends Stats (a later field needs the earlier ones on the wire).
	HasLeaving bool
	// Stats is the third trailing optional field (models.go): the worker's cumulative
	// counters and per-model tallies. HasStats says it is on the wire; a sender that sets it
	// also sets HasNVMeObjects and HasLeaving (a later field needs the earlier ones on the
	// wire), so a master that predates Leaving refuses heartbeats carrying Stats: upgrade
	// masters before workers.
	Stats    WorkerStats
	HasStats bool
	// AskClientTTL is the fourth trailing optional field: set, the master answers with its
	// client_ttl (HeartbeatResponse.ClientTTL), which bounds the worker's heartbeat calls so
	// that it finds a new leader before that leader's deadline for it. On the wire only when
	// set (one byte, 1; a 0 is refused: leave the field out); a sender that sets it also sets
	// HasNVMeObjects, HasLeaving and HasStats (a later field needs the earlier ones on the
	// wire). Only a master that knows the field answers with ClientTTL, so a worker that
	// predates it never sees the longer reply.
	AskClientTTL bool
}

func (m *HeartbeatRequest) Op() Op { return OpHeartbeat }
func (m *HeartbeatRequest) Encode(e *Encoder) {
	e.Str(string(m.WorkerID))
	e.I64(m.DRAMUsed)
	e.I64(m.NVMeUsed)
	e.I64(m.DRAMObjects)
	if m.HasNVMeObjects || m.HasLeaving || m.HasStats || m.AskClientTTL {
		e.I64(m.NVMeObjects)
	}
	if m.HasLeaving || m.HasStats || m.AskClientTTL {
		e.Bool(m.Leaving)
	}
	if m.HasStats || m.AskClientTTL {
		m.Stats.encode(e)
	}
	if m.AskClientTTL {
		e.Bool(true)
	}
}
func (m *HeartbeatRequest) Decode(d *Decoder) {
	m.WorkerID = decodeWorkerID(d)
	m.DRAMUsed = d.Size()
	m.NVMeUsed = d.Size()
	m.DRAMObjects = d.Size()
	// The optional field is present when bytes remain; anything but exactly 8 of them is
	// refused (a short field by Size, extra bytes by Finish).
	if d.Err() == nil && d.Remaining() > 0 {
		m.NVMeObjects = d.Size()
		m.HasNVMeObjects = true
	}
	// Likewise leaving: exactly one byte, 0 or 1 (Bool refuses anything else).
	if d.Err() == nil && d.Remaining() > 0 {
		m.Leaving = d.Bool()
		m.HasLeaving = true
	}
	// Then the stats section, whole or refused.
	if d.Err() == nil && d.Remaining() > 0 {
		m.Stats.decode(d)
		m.HasStats = true
	}
	// Then ask_client_ttl: exactly one byte, 1.
	if d.Err() == nil && d.Remaining() > 0 {
		m.AskClientTTL = d.Bool()
		if d.Err() == nil && !m.AskClientTTL {
			d.Fail(fmt.Errorf("%w: heartbeat ask_client_ttl 0 on the wire (leave it out)", base.ErrInvalidParams))
		}
	}
}

// HeartbeatResponse carries the replicas the worker must drop (removed objects, revoked or
// expired puts) and asks it to re-register when the master does not know it (a new leader).
//
// ClientTTL is a trailing optional field, the answer to HeartbeatRequest.AskClientTTL: the
// master's client_ttl, on the wire only when the request asked and it is non-zero (0 on the
// wire is refused). A worker that asked and finds it absent (a master that predates it) keeps
// its default heartbeat timeout.
type HeartbeatResponse struct {
	Drop       []KeyVersion
	Reregister bool
	ClientTTL  time.Duration
}

func (m *HeartbeatResponse) Op() Op { return OpHeartbeat }
func (m *HeartbeatResponse) Encode(e *Encoder) {
	encodeKeyVersions(e, m.Drop)
	e.Bool(m.Reregister)
	if m.ClientTTL != 0 {
		e.I64(int64(m.ClientTTL))
	}
}
func (m *HeartbeatResponse) Decode(d *Decoder) {
	m.Drop = decodeKeyVersions(d)
	m.Reregister = d.Bool()
	if d.Err() == nil && d.Remaining() > 0 {
		m.ClientTTL = decodeDuration(d)
		if d.Err() == nil && m.ClientTTL == 0 {
			d.Fail(fmt.Errorf("%w: heartbeat client_ttl 0 on the wire (leave it out)", base.ErrInvalidParams))
		}
	}
}

// StatusResponse carries the master's status as JSON (the same document as its HTTP status page).
type StatusResponse struct{ JSON []byte }

func (m *StatusResponse) Op() Op            { return OpStatus }
func (m *StatusResponse) Encode(e *Encoder) { e.Bytes(m.JSON) }
func (m *StatusResponse) Decode(d *Decoder) { m.JSON = d.Bytes(MaxStatusLen, "status") }

// WriteRequest carries one chunk of an object to a worker; the chunk's bytes are the frame's
// payload (PayloadLen bytes, written at Offset). Every chunk of an object repeats the object's
// fields. With Commit set the worker commits the object after this chunk (a single-frame
// write: Offset 0 and PayloadLen == TotalSize); otherwise a Commit call follows once every
// chunk is acknowledged.
type WriteRequest struct {
	Key         string
	Version     base.Version
	TotalSize   int64
	Offset      int64
	Persistence base.Persistence
	SoftPinTTL  time.Duration
	HardPin     bool
	Checksum    uint64 // base.Checksum of the whole object; 0: the worker computes it
	Commit      bool
	// Model is a trailing optional field (models.go): the model whose KV-cache tokens the
	// object holds, so the worker can tally its bytes per model; "" when the put names none.
	Model string
}

func (m *WriteRequest) Op() Op { return OpWrite }
func (m *WriteRequest) Encode(e *Encoder) {
	e.Str(m.Key)
	e.U64(uint64(m.Version))
	e.I64(m.TotalSize)
	e.I64(m.Offset)
	e.U8(uint8(m.Persistence))
	e.I64(int64(m.SoftPinTTL))
	e.Bool(m.HardPin)
	e.U64(m.Checksum)
	e.Bool(m.Commit)
	m.encodeModel(e)
}
func (m *WriteRequest) Decode(d *Decoder) {
	m.Key = d.Key()
	m.Version = base.Version(d.U64())
	m.TotalSize = d.Size()
	m.Offset = d.Size()
	m.Persistence = decodePersistence(d)
	m.SoftPinTTL = decodeDuration(d)
	m.HardPin = d.Bool()
	m.Checksum = d.U64()
	m.Commit = d.Bool()
	m.decodeModel(d)
}

// CommitRequest makes a striped write visible on the worker once all its chunks arrived.
type CommitRequest struct {
	Key      string
	Version  base.Version
	Checksum uint64 // 0: don't verify, compute
}

func (m *CommitRequest) Op() Op { return OpCommit }
func (m *CommitRequest) Encode(e *Encoder) {
	e.Str(m.Key)
	e.U64(uint64(m.Version))
	e.U64(m.Checksum)
}
func (m *CommitRequest) Decode(d *Decoder) {
	m.Key = d.Key()
	m.Version = base.Version(d.U64())
	m.Checksum = d.U64()
}

// ReadRequest reads an object (op Read: Offset and Length 0) or a range of it (op ReadRange:
// Length > 0). Version 0 reads whatever version the worker holds.
//
// Verifies is a trailing optional field (a flags byte, bit ReadFlagVerifies), written only
// when set, added within protocol version 1 (docs/protocol.md, "Evolving a message within a
// version"): the client checks the bytes it receives against the object's checksum and, on a
// mismatch, reads once more without the flag before it reports corruption. Only then may the
// worker send the payload by reference (sendfile from its arena's memfd): the socket keeps
// referring to the arena's pages after the send, so bytes rewritten there before the client
// reads them (the object removed and its range reused) reach the client, and only a verifying
// client notices.
type ReadRequest struct {
	Key      string
	Version  base.Version
	Offset   int64
	Length   int64
	Verifies bool
}

// ReadFlagVerifies is bit 0 of ReadRequest's optional flags byte (ReadRequest.Verifies).
// Every other bit must be 0.
const ReadFlagVerifies uint8 = 1 << 0

// Op returns OpReadRange when a range is set, else OpRead.
func (m *ReadRequest) Op() Op {
	if m.Length > 0 || m.Offset > 0 {
		return OpReadRange
	}
	return OpRead
}
func (m *ReadRequest) Encode(e *Encoder) {
	encodeObjectRange(e, m.Key, m.Version, m.Offset, m.Length)
	if m.Verifies {
		e.U8(ReadFlagVerifies)
	}
}
func (m *ReadRequest) Decode(d *Decoder) {
	m.Key, m.Version, m.Offset, m.Length = decodeObjectRange(d)
	// The flags byte is present when bytes remain: exactly one, with known bits, and not 0
	// (a sender leaves an empty one out, so the encoding stays canonical).
	if d.Err() == nil && d.Remaining() > 0 {
		switch f := d.U8(); {
		case d.Err() != nil:
		case f == 0:
			d.Fail(fmt.Errorf("%w: read flags 0 on the wire (leave the byte out)", base.ErrInvalidParams))
		case f&^ReadFlagVerifies != 0:
			d.Fail(fmt.Errorf("%w: unknown read flags %#x", base.ErrInvalidParams, f))
		default:
			m.Verifies = true
		}
	}
}

// encodeObjectRange and decodeObjectRange are the body of ReadRequest and ShmPinRequest
// before ReadRequest's optional flags.
func encodeObjectRange(e *Encoder, key string, v base.Version, off, n int64) {
	e.Str(key)
	e.U64(uint64(v))
	e.I64(off)
	e.I64(n)
}

func decodeObjectRange(d *Decoder) (key string, v base.Version, off, n int64) {
	return d.Key(), base.Version(d.U64()), d.Size(), d.Size()
}

// ReadResponse describes the object a Read or ReadRange served; the bytes are the payload.
// Size and Checksum are the whole object's.
type ReadResponse struct {
	op       Op
	Version  base.Version
	Size     int64
	Checksum uint64
	Tier     base.Tier
}

// NewReadResponse returns a ReadResponse for op (OpRead or OpReadRange).
func NewReadResponse(op Op) *ReadResponse { return &ReadResponse{op: op} }

// SetOp sets the op a ReadResponse answers.
func (m *ReadResponse) SetOp(op Op) { m.op = op }

func (m *ReadResponse) Op() Op { return m.op }
func (m *ReadResponse) Encode(e *Encoder) {
	e.U64(uint64(m.Version))
	e.I64(m.Size)
	e.U64(m.Checksum)
	e.U8(uint8(m.Tier))
}
func (m *ReadResponse) Decode(d *Decoder) {
	m.Version = base.Version(d.U64())
	m.Size = d.Size()
	m.Checksum = d.U64()
	m.Tier = base.Tier(d.U8())
}

// DropRequest tells a worker to drop one version of an object (version 0: any). The response
// is Empty; dropping what is not there is OK.
type DropRequest struct {
	Key     string
	Version base.Version
}

func (m *DropRequest) Op() Op            { return OpDrop }
func (m *DropRequest) Encode(e *Encoder) { (*KeyVersion)(m).encode(e) }
func (m *DropRequest) Decode(d *Decoder) { (*KeyVersion)(m).decode(d) }

// MaxBootIDLen bounds ShmOpenResponse.BootID (a kernel boot id is 36 bytes).
const MaxBootIDLen = 64

// MaxShmRelease bounds the leases of one ShmRelease request.
const MaxShmRelease = 4096

// ShmOpenResponse describes a worker's shared DRAM arena, so a client on the same host can map
// it read-only: open /proc/<PID>/fd/<FD>, check that the file is Inode on Dev and Size bytes
// long, and that BootID is its own kernel's boot id. The request is Empty; a worker without a
// shared arena answers NOT_SUPPORTED. ArenaID is drawn at random when the arena is created:
// ShmPin answers carry it, so a client notices a worker that restarted behind the same
// address (a new arena) and maps again.
//
// The Gen fields (optional, trailing; GenSize 0: absent, as an older worker sends) describe
// the worker's copy generations, a second file mapped the same way: ShmGenSlots little-endian
// u64 counters; slot ShmGenSlot(key) is incremented whenever a DRAM copy of a key hashing to it
// stops being the object's (removed, replaced, evicted, spilled), before its range can be
// freed. A client that read a slot before a ShmPin and finds it unchanged later knows the
// pinned range still holds that object, and may copy it again without a pin.
type ShmOpenResponse struct {
	BootID  string
	PID     int64
	FD      int64
	Inode   uint64
	Dev     uint64
	Size    int64
	ArenaID uint64
	// LeaseTTL is the longest a ShmPin lease lives without a ShmRelease.
	LeaseTTL time.Duration
	GenFD    int64
	GenInode uint64
	GenDev   uint64
	GenSize  int64
}

func (m *ShmOpenResponse) Op() Op { return OpShmOpen }
func (m *ShmOpenResponse) Encode(e *Encoder) {
	e.Str(m.BootID)
	e.I64(m.PID)
	e.I64(m.FD)
	e.U64(m.Inode)
	e.U64(m.Dev)
	e.I64(m.Size)
	e.U64(m.ArenaID)
	e.I64(int64(m.LeaseTTL))
	if m.GenSize != 0 {
		e.I64(m.GenFD)
		e.U64(m.GenInode)
		e.U64(m.GenDev)
		e.I64(m.GenSize)
	}
}
func (m *ShmOpenResponse) Decode(d *Decoder) {
	m.BootID = d.Str(MaxBootIDLen, "boot id")
	m.PID = d.Size()
	m.FD = d.Size()
	m.Inode = d.U64()
	m.Dev = d.U64()
	m.Size = d.Size()
	m.ArenaID = d.U64()
	m.LeaseTTL = decodeDuration(d)
	// The generation fields are present when bytes remain: all four (a short group fails in
	// Size/U64, extra bytes in Finish).
	if d.Err() == nil && d.Remaining() > 0 {
		m.GenFD = d.Size()
		m.GenInode = d.U64()
		m.GenDev = d.U64()
		m.GenSize = d.Size()
		if d.Err() == nil && m.GenSize == 0 {
			d.Fail(fmt.Errorf("%w: shm_open generation table of 0 bytes on the wire (leave the fields out)", base.ErrInvalidParams))
		}
	}
}

// ShmGenSlots is the number of counters in a worker's copy-generation table (ShmOpenResponse).
const ShmGenSlots = 4096

// ShmGenSlot returns the generation slot of key: FNV-1a (64-bit) of the key, modulo
// ShmGenSlots. Worker and client must agree on it, so it is part of the protocol.
func ShmGenSlot(key string) int {
	h := uint64(14695981039346656037)
	for i := 0; i < len(key); i++ {
		h ^= uint64(key[i])
		h *= 1099511628211
	}
	return int(h % ShmGenSlots)
}

// ShmPinRequest pins an object (Offset and Length 0: the whole object; Length 0 with an
// Offset: to the end) in the worker's shared arena for a client on the same host to copy.
// Version 0 pins whatever version the worker holds. An object whose bytes are not in the
// shared arena gets NOT_SUPPORTED (the client reads it over TCP instead).
type ShmPinRequest struct {
	Key     string
	Version base.Version
	Offset  int64
	Length  int64
}

func (m *ShmPinRequest) Op() Op { return OpShmPin }
func (m *ShmPinRequest) Encode(e *Encoder) {
	encodeObjectRange(e, m.Key, m.Version, m.Offset, m.Length)
}
func (m *ShmPinRequest) Decode(d *Decoder) {
	m.Key, m.Version, m.Offset, m.Length = decodeObjectRange(d)
}

// ShmPinResponse says where the pinned bytes are: Length bytes at ArenaOffset of the arena
// ArenaID. Version, Size, Checksum and Tier are those of a ReadResponse (Size and Checksum
// of the whole object). Lease names the pin for ShmRelease; the worker also drops it when
// the connection that made it closes or after the LeaseTTL of ShmOpen.
type ShmPinResponse struct {
	Lease       uint64
	ArenaID     uint64
	ArenaOffset int64
	Length      int64
	Version     base.Version
	Size        int64
	Checksum    uint64
	Tier        base.Tier
}

func (m *ShmPinResponse) Op() Op { return OpShmPin }
func (m *ShmPinResponse) Encode(e *Encoder) {
	e.U64(m.Lease)
	e.U64(m.ArenaID)
	e.I64(m.ArenaOffset)
	e.I64(m.Length)
	e.U64(uint64(m.Version))
	e.I64(m.Size)
	e.U64(m.Checksum)
	e.U8(uint8(m.Tier))
}
func (m *ShmPinResponse) Decode(d *Decoder) {
	m.Lease = d.U64()
	m.ArenaID = d.U64()
	m.ArenaOffset = d.Size()
	m.Length = d.Size()
	m.Version = base.Version(d.U64())
	m.Size = d.Size()
	m.Checksum = d.U64()
	m.Tier = base.Tier(d.U8())
}

// ShmReleaseRequest ends leases of ShmPin. Unknown leases (expired, already released, or
// dropped with their connection) are not an error: the response counts the leases that were
// still held, so a client that copied under a lease knows whether the bytes stayed pinned
// for the whole copy.
type ShmReleaseRequest struct{ Leases []uint64 }

func (m *ShmReleaseRequest) Op() Op { return OpShmRelease }
func (m *ShmReleaseRequest) Encode(e *Encoder) {
	encodeList(e, m.Leases, func(e *Encoder, l *uint64) { e.U64(*l) })
}
func (m *ShmReleaseRequest) Decode(d *Decoder) {
	n := d.Count(8, MaxShmRelease, "leases")
	if n == 0 {
		return
	}
	m.Leases = make([]uint64, n)
	for i := range m.Leases {
		m.Leases[i] = d.U64()
	}
}

// MaxShmTouch bounds the items of one ShmTouch request.
const MaxShmTouch = 4096

// ShmTouchRequest records reads of objects that a client on the worker's host copied out of
// the shared arena without a ShmPin (it knew where they were from an earlier pin, and their
// checksum proved the copy). The worker counts each as a DRAM hit for its eviction order. The
// response is a BatchResponse, one item per request item: OK, OBJECT_NOT_FOUND or
// INVALID_VERSION (the worker no longer holds that version), or NOT_SUPPORTED (its bytes are
// no longer in the shared arena), so the client stops copying from where it was.
type ShmTouchRequest struct{ Items []KeyVersion }

func (m *ShmTouchRequest) Op() Op { return OpShmTouch }
func (m *ShmTouchRequest) Encode(e *Encoder) {
	encodeKeyVersions(e, m.Items)
}
func (m *ShmTouchRequest) Decode(d *Decoder) {
	m.Items = decodeBoundedKeyVersions(d, MaxShmTouch, "touches")
}

// decodeBoundedKeyVersions decodes a list<KeyVersion> of at most limit items (nil if empty).
func decodeBoundedKeyVersions(d *Decoder, limit int, what string) []KeyVersion {
	n := d.Count(minKey+8, limit, what)
	if n == 0 {
		return nil
	}
	items := make([]KeyVersion, n)
	for i := range items {
		items[i].decode(d)
	}
	return items
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
