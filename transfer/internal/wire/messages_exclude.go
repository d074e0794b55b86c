package wire

import (
	"fmt"

	"github.com/mooncake-go/mooncake/internal/base"
)

// Re-placement (issue 18): a put whose write to a placed worker failed asks the leader again
// without that worker. PutStartRequest carries the workers to avoid as a trailing optional
// field; BatchPutStartRequest as a trailing optional section with one list per item (items
// inside a list cannot carry trailing fields: the list has no per-item length). See
// docs/protocol.md, "Re-placing a put".

// MaxExclude bounds the workers one put may ask the leader to avoid. A put that has failed on
// this many workers gives up (the client stops asking well before: every attempt is bounded
// by the put's timeout).
const MaxExclude = 64

func encodeExclude(e *Encoder, ids []base.WorkerID) {
	encodeList(e, ids, func(e *Encoder, w *base.WorkerID) { e.Str(string(*w)) })
}

func decodeExclude(d *Decoder) []base.WorkerID {
	n := d.Count(minStr, MaxExclude, "excluded workers")
	if n == 0 {
		return nil
	}
	ids := make([]base.WorkerID, n)
	for i := range ids {
		ids[i] = decodeWorkerID(d)
	}
	return ids
}

// encodeExcludeField appends PutStartRequest's trailing optional field: exclude, present only
// when non-empty, so a put that excludes nothing encodes as before.
func (m *PutStartRequest) encodeExcludeField(e *Encoder) {
	if len(m.Exclude) > 0 {
		encodeExclude(e, m.Exclude)
	}
}

func (m *PutStartRequest) decodeExcludeField(d *Decoder) {
	if d.Err() != nil || d.Remaining() == 0 {
		return
	}
	m.Exclude = decodeExclude(d)
	if d.Err() == nil && len(m.Exclude) == 0 {
		d.Fail(fmt.Errorf("%w: an empty exclude list (leave the field out)", base.ErrInvalidParams))
	}
}

// encodeBatchExclude appends BatchPutStartRequest's trailing optional section, present only
// when an item excludes a worker: u32 count (== items) | count x list<worker_id>.
func encodeBatchExclude(e *Encoder, items []PutStartRequest) {
	any := false
	for i := range items {
		any = any || len(items[i].Exclude) > 0
	}
	if !any {
		return
	}
	e.Count(len(items))
	for i := range items {
		encodeExclude(e, items[i].Exclude)
	}
}

func decodeBatchExclude(d *Decoder, items []PutStartRequest) {
	if d.Err() != nil || d.Remaining() == 0 {
		return
	}
	n := d.Count(4, 0, "item exclude lists")
	if d.Err() == nil && n != len(items) {
		d.Fail(fmt.Errorf("%w: %d exclude lists for %d items", base.ErrInvalidParams, n, len(items)))
		return
	}
	none := true
	for i := 0; i < n && d.Err() == nil; i++ {
		items[i].Exclude = decodeExclude(d)
		none = none && len(items[i].Exclude) == 0
	}
	if d.Err() == nil && none {
		d.Fail(fmt.Errorf("%w: an exclude section that excludes nothing", base.ErrInvalidParams))
	}
}
