package tier

import (
	"math"

	"github.com/mooncake-go/mooncake/internal/base"
	"github.com/mooncake-go/mooncake/internal/invariants"
)

// KV-session pins (issue 21 item 2): the master tells the workers holding the members of a
// pinned KV session to keep them, as Mooncake's session pin does: "an object is effectively
// soft pinned if any associated session is pinned or its native TTL soft pin is active". A
// session pin has no TTL; lifting it leaves the object's own soft pin (its put's TTL) as it was.

// SetSessionPin marks key (at version v; 0: any) as a member of a pinned KV session, or lifts
// the mark. While marked, eviction takes it only after every object without a soft pin (the
// soft pins' pass), as an unexpired soft pin. Errors: base.ErrObjectNotFound,
// base.ErrInvalidVersion. The mark belongs to this version: a new version starts unmarked.
func (e *Engine) SetSessionPin(key string, v base.Version, pinned bool) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	o, err := e.lookupLocked(key, v)
	if err != nil {
		return err
	}
	o.sessionPin = pinned
	if err := e.mu.pol.SetPins(o.id, o.hardPin, o.softPinNanos()); err != nil {
		return invariants.AssertionFailedf("tier: session pin %q: %v", key, err)
	}
	return nil
}

// softPinNanos is the soft pin the policy sees: none, the put's deadline, or (a member of a
// pinned KV session) forever. REQUIRES: e.mu.
func (o *object) softPinNanos() int64 {
	if o.sessionPin {
		return math.MaxInt64
	}
	return unixNanos(o.softUntil)
}
