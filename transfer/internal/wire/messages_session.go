package wire

import "github.com/mooncake-go/mooncake/internal/base"

// Put sessions (issue 21 item 2; opcodes 120-129): a layer-wise writer reserves objects with
// PutStart, writes their byte ranges as the engine produces them with Write frames (Offset set,
// Commit clear), and ends the session with one SessionCommit per placed worker, then one
// BatchPutEnd. SessionCommit is Commit that answers with the checksum the worker computed
// over what landed: the client never holds the whole object, so only the worker can hash it,
// and PutEnd must carry the checksum readers verify against. See docs/protocol.md, "Put
// sessions".

// SessionCommitRequest (op 120) makes a write whose chunks all landed visible on the worker,
// as Commit does, and asks for the checksum of the committed bytes. Safe to resend: a second
// call for a version the worker already committed answers that version's checksum.
type SessionCommitRequest struct {
	Key     string
	Version base.Version
}

func (m *SessionCommitRequest) Op() Op            { return OpSessionCommit }
func (m *SessionCommitRequest) Encode(e *Encoder) { encodeKeyVersion(e, (*base.KeyVersion)(m)) }
func (m *SessionCommitRequest) Decode(d *Decoder) { decodeKeyVersion(d, (*base.KeyVersion)(m)) }

// SessionCommitResponse carries base.Checksum of the committed object and its size.
type SessionCommitResponse struct {
	Checksum uint64
	Size     int64
}

func (m *SessionCommitResponse) Op() Op { return OpSessionCommit }
func (m *SessionCommitResponse) Encode(e *Encoder) {
	e.U64(m.Checksum)
	e.I64(m.Size)
}
func (m *SessionCommitResponse) Decode(d *Decoder) {
	m.Checksum = d.U64()
	m.Size = d.Size()
}

// newSessionRequest returns an empty request of a session op (nil for another op).
func newSessionRequest(op Op) Message {
	if op == OpSessionCommit {
		return new(SessionCommitRequest)
	}
	return nil
}

// newSessionResponse returns an empty response of a session op (nil for another op).
func newSessionResponse(op Op) Message {
	if op == OpSessionCommit {
		return new(SessionCommitResponse)
	}
	return nil
}
