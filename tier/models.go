package tier

import (
	"fmt"
	"slices"
	"strings"

	"github.com/mooncake-go/mooncake/internal/base"
)

// Per-model accounting (issue 13; docs/memory.md): each object carries the model its put
// named (PutOptions.Model) as a small interned tag, and the engine keeps, per model, the
// objects and allocated bytes of its DRAM copies and of its lower-tier records. The master
// knows each object's model and logical size from its metadata; only the worker knows what
// the copies take (arena rounding, NVMe headers and block padding) and where they are.

// maxModelTags bounds the distinct model names one engine interns (names are never
// forgotten: a cluster registers a handful of models). Puts naming further models are
// counted under OtherModels.
const maxModelTags = 1024

// OtherModels is the ModelUsage.Model of objects whose model could not be interned (more than
// maxModelTags distinct names). Objects whose put named no model have Model "".
const OtherModels = "(other)"

// ModelUsage is what one model's objects take on this worker. An object with a copy in both
// tiers counts in both.
type ModelUsage struct {
	Model string
	// DRAMObjects and DRAMBytes: committed objects with a DRAM copy and the arena bytes the
	// copies are allocated (dram.Handle.Allocated: size rounded up to the allocator's
	// alignment and quantum).
	DRAMObjects, DRAMBytes int64
	// NVMeObjects and NVMeBytes: objects whose bytes are on the lower tier and what their
	// records take there (with header and block padding; the object size when the lower tier
	// cannot say, see lowerFootprint).
	NVMeObjects, NVMeBytes int64
	// DRAMLogical and NVMeLogical: the sizes of the same objects (so DRAMBytes - DRAMLogical
	// is the arena's rounding, NVMeBytes - NVMeLogical the records' headers and padding).
	DRAMLogical, NVMeLogical int64
}

// labeledLower is implemented by a Lower that keeps a 16-bit label with each object and
// names for labels across restarts (nvme.Store): the engine keeps its model tags there, so a
// restart finds each object's model. With another Lower, objects found at Open count under "".
type labeledLower interface {
	PutLabeled(key string, v base.Version, data []byte, checksum uint64, sync bool, label uint16) error
	ScanLabeled(fn func(base.ObjectMeta, uint16) error) error
	SetLabelName(label uint16, name string) error
	LabelNames() (map[uint16]string, error)
}

// lowerFootprint is implemented by a Lower that can say what one stored object takes
// (nvme.Store.Footprint). A Lower without it is tallied at the objects' sizes.
type lowerFootprint interface {
	Footprint(key string, v base.Version) (int64, error)
}

// modelTable interns model names and holds their tallies. Guarded by Engine.mu.
//
// Invariant (checkLocked): usage[t] is the sum over indexed objects with model t of their
// tally; an object's counted tally is what it adds now.
type modelTable struct {
	names  []string // tag -> name; names[0] == "" (no model); "" also for tags never used
	byName map[string]uint16
	usage  []ModelUsage // by tag
	// saved[tag]: the lower tier has the tag's name (labeledLower.SetLabelName). Tag 0 needs
	// none.
	saved map[uint16]bool
}

// tally is what one object currently adds to its model's usage.
type tally struct {
	dram, nvme int64 // bytes
	inDRAM     bool
	onNVMe     bool
}

// internLocked returns the tag of model name, adding it if new. REQUIRES: e.mu.
func (e *Engine) internLocked(name string) uint16 {
	t := &e.mu.models
	if t.byName == nil {
		t.byName = map[string]uint16{"": 0}
		t.names = []string{""}
		t.usage = []ModelUsage{{}}
		t.saved = map[uint16]bool{0: true}
	}
	if tag, ok := t.byName[name]; ok {
		return tag
	}
	if len(t.names) >= maxModelTags {
		name = OtherModels
		if tag, ok := t.byName[name]; ok {
			return tag
		}
	}
	tag := uint16(len(t.names))
	t.byName[name] = tag
	t.names = append(t.names, name)
	t.usage = append(t.usage, ModelUsage{Model: name})
	return tag
}

// seedLabelsLocked makes the tags the lower tier named (LabelNames) the engine's own, so
// the labels found on its objects keep their models. REQUIRES: e.mu (Open only).
func (e *Engine) seedLabelsLocked(names map[uint16]string) {
	e.internLocked("") // the table exists
	t := &e.mu.models
	for tag, name := range names {
		if tag == 0 || int(tag) >= maxModelTags || name == "" {
			continue
		}
		if _, dup := t.byName[name]; dup {
			continue
		}
		for len(t.names) <= int(tag) {
			t.names = append(t.names, "")
			t.usage = append(t.usage, ModelUsage{})
		}
		t.names[tag], t.usage[tag].Model = name, name
		t.byName[name] = tag
		t.saved[tag] = true
	}
}

// knownTagLocked returns label if the engine knows its name, else 0. REQUIRES: e.mu.
func (e *Engine) knownTagLocked(label uint16) uint16 {
	if int(label) < len(e.mu.models.names) && e.mu.models.names[label] != "" {
		return label
	}
	return 0
}

// saveLabel records tag's name on the lower tier before the first object with that tag is
// written there (a restart then finds the name). A failure is reported and leaves the tag
// unsaved: its objects count under "" after a restart. Called without e.mu; labelMu
// serializes the check and the write.
func (e *Engine) saveLabel(tag uint16) {
	if e.labels == nil || tag == 0 {
		return
	}
	e.labelMu.Lock()
	defer e.labelMu.Unlock()
	e.mu.Lock()
	saved, name := e.mu.models.saved[tag], e.mu.models.names[tag]
	e.mu.Unlock()
	if saved {
		return
	}
	if err := e.labels.SetLabelName(tag, name); err != nil {
		e.backgroundError(fmt.Errorf("tier: recording model %q on the lower tier: %w", name, err))
		return
	}
	e.mu.Lock()
	e.mu.models.saved[tag] = true
	e.mu.Unlock()
}

// putLowerOnce writes an object to the lower tier with its model tag when the lower tier keeps
// labels.
func (e *Engine) putLowerOnce(m base.ObjectMeta, data []byte, sync bool, tag uint16) error {
	if e.labels != nil {
		return e.labels.PutLabeled(m.Key, m.Version, data, m.Checksum, sync, tag)
	}
	return e.lower.PutChecked(m.Key, m.Version, data, m.Checksum, sync)
}

// wantTally is what o should add now: nothing once it left the index.
func (e *Engine) wantTally(o *object) tally {
	var w tally
	if e.mu.byID[o.id] != o {
		return w
	}
	if o.copy != nil {
		w.inDRAM, w.dram = true, o.copy.h.Allocated()
	}
	if o.onLower {
		w.onNVMe, w.nvme = true, o.lowerBytes
	}
	return w
}

// tallyLocked brings o's model's usage up to date with o's state: call it after any change of
// o's DRAM copy, lower-tier presence or membership in the index (it is idempotent).
// REQUIRES: e.mu.
func (e *Engine) tallyLocked(o *object) {
	w := e.wantTally(o)
	if w == o.counted {
		return
	}
	if e.mu.models.usage == nil {
		e.internLocked("")
	}
	u := &e.mu.models.usage[o.model]
	u.DRAMObjects += b2i(w.inDRAM) - b2i(o.counted.inDRAM)
	u.DRAMBytes += w.dram - o.counted.dram
	u.NVMeObjects += b2i(w.onNVMe) - b2i(o.counted.onNVMe)
	u.NVMeBytes += w.nvme - o.counted.nvme
	u.DRAMLogical += o.meta.Size * (b2i(w.inDRAM) - b2i(o.counted.inDRAM))
	u.NVMeLogical += o.meta.Size * (b2i(w.onNVMe) - b2i(o.counted.onNVMe))
	o.counted = w
}

func b2i(b bool) int64 {
	if b {
		return 1
	}
	return 0
}

// footprint is what m takes on the lower tier. Called without e.mu (it may do I/O).
func (e *Engine) footprint(m base.ObjectMeta) int64 {
	if f, ok := e.lower.(lowerFootprint); ok {
		if n, err := f.Footprint(m.Key, m.Version); err == nil {
			return n
		}
	}
	return m.Size
}

// ModelUsage returns what each model's objects take on this worker, by model name (""
// for objects whose put named no model), leaving out models with nothing stored. Objects
// found on the lower tier at Open keep their model when the lower tier keeps labels
// (labeledLower), else count under "".
func (e *Engine) ModelUsage() []ModelUsage {
	e.mu.Lock()
	defer e.mu.Unlock()
	var out []ModelUsage
	for _, u := range e.mu.models.usage {
		if u.DRAMObjects != 0 || u.NVMeObjects != 0 {
			out = append(out, u)
		}
	}
	slices.SortFunc(out, func(a, b ModelUsage) int { return strings.Compare(a.Model, b.Model) })
	return out
}

// checkModelsLocked recomputes the tallies from the index (invariants builds, checkLocked).
// REQUIRES: e.mu.
func (e *Engine) checkModelsLocked() error {
	want := make([]ModelUsage, len(e.mu.models.usage))
	for _, o := range e.mu.objects {
		w := e.wantTally(o)
		if w != o.counted {
			return fmt.Errorf("%q: model tally %+v, its state says %+v", o.meta.Key, o.counted, w)
		}
		if int(o.model) >= len(want) {
			return fmt.Errorf("%q: model tag %d of %d", o.meta.Key, o.model, len(want))
		}
		u := &want[o.model]
		u.DRAMObjects += b2i(w.inDRAM)
		u.DRAMBytes += w.dram
		u.NVMeObjects += b2i(w.onNVMe)
		u.NVMeBytes += w.nvme
		u.DRAMLogical += o.meta.Size * b2i(w.inDRAM)
		u.NVMeLogical += o.meta.Size * b2i(w.onNVMe)
	}
	for i, u := range e.mu.models.usage {
		u.Model = ""
		if u != want[i] {
			return fmt.Errorf("model %q: tallied %+v, the index sums to %+v", e.mu.models.names[i], u, want[i])
		}
	}
	return nil
}
