package wire

import (
	"fmt"
	"time"

	"github.com/mooncake-go/mooncake/internal/base"
)

// Shared-memory read calls (ShmOpen, ShmPin, ShmRelease, ShmTouch): a client on a worker's
// host copies objects straight out of the worker's DRAM arena. See docs/protocol.md.

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
type ShmTouchRequest struct{ Items []base.KeyVersion }

func (m *ShmTouchRequest) Op() Op { return OpShmTouch }
func (m *ShmTouchRequest) Encode(e *Encoder) {
	encodeKeyVersions(e, m.Items)
}
func (m *ShmTouchRequest) Decode(d *Decoder) {
	m.Items = decodeBoundedKeyVersions(d, MaxShmTouch, "touches")
}
