package wire

import (
	"fmt"

	"github.com/mooncake-go/mooncake/internal/base"
)

// Read calls: finding objects on a master (Lookup, Exists, List and their batches) and
// reading their bytes from a worker (Read, ReadRange). See docs/protocol.md.

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

// LookupResponse describes the committed object (its record's ObjectMeta) and where its
// replicas are. ObjectMeta.Key is not on the wire (the request names the key): Decode leaves
// it empty.
type LookupResponse struct {
	base.ObjectMeta
	Replicas []base.Placement
}

func (m *LookupResponse) Op() Op { return OpLookup }
func (m *LookupResponse) Encode(e *Encoder) {
	e.U64(uint64(m.Version))
	e.I64(m.Size)
	e.U64(m.Checksum)
	encodePlacements(e, m.Replicas)
}
func (m *LookupResponse) Decode(d *Decoder) {
	m.Version = base.Version(d.U64())
	m.Size = d.Size()
	m.Checksum = d.U64()
	m.Replicas = decodePlacements(d)
}

// ExistsRequest asks whether a key is committed. With Placements the answer also says where
// the object is (ExistsResponse.Lookup), so a client's get after its exists goes to the
// worker without asking the master again. Placements is a trailing optional flags byte
// (ExistsFlagPlacements), written only when set, as ReadRequest's flags.
type ExistsRequest struct {
	Key        string
	AllowStale bool
	Placements bool
}

// ExistsFlagPlacements is bit 0 of the optional flags byte of ExistsRequest and
// BatchExistsRequest: answer with placements.
const ExistsFlagPlacements uint8 = 1 << 0

func (m *ExistsRequest) Op() Op { return OpExists }
func (m *ExistsRequest) Encode(e *Encoder) {
	(&LookupRequest{Key: m.Key, AllowStale: m.AllowStale}).Encode(e)
	encodeExistsFlags(e, m.Placements)
}
func (m *ExistsRequest) Decode(d *Decoder) {
	var r LookupRequest
	r.Decode(d)
	m.Key, m.AllowStale = r.Key, r.AllowStale
	m.Placements = decodeExistsFlags(d)
}

func encodeExistsFlags(e *Encoder, placements bool) {
	if placements {
		e.U8(ExistsFlagPlacements)
	}
}

// decodeExistsFlags reads the optional flags byte: present when bytes remain, exactly one,
// with known bits, and not 0 (a sender leaves an empty one out, so the encoding stays
// canonical).
func decodeExistsFlags(d *Decoder) bool {
	if d.Err() != nil || d.Remaining() == 0 {
		return false
	}
	switch f := d.U8(); {
	case d.Err() != nil:
	case f == 0:
		d.Fail(fmt.Errorf("%w: exists flags 0 on the wire (leave the byte out)", base.ErrInvalidParams))
	case f&^ExistsFlagPlacements != 0:
		d.Fail(fmt.Errorf("%w: unknown exists flags %#x", base.ErrInvalidParams, f))
	default:
		return true
	}
	return false
}

// ExistsResponse answers Exists. Lookup, only for a request with Placements and only when the
// object exists and has a replica on an active worker, is what a Lookup would answer; it
// trails the answer on the wire (present when bytes remain).
type ExistsResponse struct {
	Exists bool
	Lookup *LookupResponse
}

func (m *ExistsResponse) Op() Op { return OpExists }
func (m *ExistsResponse) Encode(e *Encoder) {
	e.Bool(m.Exists)
	if m.Lookup != nil {
		m.Lookup.Encode(e)
	}
}
func (m *ExistsResponse) Decode(d *Decoder) {
	m.Exists = d.Bool()
	if d.Err() == nil && d.Remaining() > 0 {
		m.Lookup = new(LookupResponse)
		m.Lookup.Decode(d)
		if d.Err() == nil && !m.Exists {
			d.Fail(fmt.Errorf("%w: exists answer with a placement for a missing key", base.ErrInvalidParams))
		}
	}
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

// BatchExistsRequest asks about several keys; Placements as in ExistsRequest.
type BatchExistsRequest struct {
	Keys       []string
	AllowStale bool
	Placements bool
}

func (m *BatchExistsRequest) Op() Op { return OpBatchExists }
func (m *BatchExistsRequest) Encode(e *Encoder) {
	(&BatchLookupRequest{Keys: m.Keys, AllowStale: m.AllowStale}).Encode(e)
	encodeExistsFlags(e, m.Placements)
}
func (m *BatchExistsRequest) Decode(d *Decoder) {
	var r BatchLookupRequest
	r.Decode(d)
	m.Keys, m.AllowStale = r.Keys, r.AllowStale
	m.Placements = decodeExistsFlags(d)
}

// BatchExistsResponse holds one answer per key, in request order. Lookups, only for a
// request with Placements, holds one item per key too: the object's Lookup answer, or an
// error (OBJECT_NOT_FOUND for a missing key or one without a replica on an active worker). It
// trails the answers on the wire (present when bytes remain) and must have their length.
type BatchExistsResponse struct {
	Exists  []bool
	Lookups []LookupResult
}

func (m *BatchExistsResponse) Op() Op { return OpBatchExists }
func (m *BatchExistsResponse) Encode(e *Encoder) {
	encodeList(e, m.Exists, func(e *Encoder, x *bool) { e.Bool(*x) })
	if m.Lookups != nil {
		(&BatchLookupResponse{Items: m.Lookups}).Encode(e)
	}
}
func (m *BatchExistsResponse) Decode(d *Decoder) {
	m.Exists = decodeList(d, 1, "answers", func(d *Decoder, x *bool) { *x = d.Bool() })
	if d.Err() == nil && d.Remaining() > 0 {
		var l BatchLookupResponse
		l.Decode(d)
		m.Lookups = l.Items
		if d.Err() == nil && len(m.Lookups) != len(m.Exists) {
			d.Fail(fmt.Errorf("%w: %d placements for %d exists answers", base.ErrInvalidParams, len(m.Lookups), len(m.Exists)))
		}
	}
}

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
//
// Cached (bit ReadFlagCached of the same byte) says the client's placement of the object is
// older than its lookup cache's TTL: the worker serves it only while it has heard from the
// leader within the last two heartbeat intervals, so any drop the leader owes it has arrived
// (docs/protocol.md, "Reads from a kept lookup"); else it answers INVALID_VERSION and the
// client looks the key up again.
type ReadRequest struct {
	Key      string
	Version  base.Version
	Offset   int64
	Length   int64
	Verifies bool
	Cached   bool
}

// ReadFlagVerifies is bit 0 of ReadRequest's optional flags byte (ReadRequest.Verifies);
// ReadFlagCached bit 1 (ReadRequest.Cached). Every other bit must be 0.
const (
	ReadFlagVerifies uint8 = 1 << 0
	ReadFlagCached   uint8 = 1 << 1
)

// Op returns OpReadRange when a range is set, else OpRead.
func (m *ReadRequest) Op() Op {
	if m.Length > 0 || m.Offset > 0 {
		return OpReadRange
	}
	return OpRead
}
func (m *ReadRequest) Encode(e *Encoder) {
	encodeObjectRange(e, m.Key, m.Version, m.Offset, m.Length)
	var f uint8
	if m.Verifies {
		f |= ReadFlagVerifies
	}
	if m.Cached {
		f |= ReadFlagCached
	}
	if f != 0 {
		e.U8(f)
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
		case f&^(ReadFlagVerifies|ReadFlagCached) != 0:
			d.Fail(fmt.Errorf("%w: unknown read flags %#x", base.ErrInvalidParams, f))
		default:
			m.Verifies, m.Cached = f&ReadFlagVerifies != 0, f&ReadFlagCached != 0
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
