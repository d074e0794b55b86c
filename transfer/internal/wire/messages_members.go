package wire

import (
	"fmt"
	"time"

	"github.com/mooncake-go/mooncake/internal/base"
)

// Membership calls: masters joining and leaving the raft configuration, workers
// registering and heartbeating, and a master's status. See docs/protocol.md.

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
	Drop              []base.KeyVersion
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
	// AskSettled is the fifth trailing optional field: set, the master answers whether it owes
	// the worker nothing more after this reply (HeartbeatResponse.Settled). On the wire only
	// when set (one byte, 1; a 0 is refused); a sender that sets it also sets AskClientTTL and
	// the fields before it. A master that predates it refuses the longer request, so a worker
	// sends it only where its reads from kept lookups need it (docs/protocol.md, "Reads from a
	// kept lookup").
	AskSettled bool
}

func (m *HeartbeatRequest) Op() Op { return OpHeartbeat }
func (m *HeartbeatRequest) Encode(e *Encoder) {
	e.Str(string(m.WorkerID))
	e.I64(m.DRAMUsed)
	e.I64(m.NVMeUsed)
	e.I64(m.DRAMObjects)
	if m.HasNVMeObjects || m.HasLeaving || m.HasStats || m.AskClientTTL || m.AskSettled {
		e.I64(m.NVMeObjects)
	}
	if m.HasLeaving || m.HasStats || m.AskClientTTL || m.AskSettled {
		e.Bool(m.Leaving)
	}
	if m.HasStats || m.AskClientTTL || m.AskSettled {
		m.Stats.encode(e)
	}
	if m.AskClientTTL || m.AskSettled {
		e.Bool(true)
	}
	if m.AskSettled {
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
	// Then ask_settled: exactly one byte, 1.
	if d.Err() == nil && d.Remaining() > 0 {
		m.AskSettled = d.Bool()
		if d.Err() == nil && !m.AskSettled {
			d.Fail(fmt.Errorf("%w: heartbeat ask_settled 0 on the wire (leave it out)", base.ErrInvalidParams))
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
//
// Settled follows it, the answer to HeartbeatRequest.AskSettled: the leader owes the worker
// nothing once this reply's drops are applied (none queued, no re-registration asked for or
// pending). On the wire only when set (one byte, 1; a 0 is refused: leave it out); a sender
// that sets it also sends ClientTTL (the request that asks for it asks for both).
type HeartbeatResponse struct {
	Drop       []base.KeyVersion
	Reregister bool
	ClientTTL  time.Duration
	Settled    bool
}

func (m *HeartbeatResponse) Op() Op { return OpHeartbeat }
func (m *HeartbeatResponse) Encode(e *Encoder) {
	encodeKeyVersions(e, m.Drop)
	e.Bool(m.Reregister)
	if m.ClientTTL != 0 || m.Settled {
		e.I64(int64(m.ClientTTL))
	}
	if m.Settled {
		e.Bool(true)
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
	if d.Err() == nil && d.Remaining() > 0 {
		m.Settled = d.Bool()
		if d.Err() == nil && !m.Settled {
			d.Fail(fmt.Errorf("%w: heartbeat settled 0 on the wire (leave it out)", base.ErrInvalidParams))
		}
	}
}

// StatusResponse carries the master's status as JSON (the same document as its HTTP status page).
type StatusResponse struct{ JSON []byte }

func (m *StatusResponse) Op() Op            { return OpStatus }
func (m *StatusResponse) Encode(e *Encoder) { e.Bytes(m.JSON) }
func (m *StatusResponse) Decode(d *Decoder) { m.JSON = d.Bytes(MaxStatusLen, "status") }
