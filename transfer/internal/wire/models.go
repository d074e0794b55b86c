package wire

import (
	"fmt"

	"github.com/mooncake-go/mooncake/internal/base"
)

// Memory and model calls (issue 13), opcodes 70-79. See docs/protocol.md, "Memory and models".

// MaxModelNameLen bounds a model name; MaxModelDescLen a registered model's description.
const (
	MaxModelNameLen = 128
	MaxModelDescLen = 1024
	// maxTokens bounds one object's token count (raftmeta stores it in 32 bits).
	maxTokens = 1<<32 - 1
)

// decodeTokens reads a put's optional token count and model name.
func decodeTokens(d *Decoder) (int64, string) {
	tokens := d.Size()
	model := d.Str(MaxModelNameLen, "model")
	if d.Err() == nil && (tokens > maxTokens || (tokens == 0 && model == "")) {
		d.Fail(fmt.Errorf("%w: %d tokens of model %q", base.ErrInvalidParams, tokens, model))
	}
	return tokens, model
}

// encodeTokens appends PutEndRequest's trailing optional fields: tokens i64 | model string,
// present only when the put carries either, so a put without them encodes as before.
func (m *PutEndRequest) encodeTokens(e *Encoder) {
	if m.Tokens != 0 || m.Model != "" {
		e.I64(m.Tokens)
		e.Str(m.Model)
	}
}

func (m *PutEndRequest) decodeTokens(d *Decoder) {
	if d.Err() == nil && d.Remaining() > 0 {
		m.Tokens, m.Model = decodeTokens(d)
	}
}

// encodeBatchTokens appends BatchPutEndRequest's trailing optional section, present only when
// an item carries tokens or a model: u32 count (== items) | count x { tokens i64 | model string }.
// (Items inside the list cannot carry trailing fields: the list has no per-item length.)
func encodeBatchTokens(e *Encoder, items []PutEndRequest) {
	any := false
	for i := range items {
		any = any || items[i].Tokens != 0 || items[i].Model != ""
	}
	if !any {
		return
	}
	e.Count(len(items))
	for i := range items {
		e.I64(items[i].Tokens)
		e.Str(items[i].Model)
	}
}

func decodeBatchTokens(d *Decoder, items []PutEndRequest) {
	if d.Err() != nil || d.Remaining() == 0 {
		return
	}
	n := d.Count(8+minStr, 0, "item tokens")
	if d.Err() == nil && n != len(items) {
		d.Fail(fmt.Errorf("%w: %d token entries for %d items", base.ErrInvalidParams, n, len(items)))
		return
	}
	all0 := true
	for i := 0; i < n && d.Err() == nil; i++ {
		items[i].Tokens = d.Size()
		items[i].Model = d.Str(MaxModelNameLen, "model")
		if items[i].Tokens > maxTokens {
			d.Fail(fmt.Errorf("%w: %d tokens", base.ErrInvalidParams, items[i].Tokens))
		}
		all0 = all0 && items[i].Tokens == 0 && items[i].Model == ""
	}
	if d.Err() == nil && all0 {
		d.Fail(fmt.Errorf("%w: a token section without tokens", base.ErrInvalidParams))
	}
}

// ModelAddRequest registers a model (or replaces a registered one's figures) with the leader.
type ModelAddRequest struct {
	Name          string
	BytesPerToken int64
	// Description says how BytesPerToken was computed (kvcost's formula, filled in).
	Description string
}

func (m *ModelAddRequest) Op() Op { return OpModelAdd }
func (m *ModelAddRequest) Encode(e *Encoder) {
	e.Str(m.Name)
	e.I64(m.BytesPerToken)
	e.Str(m.Description)
}
func (m *ModelAddRequest) Decode(d *Decoder) {
	m.Name = d.Str(MaxModelNameLen, "model")
	m.BytesPerToken = d.Size()
	m.Description = d.Str(MaxModelDescLen, "description")
}

// ModelRemoveRequest unregisters a model.
type ModelRemoveRequest struct{ Name string }

func (m *ModelRemoveRequest) Op() Op            { return OpModelRemove }
func (m *ModelRemoveRequest) Encode(e *Encoder) { e.Str(m.Name) }
func (m *ModelRemoveRequest) Decode(d *Decoder) { m.Name = d.Str(MaxModelNameLen, "model") }

// JSONResponse carries a JSON document: the master's memory report (Memory) or a worker's
// memory breakdown (WorkerMemory).
type JSONResponse struct {
	Call Op
	JSON []byte
}

func (m *JSONResponse) Op() Op            { return m.Call }
func (m *JSONResponse) Encode(e *Encoder) { e.Bytes(m.JSON) }
func (m *JSONResponse) Decode(d *Decoder) { m.JSON = d.Bytes(MaxStatusLen, "json") }

func newModelRequest(op Op) Message {
	switch op {
	case OpModelAdd:
		return new(ModelAddRequest)
	case OpModelRemove:
		return new(ModelRemoveRequest)
	case OpMemory, OpWorkerMemory:
		return NewEmpty(op)
	}
	return nil
}

func newModelResponse(op Op) Message {
	switch op {
	case OpModelAdd, OpModelRemove:
		return NewEmpty(op)
	case OpMemory, OpWorkerMemory:
		return &JSONResponse{Call: op}
	}
	return nil
}
