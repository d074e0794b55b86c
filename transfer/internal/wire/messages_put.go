package wire

import (
	"time"

	"github.com/mooncake-go/mooncake/internal/base"
)

// Put calls: placing an object on the leader (PutStart, PutEnd, PutRevoke and their
// batches) and writing its bytes to workers (Write, Commit). See docs/protocol.md.

// encodePutConfig appends a put's configuration (base.PutConfig, client.ReplicateConfig on
// the wire): replicas u8 | preferred worker string | soft pin TTL i64 (ns) | hard pin bool |
// persistence u8 | upsert bool.
func encodePutConfig(e *Encoder, c *base.PutConfig) {
	e.U8(c.Replicas)
	e.Str(string(c.PreferredWorker))
	e.I64(int64(c.SoftPinTTL))
	e.Bool(c.HardPin)
	e.U8(uint8(c.Persistence))
	e.Bool(c.Upsert)
}

func decodePutConfig(d *Decoder, c *base.PutConfig) {
	c.Replicas = d.U8()
	c.PreferredWorker = decodeWorkerID(d)
	c.SoftPinTTL = decodeDuration(d)
	c.HardPin = d.Bool()
	c.Persistence = decodePersistence(d)
	c.Upsert = d.Bool()
}

// PutStartRequest asks the leader to place a new object: it picks workers and a version.
// Of the object's record only Key and Size are on the wire (the leader sets Version).
type PutStartRequest struct {
	base.Object
	Config base.PutConfig
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
	encodePutConfig(e, &m.Config)
}
func (m *PutStartRequest) decodeRecord(d *Decoder) {
	m.Key = d.Key()
	m.Size = d.Size()
	decodePutConfig(d, &m.Config)
}

// PutStartResponse is the placement: the object's new version and the workers to write to.
type PutStartResponse struct {
	Version  base.Version
	Replicas []base.Placement
}

func (m *PutStartResponse) Op() Op { return OpPutStart }
func (m *PutStartResponse) Encode(e *Encoder) {
	e.U64(uint64(m.Version))
	encodePlacements(e, m.Replicas)
}
func (m *PutStartResponse) Decode(d *Decoder) {
	m.Version = base.Version(d.U64())
	m.Replicas = decodePlacements(d)
}

// PutEndRequest commits a written object: one raft entry with the complete record. Replicas
// lists the workers that acknowledged their Write+Commit. Config repeats the put's config, so
// the record is complete even if the leader changed since PutStart.
//
// The record's pins are not on the wire as such: the client asks for them in Config
// (SoftPinTTL, HardPin) and the leader sets Object.SoftPinUntil and Object.HardPin from it by
// its own clock; the codec neither writes nor reads those two fields. Tokens and Model are
// trailing optional fields (models.go).
type PutEndRequest struct {
	base.Object
	Config base.PutConfig
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
	encodePutConfig(e, &m.Config)
}
func (m *PutEndRequest) decodeRecord(d *Decoder) {
	m.Key = d.Key()
	m.Version = base.Version(d.U64())
	m.Size = d.Size()
	m.Checksum = d.U64()
	m.Replicas = decodeList(d, minStr, "replicas", func(d *Decoder, w *base.WorkerID) { *w = decodeWorkerID(d) })
	decodePutConfig(d, &m.Config)
}

// PutRevokeRequest abandons a put that will not be committed: the leader drops its
// reservation and the workers drop the pending bytes.
type PutRevokeRequest struct {
	Key     string
	Version base.Version
}

func (m *PutRevokeRequest) Op() Op            { return OpPutRevoke }
func (m *PutRevokeRequest) Encode(e *Encoder) { encodeKeyVersion(e, (*base.KeyVersion)(m)) }
func (m *PutRevokeRequest) Decode(d *Decoder) { decodeKeyVersion(d, (*base.KeyVersion)(m)) }

// BatchPutRevokeRequest revokes several puts.
type BatchPutRevokeRequest struct{ Items []base.KeyVersion }

func (m *BatchPutRevokeRequest) Op() Op            { return OpBatchPutRevoke }
func (m *BatchPutRevokeRequest) Encode(e *Encoder) { encodeKeyVersions(e, m.Items) }
func (m *BatchPutRevokeRequest) Decode(d *Decoder) { m.Items = decodeKeyVersions(d) }

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
