package wire

// Same-host put calls (opcodes 100-109): a client on a worker's host copies a value into a
// staging area the worker created and passed to it, and asks the worker to copy it into the
// object's arena range (the arena itself stays read-only to clients). See docs/protocol.md.

// ShmPutOpenRequest (op 100) asks the worker for a staging area. BootID is the client's
// kernel boot id: a worker on another host (another boot id) answers NOT_SUPPORTED before
// creating anything, so clients elsewhere cost the worker no memory.
type ShmPutOpenRequest struct {
	BootID string
}

func (m *ShmPutOpenRequest) Op() Op            { return OpShmPutOpen }
func (m *ShmPutOpenRequest) Encode(e *Encoder) { e.Str(m.BootID) }
func (m *ShmPutOpenRequest) Decode(d *Decoder) { m.BootID = d.Str(MaxBootIDLen, "boot id") }

// ShmPutOpenResponse describes the staging area: a file of Size bytes the client opens
// read-write at /proc/<PID>/fd/<FD> after checking Inode, Dev and Size, as for ShmOpen.
// Stage names the area in ShmPutWrite and ShmPutClose (a random non-zero number). The area
// belongs to the caller alone; the worker drops it with ShmPutClose, with the connection that
// opened it, or at shutdown.
type ShmPutOpenResponse struct {
	BootID string
	PID    int64
	FD     int64
	Inode  uint64
	Dev    uint64
	Size   int64
	Stage  uint64
}

func (m *ShmPutOpenResponse) Op() Op { return OpShmPutOpen }
func (m *ShmPutOpenResponse) Encode(e *Encoder) {
	e.Str(m.BootID)
	e.I64(m.PID)
	e.I64(m.FD)
	e.U64(m.Inode)
	e.U64(m.Dev)
	e.I64(m.Size)
	e.U64(m.Stage)
}
func (m *ShmPutOpenResponse) Decode(d *Decoder) {
	m.BootID = d.Str(MaxBootIDLen, "boot id")
	m.PID = d.Size()
	m.FD = d.Size()
	m.Inode = d.U64()
	m.Dev = d.U64()
	m.Size = d.Size()
	m.Stage = d.U64()
}

// ShmPutWriteRequest (op 101) is a Write whose Length bytes are not in the frame but at
// StageOffset of staging area Stage: the worker copies them to Write.Offset of the object
// Write names (hashing them as they land) and, with Write.Commit, verifies Write.Checksum and
// commits, exactly as for a Write frame carrying those bytes. The response is Empty. The
// client must not touch the staged bytes until the answer.
type ShmPutWriteRequest struct {
	Stage       uint64
	StageOffset int64
	Length      int64
	Write       WriteRequest
}

func (m *ShmPutWriteRequest) Op() Op { return OpShmPutWrite }
func (m *ShmPutWriteRequest) Encode(e *Encoder) {
	e.U64(m.Stage)
	e.I64(m.StageOffset)
	e.I64(m.Length)
	m.Write.Encode(e) // last: its trailing optional model field stays trailing
}
func (m *ShmPutWriteRequest) Decode(d *Decoder) {
	m.Stage = d.U64()
	m.StageOffset = d.Size()
	m.Length = d.Size()
	m.Write.Decode(d)
}

// ShmPutCloseRequest (op 102) drops staging area Stage. The response is Empty; closing an
// unknown area is OK (it ended with its connection already).
type ShmPutCloseRequest struct {
	Stage uint64
}

func (m *ShmPutCloseRequest) Op() Op            { return OpShmPutClose }
func (m *ShmPutCloseRequest) Encode(e *Encoder) { e.U64(m.Stage) }
func (m *ShmPutCloseRequest) Decode(d *Decoder) { m.Stage = d.U64() }

// newShmPutRequest returns an empty request of a same-host put op (nil for another op).
func newShmPutRequest(op Op) Message {
	switch op {
	case OpShmPutOpen:
		return new(ShmPutOpenRequest)
	case OpShmPutWrite:
		return new(ShmPutWriteRequest)
	case OpShmPutClose:
		return new(ShmPutCloseRequest)
	}
	return nil
}

// newShmPutResponse returns an empty response of a same-host put op (nil for another op).
func newShmPutResponse(op Op) Message {
	switch op {
	case OpShmPutOpen:
		return new(ShmPutOpenResponse)
	case OpShmPutWrite, OpShmPutClose:
		return NewEmpty(op)
	}
	return nil
}
