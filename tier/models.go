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
	names  []string // tag -> name; names[0] == "" (no model)
	byName map[string]uint16
	usage  []ModelUsage // by tag
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
// found on the lower tier at Open count under "" (see docs/memory.md, "limits").
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
