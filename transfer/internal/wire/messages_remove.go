package wire

import "github.com/mooncake-go/mooncake/internal/base"

// Remove calls: removing objects on the leader (Remove, RemoveByRegex, RemoveAll,
// BatchRemove) and dropping replicas on a worker (Drop). See docs/protocol.md.

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

// BatchRemoveRequest removes several keys; the response is a BatchResponse.
type BatchRemoveRequest struct{ Keys []string }

func (m *BatchRemoveRequest) Op() Op            { return OpBatchRemove }
func (m *BatchRemoveRequest) Encode(e *Encoder) { encodeKeys(e, m.Keys) }
func (m *BatchRemoveRequest) Decode(d *Decoder) { m.Keys = decodeKeys(d) }

// DropRequest tells a worker to drop one version of an object (version 0: any). The response
// is Empty; dropping what is not there is OK.
type DropRequest struct {
	Key     string
	Version base.Version
}

func (m *DropRequest) Op() Op            { return OpDrop }
func (m *DropRequest) Encode(e *Encoder) { encodeKeyVersion(e, (*base.KeyVersion)(m)) }
func (m *DropRequest) Decode(d *Decoder) { decodeKeyVersion(d, (*base.KeyVersion)(m)) }
