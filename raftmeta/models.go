package raftmeta

import (
	"encoding/binary"
	"fmt"
	"math"
	"slices"
	"strings"
	"unicode"

	"github.com/mooncake-go/mooncake/internal/base"
	"github.com/mooncake-go/mooncake/internal/invariants"
)

// Models: the registry of KV-cache models (issue 13) and the token counts objects carry.
//
// A put may say how many tokens of which model an object holds (base.Object.Tokens, .Model). The
// FSM keeps, per model name, the objects, tokens and bytes of the objects naming it, so the
// master can set expected bytes (tokens x bytes per token of the registered model) against
// what the objects occupy. Models are registered by name with their bytes per token
// (RegisterModel, RemoveModel); an object may name a model that is not registered (its
// tokens are then counted, but nothing is expected of them).

// Command types of the models range (30-39).
const (
	TypeRegisterModel CommandType = 30
	TypeRemoveModel   CommandType = 31
)

const (
	// MaxModelName bounds a model name.
	MaxModelName = 128
	// maxModelDesc bounds a registered model's description.
	maxModelDesc = 1024
	// MaxTokens bounds the tokens of one object (stored in 32 bits).
	MaxTokens = math.MaxUint32
	// maxModels bounds the model names the FSM tracks at once (registered or named by an
	// object); index 0 means "no model".
	maxModels = math.MaxUint16
)

// RegisterModel adds a model or replaces a registered one's figures.
type RegisterModel struct {
	Name          string
	BytesPerToken int64
	// Description says how BytesPerToken was computed (the formula filled in).
	Description string
}

// RemoveModel unregisters a model. Objects naming it keep their token counts; an unknown
// name gives base.ErrObjectNotFound.
type RemoveModel struct{ Name string }

func (RegisterModel) Type() CommandType { return TypeRegisterModel }
func (RemoveModel) Type() CommandType   { return TypeRemoveModel }

// ValidateModelName checks a model name: 1 to MaxModelName printable bytes, no spaces.
func ValidateModelName(name string) error {
	if name == "" || len(name) > MaxModelName {
		return invalidf("model name must be 1 to %d bytes, got %d", MaxModelName, len(name))
	}
	for i := 0; i < len(name); i++ {
		if c := name[i]; c <= ' ' || c == 0x7f {
			return invalidf("model name %q: no spaces or control characters", name)
		} else if c >= 0x80 {
			// Not ASCII: the slow check, once per name.
			if strings.IndexFunc(name, func(r rune) bool { return !unicode.IsPrint(r) || unicode.IsSpace(r) }) >= 0 {
				return invalidf("model name %q: no spaces or control characters", name)
			}
			return nil
		}
	}
	return nil
}

func (c RegisterModel) Validate() error {
	if err := ValidateModelName(c.Name); err != nil {
		return err
	}
	if c.BytesPerToken <= 0 {
		return invalidf("model %q: bytes per token %d, want 1 or more", c.Name, c.BytesPerToken)
	}
	if len(c.Description) > maxModelDesc {
		return invalidf("model %q: description of %d bytes, the limit is %d", c.Name, len(c.Description), maxModelDesc)
	}
	return nil
}

func (c RemoveModel) Validate() error { return ValidateModelName(c.Name) }

func (c RegisterModel) appendFields(b []byte) []byte {
	b = appendStr(b, c.Name)
	b = binary.AppendVarint(b, c.BytesPerToken)
	return appendStr(b, c.Description)
}

func (c RemoveModel) appendFields(b []byte) []byte { return appendStr(b, c.Name) }

// decodeModelCommand decodes the commands of the models range; nil for another type.
func decodeModelCommand(t CommandType, d *decoder) Command {
	switch t {
	case TypeRegisterModel:
		var c RegisterModel
		c.Name = d.str(MaxModelName)
		c.BytesPerToken = d.varint()
		c.Description = d.str(maxModelDesc)
		return c
	case TypeRemoveModel:
		return RemoveModel{Name: d.str(MaxModelName)}
	}
	return nil
}

// validateTokens checks a put item's token fields.
func validateTokens(it *base.Object) error {
	if it.Tokens < 0 || it.Tokens > MaxTokens {
		return invalidf("key %q: %d tokens, want 0 to %d", it.Key, it.Tokens, int64(MaxTokens))
	}
	if it.Model != "" {
		if err := ValidateModelName(it.Model); err != nil {
			return fmt.Errorf("key %q: %w", it.Key, err)
		}
	}
	return nil
}

// appendPutTokens appends the PutEnd tokens section: present only when an item carries a token
// count or a model, so a PutEnd without them encodes exactly as before the section existed.
//
//	count uvarint (>= 1) | count x { item index uvarint (strictly increasing) | tokens uvarint | model string }
func appendPutTokens(b []byte, items []base.Object) []byte {
	n := 0
	for i := range items {
		if items[i].Tokens != 0 || items[i].Model != "" {
			n++
		}
	}
	if n == 0 {
		return b
	}
	b = binary.AppendUvarint(b, uint64(n))
	for i := range items {
		if it := &items[i]; it.Tokens != 0 || it.Model != "" {
			b = binary.AppendUvarint(b, uint64(i))
			b = binary.AppendUvarint(b, uint64(it.Tokens))
			b = appendStr(b, it.Model)
		}
	}
	return b
}

// decodePutTokens reads the tokens section when bytes remain after the items.
func decodePutTokens(d *decoder, p *PutEnd) {
	if d.err != nil || len(d.b) == 0 {
		return
	}
	n := d.count(len(p.Items), 3)
	if d.err == nil && n == 0 {
		d.fail("empty tokens section")
	}
	next, model := 0, ""
	for range n {
		i := d.uvarint()
		tokens := d.uvarint()
		model = d.strReuse(MaxModelName, model)
		if d.err != nil {
			return
		}
		if i < uint64(next) || i >= uint64(len(p.Items)) || tokens > MaxTokens || (tokens == 0 && model == "") {
			d.fail("tokens section: item %d of %d (tokens %d, model %q)", i, len(p.Items), tokens, model)
			return
		}
		p.Items[i].Tokens, p.Items[i].Model = int64(tokens), model
		next = int(i) + 1
	}
}

// strReuse reads a string like str, but returns prev (no allocation) when the bytes equal it:
// the items of a batch usually name the same model.
func (d *decoder) strReuse(max int, prev string) string {
	n := d.uvarint()
	if d.err != nil {
		return ""
	}
	if n > uint64(max) || n > uint64(len(d.b)) {
		d.fail("string of %d bytes (limit %d, %d left)", n, max, len(d.b))
		return ""
	}
	s := prev
	if string(d.b[:n]) != prev {
		s = string(d.b[:n])
	}
	d.b = d.b[n:]
	return s
}

// modelRec is one model name the FSM tracks. Counters are kept by apply (countModel).
type modelRec struct {
	name          string
	registered    bool
	bytesPerToken int64
	desc          string
	acct          modelAcct
}

// modelAcct counts the objects naming one model (or none).
type modelAcct struct {
	objects      int64
	tokens       int64
	untokened    int64 // objects with no token count
	bytes        int64 // sizes, one copy each
	replicaBytes int64 // sizes times replicas
	// replicaTokens is tokens times replicas; untokenedBytes the replica bytes of objects
	// without a token count.
	replicaTokens, untokenedBytes int64
}

// modelTable interns model names for objRec.model. Its zero value is ready.
//
// Invariant: recs[0] is unused (index 0 is "no model"); of names, recs and recs' names, each
// names the other. A slot is garbage (reusable) when its model is unregistered and no object
// names it; allocation takes the lowest such slot, so indexes depend only on applied commands.
type modelTable struct {
	recs  []*modelRec
	index map[string]uint16
	// none counts the objects that name no model.
	none modelAcct
}

func (t *modelTable) garbage(i int) bool {
	r := t.recs[i]
	return r == nil || (!r.registered && r.acct.objects == 0)
}

// intern returns name's index, allocating one; 0 when the table is full.
func (t *modelTable) intern(name string) uint16 {
	if i, ok := t.index[name]; ok {
		return i
	}
	if t.index == nil {
		t.index = make(map[string]uint16)
		t.recs = make([]*modelRec, 1)
	}
	slot := 0
	for i := 1; i < len(t.recs); i++ {
		if t.garbage(i) {
			slot = i
			break
		}
	}
	if slot == 0 {
		if len(t.recs) > maxModels {
			return 0
		}
		t.recs = append(t.recs, nil)
		slot = len(t.recs) - 1
	}
	if old := t.recs[slot]; old != nil {
		delete(t.index, old.name)
	}
	t.recs[slot] = &modelRec{name: name}
	t.index[name] = uint16(slot)
	return uint16(slot)
}

func (t *modelTable) clone() modelTable {
	c := modelTable{none: t.none, index: make(map[string]uint16, len(t.index)), recs: make([]*modelRec, len(t.recs))}
	for i, r := range t.recs {
		if r != nil {
			cp := *r
			c.recs[i] = &cp
			c.index[r.name] = uint16(i)
		}
	}
	return c
}

// clearObjects zeroes every model's object counters (RemoveAll).
func (t *modelTable) clearObjects() {
	t.none = modelAcct{}
	for _, r := range t.recs {
		if r != nil {
			r.acct = modelAcct{}
		}
	}
}

// countModel adds (sign 1) or removes (-1) rec from its model's counters; called by count.
func (st *state) countModel(rec *objRec, sign int64) {
	a := &st.mdl.none
	if rec.model != 0 {
		if int(rec.model) >= len(st.mdl.recs) || st.mdl.recs[rec.model] == nil {
			_ = invariants.AssertionFailedf("raftmeta: record names free model slot %d", rec.model)
			return
		}
		a = &st.mdl.recs[rec.model].acct
	}
	size := rec.size()
	a.objects += sign
	a.tokens += sign * int64(rec.tokens)
	if rec.tokens == 0 {
		a.untokened += sign
	}
	a.bytes += sign * size
	a.replicaBytes += sign * size * int64(rec.nreps())
	a.replicaTokens += sign * int64(rec.tokens) * int64(rec.nreps())
	if rec.tokens == 0 {
		a.untokenedBytes += sign * size * int64(rec.nreps())
	}
}

// setTokens fills rec's token fields from it, before rec is accounted. An item naming a model
// when the table is full fails. REQUIRES: validatePutItem(it) passed (putEnd checks every item).
func (st *state) setTokens(rec *objRec, it *base.Object) error {
	rec.tokens = uint32(it.Tokens)
	if it.Model != "" {
		if rec.model = st.mdl.intern(it.Model); rec.model == 0 {
			return invalidf("key %q: %d model names tracked already", it.Key, maxModels)
		}
	}
	return nil
}

func (st *state) registerModel(c RegisterModel) Result {
	i := st.mdl.intern(c.Name)
	if i == 0 {
		return Result{Err: invalidf("model %q: %d model names tracked already", c.Name, maxModels)}
	}
	r := st.mdl.recs[i]
	r.registered, r.bytesPerToken, r.desc = true, c.BytesPerToken, c.Description
	return Result{}
}

func (st *state) removeModel(c RemoveModel) Result {
	i, ok := st.mdl.index[c.Name]
	if !ok || !st.mdl.recs[i].registered {
		return Result{Err: fmt.Errorf("raftmeta: remove model %q: %w", c.Name, base.ErrObjectNotFound)}
	}
	r := st.mdl.recs[i]
	r.registered, r.bytesPerToken, r.desc = false, 0, ""
	return Result{}
}

// ModelUsage is one model as the FSM tracks it: the registration (if any) and the objects
// naming it. The entry with Name "" counts the objects that name no model.
type ModelUsage struct {
	Name          string
	Registered    bool
	BytesPerToken int64 // 0 unless registered
	Description   string
	Objects       int64
	Tokens        int64
	// Untokened counts objects without a token count (Tokens 0).
	Untokened    int64
	Bytes        int64 // object sizes, one copy each
	ReplicaBytes int64 // object sizes times replicas
	// ReplicaTokens is tokens times replicas (what replicas are expected to hold);
	// UntokenedReplicaBytes the replica bytes of the objects without a token count.
	ReplicaTokens, UntokenedReplicaBytes int64
}

func usageOf(name string, a modelAcct) ModelUsage {
	return ModelUsage{Name: name, Objects: a.objects, Tokens: a.tokens, Untokened: a.untokened, Bytes: a.bytes, ReplicaBytes: a.replicaBytes,
		ReplicaTokens: a.replicaTokens, UntokenedReplicaBytes: a.untokenedBytes}
}

// models lists the registered models and the model names objects carry, sorted by name, then
// the "" entry for objects naming none.
func (st *state) models() []ModelUsage {
	var out []ModelUsage
	for i, r := range st.mdl.recs {
		if i == 0 || st.mdl.garbage(i) {
			continue
		}
		u := usageOf(r.name, r.acct)
		u.Registered, u.BytesPerToken, u.Description = r.registered, r.bytesPerToken, r.desc
		out = append(out, u)
	}
	slices.SortFunc(out, func(a, b ModelUsage) int { return strings.Compare(a.Name, b.Name) })
	return append(out, usageOf("", st.mdl.none))
}

// Models returns the model registry with per-model object, token and byte counts (see
// ModelUsage), O(models).
func (n *Node) Models() []ModelUsage {
	n.fsm.mu.RLock()
	defer n.fsm.mu.RUnlock()
	return n.fsm.st.models()
}

// Snapshot section "models" (trailing, written only when a model is registered or an object
// carries tokens or a model, so older snapshots and states without models stay identical):
//
//	sectionModels byte | version byte (1)
//	models uvarint | models x { slot u16 | name string | registered byte | bytes per token varint | description string }
//	objects uvarint | objects x { key string | tokens uvarint | model slot u16 }
const (
	sectionModels        = 30
	sectionModelsVersion = 1
)

// appendModelsSection appends the section for st (nothing when there is nothing to say).
// flush is called whenever b grows large.
func appendModelsSection(b []byte, st *state, flush func([]byte) ([]byte, error)) ([]byte, error) {
	live, tokened := 0, 0
	for i := range st.mdl.recs {
		if i > 0 && !st.mdl.garbage(i) {
			live++
		}
	}
	for _, i := range st.objects {
		if r := st.recs.at(i); r.tokens != 0 || r.model != 0 {
			tokened++
		}
	}
	if live == 0 && tokened == 0 {
		return b, nil
	}
	b = append(b, sectionModels, sectionModelsVersion)
	b = binary.AppendUvarint(b, uint64(live))
	for i, r := range st.mdl.recs {
		if i == 0 || st.mdl.garbage(i) {
			continue
		}
		b = binary.LittleEndian.AppendUint16(b, uint16(i))
		b = appendStr(b, r.name)
		b = appendBool(b, r.registered)
		b = binary.AppendVarint(b, r.bytesPerToken)
		b = appendStr(b, r.desc)
	}
	b = binary.AppendUvarint(b, uint64(tokened))
	var err error
	for k, i := range st.objects {
		r := st.recs.at(i)
		if r.tokens == 0 && r.model == 0 {
			continue
		}
		b = appendStr(b, k)
		b = binary.AppendUvarint(b, uint64(r.tokens))
		b = binary.LittleEndian.AppendUint16(b, r.model)
		if len(b) > 32<<10 {
			if b, err = flush(b); err != nil {
				return b, err
			}
		}
	}
	return b, nil
}

// readModelsSection reads the section after the objects (its id byte already read) into st.
func readModelsSection(d *snapReader, st *state) {
	if st.mdl.index != nil {
		d.fail("models section listed twice")
		return
	}
	if v := d.byte1(); d.err == nil && v != sectionModelsVersion {
		d.fail("unknown models section version %d", v)
		return
	}
	nm := d.uvarint()
	if d.err == nil && nm > maxModels {
		d.fail("%d models", nm)
	}
	st.mdl.index = make(map[string]uint16)
	st.mdl.recs = make([]*modelRec, 1)
	for range nm {
		slot := d.u16()
		r := &modelRec{name: d.str(MaxModelName)}
		reg := d.byte1()
		r.bytesPerToken = d.varint()
		r.desc = d.str(maxModelDesc)
		if d.err != nil {
			return
		}
		r.registered = reg == 1
		if slot == 0 || reg > 1 || ValidateModelName(r.name) != nil || (r.registered != (r.bytesPerToken > 0)) {
			d.fail("bad model %q at slot %d", r.name, slot)
			return
		}
		for int(slot) >= len(st.mdl.recs) {
			st.mdl.recs = append(st.mdl.recs, nil)
		}
		if _, dup := st.mdl.index[r.name]; dup || st.mdl.recs[slot] != nil {
			d.fail("model %q or slot %d listed twice", r.name, slot)
			return
		}
		st.mdl.recs[slot] = r
		st.mdl.index[r.name] = slot
	}
	no := d.uvarint()
	for range no {
		key := d.str(base.MaxKeyLen)
		tokens := d.uvarint()
		slot := d.u16()
		if d.err != nil {
			return
		}
		_, rec := st.find(key)
		if rec == nil || rec.tokens != 0 || rec.model != 0 || tokens > MaxTokens || (tokens == 0 && slot == 0) ||
			(slot != 0 && (int(slot) >= len(st.mdl.recs) || st.mdl.recs[slot] == nil)) {
			d.fail("bad tokens for key %q", key)
			return
		}
		st.unaccount(rec)
		rec.tokens, rec.model = uint32(tokens), slot
		st.account(rec)
	}
	for i := 1; i < len(st.mdl.recs); i++ {
		if st.mdl.recs[i] != nil && st.mdl.garbage(i) {
			d.fail("model %q at slot %d is neither registered nor named by an object", st.mdl.recs[i].name, i)
			return
		}
	}
}
