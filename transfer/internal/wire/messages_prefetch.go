package wire

import "github.com/mooncake-go/mooncake/internal/base"

// Prefetch on exist (issue 21 item 4; opcodes 110-119): after the master answered that an
// object exists, a client that asked for prefetch_to_memory tells the worker holding a replica
// to promote it from NVMe to DRAM in the background, so the read that follows is a DRAM hit.
// See docs/protocol.md, "Prefetch on exist".

// MaxPrefetch bounds the items of one Prefetch request (a batch_is_exist's keys per worker).
const MaxPrefetch = 4096

// PrefetchRequest (op 110) asks the worker to promote each item's version (0: any) to DRAM.
// The worker answers at once, before any promotion runs: the BatchResponse has one item each,
// OK (accepted: already in DRAM, or queued for promotion), OBJECT_NOT_FOUND or
// INVALID_VERSION (the worker does not hold that version), NO_AVAILABLE_HANDLE (dropped: the
// worker's prefetch budget of bytes in flight is spent), NOT_SUPPORTED (prefetch is off on
// the worker). Prefetch never changes what a read returns; a dropped one costs nothing.
type PrefetchRequest struct{ Items []base.KeyVersion }

func (m *PrefetchRequest) Op() Op            { return OpPrefetch }
func (m *PrefetchRequest) Encode(e *Encoder) { encodeKeyVersions(e, m.Items) }
func (m *PrefetchRequest) Decode(d *Decoder) {
	m.Items = decodeBoundedKeyVersions(d, MaxPrefetch, "prefetches")
}

// newPrefetchRequest returns an empty request of a prefetch op (nil for another op).
func newPrefetchRequest(op Op) Message {
	if op == OpPrefetch {
		return new(PrefetchRequest)
	}
	return nil
}

// newPrefetchResponse returns an empty response of a prefetch op (nil for another op).
func newPrefetchResponse(op Op) Message {
	if op == OpPrefetch {
		return NewBatchResponse(op, nil)
	}
	return nil
}
