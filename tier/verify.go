package tier

import (
	"fmt"

	"github.com/mooncake-go/mooncake/internal/invariants"
	"github.com/mooncake-go/mooncake/tier/policy"
)

// verifyLocked checks, in invariants builds only, that the index and the policy agree: every
// indexed object is known to the policy in a location matching its DRAM copy, and the policy's
// DRAM accounting is the sum of the attached copies. It is O(objects): the engine calls it
// after every state change, so the tests (run with the invariants tag) check every step.
// REQUIRES: e.mu.
func (e *Engine) verifyLocked() {
	if !invariants.Enabled || e.mu.closed {
		return // after Close the index keeps objects whose copies were released
	}
	if err := e.checkLocked(); err != nil {
		_ = invariants.AssertionFailedf("tier: index and policy disagree: %v", err)
	}
}

func (e *Engine) checkLocked() error {
	if len(e.mu.objects) != len(e.mu.byID) {
		return fmt.Errorf("%d objects by key, %d by id", len(e.mu.objects), len(e.mu.byID))
	}
	var dramBytes, dramObjects int64
	for key, o := range e.mu.objects {
		if o.meta.Key != key || e.mu.byID[o.id] != o {
			return fmt.Errorf("%q: indexes point at different objects", key)
		}
		loc := e.mu.pol.Location(o.id)
		inDRAM := loc == policy.LocDRAM || loc == policy.LocSpilling
		switch {
		case loc == policy.LocNone:
			return fmt.Errorf("%q: unknown to the policy", key)
		case inDRAM != (o.copy != nil):
			return fmt.Errorf("%q: policy location %s, DRAM copy %t", key, loc, o.copy != nil)
		case o.copy != nil && (!o.copy.attached || o.copy.id != o.id || o.copy.size != o.meta.Size):
			return fmt.Errorf("%q: bad DRAM copy %+v", key, *o.copy)
		case loc == policy.LocLower && !o.onLower:
			return fmt.Errorf("%q: on the lower tier only but not marked so", key)
		}
		if o.copy != nil {
			dramBytes += o.copy.size
			dramObjects++
		}
	}
	var supBytes int64
	for key, l := range e.mu.sup {
		for _, s := range l {
			supBytes += s.meta.Size
		}
		if len(l) == 0 {
			return fmt.Errorf("%q: empty list of superseded versions", key)
		}
		for i, s := range l {
			if s.meta.Key != key || s.c.attached || s.c.holders < 1 {
				return fmt.Errorf("%q: bad superseded version %d (attached %t, holders %d)", key, s.meta.Version, s.c.attached, s.c.holders)
			}
			if i > 0 && l[i-1].meta.Version >= s.meta.Version {
				return fmt.Errorf("%q: superseded versions %d, %d out of order", key, l[i-1].meta.Version, s.meta.Version)
			}
		}
		if o := e.mu.objects[key]; o != nil && o.meta.Version <= l[len(l)-1].meta.Version {
			return fmt.Errorf("%q: current version %d not newer than superseded %d", key, o.meta.Version, l[len(l)-1].meta.Version)
		}
	}
	if supBytes != e.mu.supBytes {
		return fmt.Errorf("superseded versions hold %d bytes, counted %d", supBytes, e.mu.supBytes)
	}
	if st := e.mu.pol.Stats(); supBytes > st.Reserved {
		return fmt.Errorf("superseded versions hold %d bytes, more than the policy's %d reserved", supBytes, st.Reserved)
	}
	if err := e.checkModelsLocked(); err != nil {
		return err
	}
	if st := e.mu.pol.Stats(); st.DRAMBytes != dramBytes || int64(st.DRAMObjects) != dramObjects {
		return fmt.Errorf("policy counts %d objects / %d bytes in DRAM, the index %d / %d",
			st.DRAMObjects, st.DRAMBytes, dramObjects, dramBytes)
	}
	return nil
}
