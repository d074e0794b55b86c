package transfer

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/mooncake-go/mooncake/internal/base"
	"github.com/mooncake-go/mooncake/transfer/internal/wire"
)

// The messages of every call. They are defined in transfer/internal/wire (where their
// decoders are fuzzed) and re-exported here; docs/protocol.md gives their bytes.
type (
	// Message is the body of one request or response.
	Message = wire.Message
	// Op is a call's opcode.
	Op = wire.Op

	Empty                  = wire.Empty
	ItemError              = wire.ItemError
	PutStartRequest        = wire.PutStartRequest
	PutStartResponse       = wire.PutStartResponse
	PutEndRequest          = wire.PutEndRequest
	PutRevokeRequest       = wire.PutRevokeRequest
	BatchPutRevokeRequest  = wire.BatchPutRevokeRequest
	RegisterMasterRequest  = wire.RegisterMasterRequest
	AddMasterRequest       = wire.AddMasterRequest
	RemoveMasterRequest    = wire.RemoveMasterRequest
	ReplicateRequest       = wire.ReplicateRequest
	DrainWorkerRequest     = wire.DrainWorkerRequest
	RetireWorkerRequest    = wire.RetireWorkerRequest
	LeaveWorkerRequest     = wire.LeaveWorkerRequest
	AttachWorkerRequest    = wire.AttachWorkerRequest
	CreateTaskRequest      = wire.CreateTaskRequest
	CreateTaskResponse     = wire.CreateTaskResponse
	QueryTaskRequest       = wire.QueryTaskRequest
	QueryTaskResponse      = wire.QueryTaskResponse
	LookupRequest          = wire.LookupRequest
	LookupResponse         = wire.LookupResponse
	ExistsRequest          = wire.ExistsRequest
	ExistsResponse         = wire.ExistsResponse
	RemoveRequest          = wire.RemoveRequest
	RemoveByRegexRequest   = wire.RemoveByRegexRequest
	CountResponse          = wire.CountResponse
	BatchResponse          = wire.BatchResponse
	BatchPutStartRequest   = wire.BatchPutStartRequest
	PutStartResult         = wire.PutStartResult
	BatchPutStartResponse  = wire.BatchPutStartResponse
	BatchPutEndRequest     = wire.BatchPutEndRequest
	BatchLookupRequest     = wire.BatchLookupRequest
	LookupResult           = wire.LookupResult
	BatchLookupResponse    = wire.BatchLookupResponse
	BatchExistsRequest     = wire.BatchExistsRequest
	BatchExistsResponse    = wire.BatchExistsResponse
	BatchRemoveRequest     = wire.BatchRemoveRequest
	ListRequest            = wire.ListRequest
	ListItem               = wire.ListItem
	ListResponse           = wire.ListResponse
	RegisterWorkerRequest  = wire.RegisterWorkerRequest
	RegisterWorkerResponse = wire.RegisterWorkerResponse
	HeartbeatRequest       = wire.HeartbeatRequest
	WorkerStats            = wire.WorkerStats
	ModelStats             = wire.ModelStats
	HeartbeatResponse      = wire.HeartbeatResponse
	StatusResponse         = wire.StatusResponse
	WriteRequest           = wire.WriteRequest
	CommitRequest          = wire.CommitRequest
	ReadRequest            = wire.ReadRequest
	ReadResponse           = wire.ReadResponse
	DropRequest            = wire.DropRequest
	ShmOpenResponse        = wire.ShmOpenResponse
	ShmPinRequest          = wire.ShmPinRequest
	ShmPinResponse         = wire.ShmPinResponse
	ShmReleaseRequest      = wire.ShmReleaseRequest
	ShmTouchRequest        = wire.ShmTouchRequest
	PrefetchRequest        = wire.PrefetchRequest
	ShmPutOpenRequest      = wire.ShmPutOpenRequest
	ShmPutOpenResponse     = wire.ShmPutOpenResponse
	ShmPutWriteRequest     = wire.ShmPutWriteRequest
	ShmPutCloseRequest     = wire.ShmPutCloseRequest
	// Limits bound what a peer may declare (body and payload lengths).
	Limits = wire.Limits
)

// Opcodes (see docs/protocol.md for the request and response of each).
const (
	OpPing           = wire.OpPing
	OpPutStart       = wire.OpPutStart
	OpPutEnd         = wire.OpPutEnd
	OpPutRevoke      = wire.OpPutRevoke
	OpLookup         = wire.OpLookup
	OpExists         = wire.OpExists
	OpRemove         = wire.OpRemove
	OpRemoveByRegex  = wire.OpRemoveByRegex
	OpRemoveAll      = wire.OpRemoveAll
	OpBatchPutStart  = wire.OpBatchPutStart
	OpBatchPutEnd    = wire.OpBatchPutEnd
	OpBatchLookup    = wire.OpBatchLookup
	OpBatchExists    = wire.OpBatchExists
	OpBatchRemove    = wire.OpBatchRemove
	OpList           = wire.OpList
	OpRegisterWorker = wire.OpRegisterWorker
	OpHeartbeat      = wire.OpHeartbeat
	OpStatus         = wire.OpStatus
	OpBatchPutRevoke = wire.OpBatchPutRevoke
	OpRegisterMaster = wire.OpRegisterMaster
	OpAddMaster      = wire.OpAddMaster
	OpRemoveMaster   = wire.OpRemoveMaster
	OpReplicate      = wire.OpReplicate
	OpDrainWorker    = wire.OpDrainWorker
	OpRetireWorker   = wire.OpRetireWorker
	OpLeaveWorker    = wire.OpLeaveWorker
	OpAttachWorker   = wire.OpAttachWorker
	OpCreateTask     = wire.OpCreateTask
	OpQueryTask      = wire.OpQueryTask
	OpWrite          = wire.OpWrite
	OpCommit         = wire.OpCommit
	OpRead           = wire.OpRead
	OpReadRange      = wire.OpReadRange
	OpDrop           = wire.OpDrop
	OpShmOpen        = wire.OpShmOpen
	OpShmPin         = wire.OpShmPin
	OpShmRelease     = wire.OpShmRelease
	OpShmTouch       = wire.OpShmTouch
	OpShmPutOpen     = wire.OpShmPutOpen
	OpShmPutWrite    = wire.OpShmPutWrite
	OpShmPutClose    = wire.OpShmPutClose
	OpPrefetch       = wire.OpPrefetch
)

// MaxShmRelease bounds the leases of one ShmRelease request.
const MaxShmRelease = wire.MaxShmRelease

// MaxShmTouch bounds the items of one ShmTouch request.
const MaxShmTouch = wire.MaxShmTouch

// MaxPrefetch bounds the items of one Prefetch request.
const MaxPrefetch = wire.MaxPrefetch

// MaxExclude bounds the workers one PutStart may exclude (a re-placed put).
const MaxExclude = wire.MaxExclude

// MaxTaskTargets bounds a copy task's target segments.
const MaxTaskTargets = wire.MaxTaskTargets

// MaxAddrLen bounds an address on the wire (and a task's segment name: an id or address).
const MaxAddrLen = wire.MaxAddrLen

// ShmGenSlots is the number of counters in a worker's copy-generation table.
const ShmGenSlots = wire.ShmGenSlots

// ShmGenSlot returns key's slot in a copy-generation table (part of the protocol).
func ShmGenSlot(key string) int { return wire.ShmGenSlot(key) }

// MaxHeartbeatModels bounds the per-model entries of a heartbeat's stats section.
const MaxHeartbeatModels = wire.MaxHeartbeatModels

// ProtocolVersion is the protocol version this build speaks.
const ProtocolVersion = wire.ProtocolVersion

// Constructors of the messages whose type serves several ops.
var (
	// NewEmpty returns the empty message of op: the request of Ping, RemoveAll, Status and ShmOpen,
	// the response of PutEnd, PutRevoke, RegisterMaster, AddMaster, RemoveMaster, Remove, Write,
	// Commit, Drop and Ping.
	NewEmpty = wire.NewEmpty
	// NewCountResponse returns the response of RemoveByRegex, RemoveAll or ShmRelease.
	NewCountResponse = wire.NewCountResponse
	// NewBatchResponse returns the response of BatchPutEnd, BatchRemove, BatchPutRevoke or ShmTouch.
	NewBatchResponse = wire.NewBatchResponse
	// NewReadResponse returns the response of Read or ReadRange.
	NewReadResponse = wire.NewReadResponse
	// ItemErrorOf converts a per-item error of a batch into its wire form.
	ItemErrorOf = wire.ItemErrorOf
)

// Marshal returns the body of m (for tests and tools; the Client and Server encode into
// pooled buffers).
func Marshal(m Message) []byte {
	e := wire.Encoder{}
	m.Encode(&e)
	return e.B
}

// UnmarshalRequest decodes a request body of op.
func UnmarshalRequest(op Op, body []byte) (Message, error) { return wire.DecodeRequest(op, body) }

// UnmarshalResponse decodes an OK response body of op into m (nil: a new message).
func UnmarshalResponse(op Op, body []byte, m Message) (Message, error) {
	return wire.DecodeResponse(op, body, m)
}

// Handler is what a service (master or worker) implements to serve calls. The Server calls
// it from many goroutines at once. Embed UnimplementedHandler to answer NOT_SUPPORTED for the
// calls a service does not serve.
//
// Errors returned by a handler travel to the client as base.CodeOf(err) and err.Error(); the
// client gets a *base.CodeError that errors.Is the code's sentinel. Return a *NotLeaderError
// (or an error wrapping one) to send NOT_LEADER with the leader's id and address.
type Handler interface {
	// HandleCall serves every call without a payload: all master calls, Commit, Drop, Ping.
	// req is one of the *XxxRequest messages (or *Empty for RemoveAll, Status and Ping);
	// the returned message must be the call's response type (nil means Empty).
	// ctx ends when the connection breaks (nobody is left to read the answer) or the
	// server is closed; the client's own deadline is not sent on the wire.
	HandleCall(ctx context.Context, req Message) (Message, error)

	// HandleWrite serves one Write frame carrying n payload bytes (n may be 0). It returns
	// where the payload goes: the Server reads the payload from the socket straight into
	// sink.Dst (len(sink.Dst) must be n), then calls sink.Done exactly once. An error
	// returned here is sent to the client and the payload is discarded.
	HandleWrite(ctx context.Context, req *WriteRequest, n int64) (WriteSink, error)

	// HandleRead serves Read (req.Offset == 0 and req.Length == 0: the whole object) and
	// ReadRange (Length 0: to the end). It returns the bytes to send, pinned until the
	// Server calls src.Release after the send (or after a failed send).
	HandleRead(ctx context.Context, req *ReadRequest) (ReadSource, error)
}

// ReadNowHandler is a Handler that can serve some reads without blocking (from memory, say)
// and says so: the Server calls HandleReadNow on the connection's read loop, and sends a
// small answer from there too, instead of starting a goroutine for the request (which costs
// a thread wake-up per small read). ok false means "this read may block": the Server then
// calls HandleRead on a goroutine of its own, as for any other Handler. HandleReadNow must
// not block (no disk I/O, no waiting on locks held across I/O); src, err are as HandleRead's.
type ReadNowHandler interface {
	Handler
	HandleReadNow(ctx context.Context, req *ReadRequest) (src ReadSource, ok bool, err error)
}

// CallNowHandler is a Handler some of whose calls never block, and that says which by op:
// the Server serves a call whose op CallsNow names on the connection's read loop, answer
// included, instead of starting a goroutine for it (a goroutine start, its stack growth and a
// thread wake-up per call; on the master a put's PutStart is one: docs/benchmarks.md, "The
// master's CPU per put"). The connection's next requests wait behind such a call, so it must
// be short and must not block: no raft commit, no disk or network I/O, no waiting on locks
// held across I/O. CallsNow itself must be cheap; it is asked for every request but Read,
// ReadRange and Write (which have paths of their own: ReadNowHandler, HandleWrite).
type CallNowHandler interface {
	Handler
	CallsNow(op Op) bool
}

// WriteSink is where the payload of one Write frame goes.
type WriteSink struct {
	// Dst receives the payload (e.g. an arena range); len(Dst) == n. The Server writes
	// only Dst and only until it calls Done.
	Dst []byte
	// Done is called exactly once. err == nil: Dst holds the whole payload (verified against
	// the frame's checksum when it had one). err != nil: the transfer failed (the peer closed
	// mid-payload, a checksum mismatch, shutdown): the destination holds partial bytes and
	// must not become visible; abort it. Done's return value is the call's outcome (nil: OK)
	// and is sent to the client when the connection still works. Done may block (a durable
	// commit); it runs off the connection's read loop.
	Done func(err error) error
}

// ReadSource is what a Read sends: Resp (version, size, checksum of the object) and the
// payload Data (pinned bytes, e.g. an arena range), sent with one vectored write (a copy into
// the socket). Data must stay valid until Release is called; the Server calls Release (when
// non-nil) exactly once, after the payload was written or the send failed.
//
// File, when Valid, says the same bytes are also in a file at File.Offset (the worker's arena
// memfd): the Server then sends a read whose client verifies the object checksum
// (ReadRequest.Verifies) with sendfile(2) from there, by reference: the socket holds the
// file's pages, not a copy, and goes on referring to them after the send returned and Release
// ran, until the peer has read them. Bytes written into that range meanwhile (the object
// removed and its range reused by a new put) reach the peer; the verifying client detects
// that by the checksum and reads again without Verifies, which is always sent by copy
// (docs/protocol.md, "Reads sent by reference"). Reads without Verifies, and any send
// sendfile refuses (a hugetlb memfd: EINVAL), go by copy from Data. File.FD must stay open
// until Release.
type ReadSource struct {
	Resp    ReadResponse
	Data    []byte
	File    FileRange
	Release func()
}

// FileRange places a ReadSource's Data in an open file: Data[0] is at Offset of the file FD.
// The zero value (Valid false) means no file.
type FileRange struct {
	Valid  bool
	FD     int
	Offset int64
}

// UnimplementedHandler answers every call with NOT_SUPPORTED. Embed it in a Handler.
type UnimplementedHandler struct{}

// HandleCall returns an error wrapping base.ErrNotSupported.
func (UnimplementedHandler) HandleCall(_ context.Context, req Message) (Message, error) {
	return nil, fmt.Errorf("%w: %s is not served here", base.ErrNotSupported, req.Op())
}

// HandleWrite returns an error wrapping base.ErrNotSupported.
func (UnimplementedHandler) HandleWrite(context.Context, *WriteRequest, int64) (WriteSink, error) {
	return WriteSink{}, fmt.Errorf("%w: Write is not served here", base.ErrNotSupported)
}

// HandleRead returns an error wrapping base.ErrNotSupported.
func (UnimplementedHandler) HandleRead(context.Context, *ReadRequest) (ReadSource, error) {
	return ReadSource{}, fmt.Errorf("%w: Read is not served here", base.ErrNotSupported)
}

// NotLeaderError is the NOT_LEADER error: the master that answered is not the raft leader;
// LeaderID and LeaderAddr (its client RPC address) name the leader when known. A handler
// returns it; the client receives it (errors.As works on both sides) and errors.Is(err,
// base.ErrNotLeader) is true.
type NotLeaderError struct {
	LeaderID   string
	LeaderAddr string
	Msg        string
}

func (e *NotLeaderError) Error() string {
	msg := e.message()
	if e.LeaderAddr == "" {
		return msg + " (leader unknown)"
	}
	return fmt.Sprintf("%s (leader %s at %s)", msg, e.LeaderID, e.LeaderAddr)
}

// message is Msg, or the sentinel's text when Msg is empty: the error without the leader.
func (e *NotLeaderError) message() string {
	if e.Msg == "" {
		return base.ErrNotLeader.Error()
	}
	return e.Msg
}

// Is matches base.ErrNotLeader.
func (e *NotLeaderError) Is(target error) bool { return target == base.ErrNotLeader }

// ServerOptions configure a Server. Zero fields take the documented defaults.
type ServerOptions struct {
	// ClusterID must equal the client's; a mismatch is refused at the handshake with
	// CLUSTER_ID_MISMATCH. Default base.DefaultClusterID.
	ClusterID string
	// Limits bound bodies and payloads a client may send. Defaults: wire.Limits defaults
	// (64 MiB bodies, 4 GiB payloads).
	Limits Limits
	// MaxInFlightPerConn bounds the requests of one connection being handled at once; the
	// connection's read loop waits for a slot (back-pressure on the client). Default 4096.
	MaxInFlightPerConn int
	// MaxBodyBytesPerConn bounds the message bodies held by the requests of one connection
	// being handled at once (payloads go to handler destinations and do not count); the read
	// loop waits before reading more. A single body (at most Limits.MaxBodyLen) is always
	// admitted when nothing else is held. Default 256 MiB.
	MaxBodyBytesPerConn int64
	// HandshakeTimeout bounds the handshake of a new connection. Default 10s.
	HandshakeTimeout time.Duration
	// IdleTimeout closes a connection that, after its handshake, has no frame arriving and
	// no request being handled for this long. Default DefaultIdleTimeout (5m); negative:
	// never. Clients redial transparently.
	IdleTimeout time.Duration
	// FrameTimeout closes a connection whose frame, once started, does not deliver the next
	// 64 KiB (or its end) within this long: a slow transfer passes, a stalled or trickled one
	// does not. Default DefaultFrameTimeout (30s); negative: never.
	FrameTimeout time.Duration
	// MaxConnsPerPeer bounds the open connections from one remote IP address; more are
	// closed at accept (counted as peer_limit). Default DefaultMaxConnsPerPeer (1024);
	// negative: no limit.
	MaxConnsPerPeer int
	// SocketBuffer sets SO_SNDBUF and SO_RCVBUF on accepted connections; 0 leaves the
	// kernel's autotuning alone (measured best on loopback, docs/benchmarks.md).
	SocketBuffer int
	// SendfileReads sends the payloads of reads whose client verifies (ReadRequest.Verifies)
	// with sendfile from their ReadSource.File when it has one, by reference instead of by
	// copy. Default false: on the 2-core VM of docs/benchmarks.md ("Gets with sendfile"),
	// splicing 4 KiB shmem pages cost the sender 1.6-1.75x the CPU of the copy per byte.
	SendfileReads bool
	// Logger receives connection-level events. Default slog.Default().
	Logger *slog.Logger
}

// ClientOptions configure a Client. Zero fields take the documented defaults.
type ClientOptions struct {
	// ClusterID is sent at the handshake; a server of another cluster refuses the
	// connection (errors.Is(err, base.ErrClusterMismatch)). Default base.DefaultClusterID.
	ClusterID string
	// Transport dials connections. Default NewTransport("tcp").
	Transport Transport
	// Limits bound bodies and payloads a server may send back. Defaults as ServerOptions.
	Limits Limits
	// ConnsPerPeer is the number of connections kept per peer address; calls are spread
	// over them and striped transfers use them in parallel. Default 4.
	ConnsPerPeer int
	// StripeThreshold: payloads larger than this are striped over several connections.
	// Default 4 MiB.
	StripeThreshold int64
	// StripeChunk is the size of one stripe chunk. Default 4 MiB. Objects larger than
	// StripeChunk*ConnsPerPeer*2 are cut into ConnsPerPeer*2 larger chunks, so the work per
	// transfer is bounded whatever the size.
	StripeChunk int64
	// DialTimeout bounds dial + handshake (a ctx deadline that is sooner wins). Default 5s.
	DialTimeout time.Duration
	// Retries is how many times an idempotent call is resent after a broken connection
	// (never after an error the server returned). Default 2; negative: none.
	Retries int
	// IdleTimeout: a pooled connection that has carried no call for this long is closed and
	// redialled at its next use, so the client does not send into a connection the server is
	// closing as idle. Default DefaultClientIdleTimeout (2m, under the server's 5m);
	// negative: never. Whatever it is, a call that was alone on a connection the server
	// closed before answering is resent once on a new one.
	IdleTimeout time.Duration
	// Checksums adds a per-frame payload checksum to Write frames and asks for one on Read
	// responses. The object checksum is verified by the worker at commit either way. Default off.
	Checksums bool
	// SocketBuffer sets SO_SNDBUF and SO_RCVBUF; 0 leaves autotuning alone.
	SocketBuffer int
	// Logger receives reconnect events. Default slog.Default().
	Logger *slog.Logger
}

// clusterIDOrDefault returns the cluster id of ServerOptions or ClientOptions: id, or
// base.DefaultClusterID when empty. An id longer than the hello can carry is an error
// wrapping base.ErrInvalidParams.
func clusterIDOrDefault(id string) (string, error) {
	if id == "" {
		return base.DefaultClusterID, nil
	}
	if len(id) > wire.MaxClusterIDLen {
		return "", fmt.Errorf("%w: transfer: cluster id longer than %d bytes", base.ErrInvalidParams, wire.MaxClusterIDLen)
	}
	return id, nil
}

// idempotentKey marks a context whose calls may be retried.
type idempotentKey struct{}

func isIdempotent(ctx context.Context, op Op) bool {
	if op.Idempotent() {
		return true
	}
	v, _ := ctx.Value(idempotentKey{}).(bool)
	return v
}

// ErrServerClosed is returned by Server.Serve after Shutdown or Close. Use
// errors.Is(err, ErrServerClosed).
var ErrServerClosed = errors.New("transfer: server closed")
