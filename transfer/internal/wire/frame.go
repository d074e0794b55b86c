package wire

import (
	"encoding/binary"
	"fmt"
	"io"

	"github.com/mooncake-go/mooncake/internal/base"
)

// ProtocolVersion is the version this build speaks. Peers with another version are refused at
// the handshake with PROTOCOL_VERSION_MISMATCH. Bump it on any incompatible change; a trailing
// optional field (HeartbeatRequest.NVMeObjects, .Leaving) is the one kind of growth allowed within a
// version (docs/protocol.md, "Evolving a message within a version").
const ProtocolVersion uint16 = 1

// Magic opens every handshake, in both directions: "MCGO".
var Magic = [4]byte{'M', 'C', 'G', 'O'}

// HeaderLen is the size of a frame header in bytes.
const HeaderLen = 32

// Handshake bounds.
const (
	// MaxClusterIDLen bounds the cluster id in the client hello.
	MaxClusterIDLen = 255
	// MaxHelloMsgLen bounds the message in the server's hello reply.
	MaxHelloMsgLen = 1024
	// HelloFixedLen is the fixed part of both hellos: magic, version, u16, u16 length.
	HelloFixedLen = 10
)

// Flags of a frame header.
const (
	// FlagResponse marks a response; clear in requests.
	FlagResponse uint8 = 1 << 0
	// FlagError marks an error response: Status holds the base.Code and the body is an
	// ErrorBody. Only valid with FlagResponse.
	FlagError uint8 = 1 << 1
	// FlagChecksum says PayloadChecksum holds base.Checksum of the payload; the receiver
	// verifies it. In a read request it asks the server to checksum the response payload.
	FlagChecksum uint8 = 1 << 2

	knownFlags = FlagResponse | FlagError | FlagChecksum
)

// Header is a decoded frame header.
type Header struct {
	Op              Op
	Flags           uint8
	Status          base.Code // error code of an error response; 0 otherwise
	BodyLen         uint32
	RequestID       uint64
	PayloadLen      uint64
	PayloadChecksum uint64
}

// Limits bound what a peer may declare. Zero fields take the defaults below.
type Limits struct {
	// MaxBodyLen bounds a message body. Default 64 MiB (a RegisterWorker inventory of about
	// half a million objects with 100-byte keys; larger inventories go in pages, see
	// RegisterWorkerRequest).
	MaxBodyLen uint32
	// MaxPayloadLen bounds the payload of one frame. Default 4 GiB; the services bound object
	// sizes further with their own configuration (max value size, segment size).
	MaxPayloadLen uint64
}

// Default limits.
const (
	DefaultMaxBodyLen    = 64 << 20
	DefaultMaxPayloadLen = 4 << 30
)

// EnsureDefaults fills zero fields.
func (l *Limits) EnsureDefaults() {
	if l.MaxBodyLen == 0 {
		l.MaxBodyLen = DefaultMaxBodyLen
	}
	if l.MaxPayloadLen == 0 {
		l.MaxPayloadLen = DefaultMaxPayloadLen
	}
}

// PutHeader encodes h into b[:HeaderLen].
func PutHeader(b []byte, h *Header) {
	_ = b[HeaderLen-1]
	b[0] = uint8(h.Op)
	b[1] = h.Flags
	binary.LittleEndian.PutUint16(b[2:], uint16(h.Status))
	binary.LittleEndian.PutUint32(b[4:], h.BodyLen)
	binary.LittleEndian.PutUint64(b[8:], h.RequestID)
	binary.LittleEndian.PutUint64(b[16:], h.PayloadLen)
	binary.LittleEndian.PutUint64(b[24:], h.PayloadChecksum)
}

// DecodeHeader decodes b[:HeaderLen] and checks it against lim: known op and flags, lengths
// within bounds, a payload only where the op allows one. The caller has not allocated
// anything for the body or payload yet; a non-nil error means the connection must be closed
// (the stream can no longer be trusted).
func DecodeHeader(b []byte, lim Limits, h *Header) error {
	if len(b) < HeaderLen {
		return fmt.Errorf("%w: frame header is %d bytes, want %d", base.ErrInvalidParams, len(b), HeaderLen)
	}
	lim.EnsureDefaults()
	*h = Header{
		Op:              Op(b[0]),
		Flags:           b[1],
		Status:          base.Code(binary.LittleEndian.Uint16(b[2:])),
		BodyLen:         binary.LittleEndian.Uint32(b[4:]),
		RequestID:       binary.LittleEndian.Uint64(b[8:]),
		PayloadLen:      binary.LittleEndian.Uint64(b[16:]),
		PayloadChecksum: binary.LittleEndian.Uint64(b[24:]),
	}
	if !h.Op.Known() {
		return fmt.Errorf("%w: unknown opcode %d", base.ErrInvalidParams, b[0])
	}
	if h.Flags&^knownFlags != 0 {
		return fmt.Errorf("%w: unknown flags %#x", base.ErrInvalidParams, h.Flags)
	}
	resp := h.Flags&FlagResponse != 0
	if h.Flags&FlagError != 0 && !resp {
		return fmt.Errorf("%w: error flag on a request", base.ErrInvalidParams)
	}
	if h.Status != base.CodeOK && h.Flags&FlagError == 0 {
		return fmt.Errorf("%w: status %d without the error flag", base.ErrInvalidParams, h.Status)
	}
	if h.Flags&FlagError != 0 && h.Status == base.CodeOK {
		return fmt.Errorf("%w: error response with status OK", base.ErrInvalidParams)
	}
	if h.BodyLen > lim.MaxBodyLen {
		return fmt.Errorf("%w: %w: body of %d bytes, the limit is %d", base.ErrInvalidParams, base.ErrTooLarge, h.BodyLen, lim.MaxBodyLen)
	}
	if h.PayloadLen > lim.MaxPayloadLen {
		return fmt.Errorf("%w: %w: payload of %d bytes, the limit is %d", base.ErrInvalidParams, base.ErrTooLarge, h.PayloadLen, lim.MaxPayloadLen)
	}
	if h.PayloadLen > 0 {
		allowed := (!resp && h.Op.RequestPayload()) || (resp && h.Flags&FlagError == 0 && h.Op.ResponsePayload())
		if !allowed {
			return fmt.Errorf("%w: %s %s cannot carry a payload", base.ErrInvalidParams, h.Op, kind(resp))
		}
	}
	if h.PayloadLen == 0 && h.PayloadChecksum != 0 {
		return fmt.Errorf("%w: payload checksum without a payload", base.ErrInvalidParams)
	}
	return nil
}

func kind(resp bool) string {
	if resp {
		return "response"
	}
	return "request"
}

// AppendClientHello appends the client's hello: magic, version, flags (0), cluster id.
//
//	| "MCGO" | version u16 | flags u16 (0) | cluster_id_len u16 | cluster_id |
func AppendClientHello(b []byte, version uint16, clusterID string) []byte {
	b = append(b, Magic[:]...)
	b = binary.LittleEndian.AppendUint16(b, version)
	b = binary.LittleEndian.AppendUint16(b, 0)
	b = binary.LittleEndian.AppendUint16(b, uint16(len(clusterID)))
	return append(b, clusterID...)
}

// ClientHello is a decoded client hello.
type ClientHello struct {
	Version   uint16
	ClusterID string
}

// ReadClientHello reads and decodes a client hello from r. A wrong magic, an unknown flag or a
// cluster id over MaxClusterIDLen is an error wrapping base.ErrInvalidParams; the version is
// returned as sent (the server decides what it accepts).
func ReadClientHello(r io.Reader) (ClientHello, error) {
	var fixed [HelloFixedLen]byte
	if _, err := io.ReadFull(r, fixed[:]); err != nil {
		return ClientHello{}, err
	}
	if [4]byte(fixed[:4]) != Magic {
		return ClientHello{}, fmt.Errorf("%w: bad handshake magic %q: not a mooncake-go peer", base.ErrInvalidParams, fixed[:4])
	}
	h := ClientHello{Version: binary.LittleEndian.Uint16(fixed[4:])}
	if f := binary.LittleEndian.Uint16(fixed[6:]); f != 0 {
		return h, fmt.Errorf("%w: unknown hello flags %#x", base.ErrInvalidParams, f)
	}
	n := binary.LittleEndian.Uint16(fixed[8:])
	if n > MaxClusterIDLen {
		return h, fmt.Errorf("%w: %w: cluster id of %d bytes, the limit is %d", base.ErrInvalidParams, base.ErrTooLarge, n, MaxClusterIDLen)
	}
	var id [MaxClusterIDLen]byte
	if _, err := io.ReadFull(r, id[:n]); err != nil {
		return h, err
	}
	h.ClusterID = string(id[:n])
	return h, nil
}

// AppendServerHello appends the server's reply: magic, version, status code, message.
//
//	| "MCGO" | version u16 | status u16 | msg_len u16 | msg |
func AppendServerHello(b []byte, version uint16, status base.Code, msg string) []byte {
	if len(msg) > MaxHelloMsgLen {
		msg = msg[:MaxHelloMsgLen]
	}
	b = append(b, Magic[:]...)
	b = binary.LittleEndian.AppendUint16(b, version)
	b = binary.LittleEndian.AppendUint16(b, uint16(status))
	b = binary.LittleEndian.AppendUint16(b, uint16(len(msg)))
	return append(b, msg...)
}

// ServerHello is a decoded server hello.
type ServerHello struct {
	Version uint16
	Status  base.Code
	Msg     string
}

// ReadServerHello reads and decodes the server's reply to a hello.
func ReadServerHello(r io.Reader) (ServerHello, error) {
	var fixed [HelloFixedLen]byte
	if _, err := io.ReadFull(r, fixed[:]); err != nil {
		return ServerHello{}, err
	}
	if [4]byte(fixed[:4]) != Magic {
		return ServerHello{}, fmt.Errorf("%w: bad handshake magic %q: not a mooncake-go server", base.ErrInvalidParams, fixed[:4])
	}
	h := ServerHello{
		Version: binary.LittleEndian.Uint16(fixed[4:]),
		Status:  base.Code(binary.LittleEndian.Uint16(fixed[6:])),
	}
	n := binary.LittleEndian.Uint16(fixed[8:])
	if n > MaxHelloMsgLen {
		return h, fmt.Errorf("%w: %w: hello message of %d bytes, the limit is %d", base.ErrInvalidParams, base.ErrTooLarge, n, MaxHelloMsgLen)
	}
	var msg [MaxHelloMsgLen]byte
	if _, err := io.ReadFull(r, msg[:n]); err != nil {
		return h, err
	}
	h.Msg = string(msg[:n])
	return h, nil
}

// ErrorBody is the body of an error response. Status in the header holds the code; the body
// holds the message and, for NOT_LEADER, the leader's master id and RPC address (empty when
// unknown).
//
//	| msg str | leader_id str | leader_addr str |     (str = u32 length + bytes)
type ErrorBody struct {
	Msg        string
	LeaderID   string
	LeaderAddr string
}

// Bounds of ErrorBody fields.
const (
	MaxErrorMsgLen = 64 << 10
	MaxAddrLen     = 1024
)

// Encode appends the body.
func (m *ErrorBody) Encode(e *Encoder) {
	e.Str(m.Msg)
	e.Str(m.LeaderID)
	e.Str(m.LeaderAddr)
}

// Decode reads the body.
func (m *ErrorBody) Decode(d *Decoder) {
	m.Msg = d.Str(MaxErrorMsgLen, "error message")
	m.LeaderID = d.Str(MaxAddrLen, "leader id")
	m.LeaderAddr = d.Str(MaxAddrLen, "leader address")
}
