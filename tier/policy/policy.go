package policy

import (
	"errors"
	"fmt"

	"github.com/mooncake-go/mooncake/internal/base"
)

// ErrUnknownObject is returned for an ID the policy does not hold. Use errors.Is.
var ErrUnknownObject = errors.New("policy: unknown object")

// ID names one object version for the policy. The engine assigns a fresh ID to every committed
// version, so a reader of a replaced version can never be confused with its successor.
type ID uint64

// Location is where an object's bytes are.
type Location uint8

const (
	// LocNone: not held.
	LocNone Location = iota
	// LocDRAM: resident in DRAM (and also on the lower tier when Object.OnLower).
	LocDRAM
	// LocSpilling: resident in DRAM and being written to the lower tier; not a victim.
	LocSpilling
	// LocLower: on the lower tier only.
	LocLower
)

func (l Location) String() string {
	switch l {
	case LocDRAM:
		return "dram"
	case LocSpilling:
		return "spilling"
	case LocLower:
		return "lower"
	}
	return "none"
}

// Action is what the engine must do with a victim.
type Action uint8

const (
	// ActionDrop forgets the object: its DRAM bytes are freed and it is gone from this worker
	// (cache mode, or no lower tier). The policy has already removed it.
	ActionDrop Action = iota + 1
	// ActionSpill writes the object to the lower tier, then frees its DRAM copy. The policy has
	// moved it to LocSpilling; the engine must call SpillDone (or Remove) later.
	ActionSpill
	// ActionDropCopy frees the DRAM copy of an object whose bytes are already on the lower
	// tier. The policy has moved it to LocLower.
	ActionDropCopy
)

func (a Action) String() string {
	switch a {
	case ActionDrop:
		return "drop"
	case ActionSpill:
		return "spill"
	case ActionDropCopy:
		return "drop-copy"
	}
	return "none"
}

// Reason says why the policy found no victim.
type Reason uint8

const (
	// ReasonNone: victims were found (or nothing was needed).
	ReasonNone Reason = iota
	// ReasonSpilling: nothing more to pick, but bytes being spilled will be freed soon: wait.
	ReasonSpilling
	// ReasonAllPinned: every DRAM object is hard-pinned.
	ReasonAllPinned
	// ReasonAllInUse: every DRAM object that is not hard-pinned is held by a reader, or the
	// bytes are held by writers and by readers of removed objects.
	ReasonAllInUse
	// ReasonEmpty: DRAM holds no object and no reserved bytes; the arena is fragmented or the
	// object does not fit for another reason the policy cannot see.
	ReasonEmpty
	// ReasonTooLarge: the object is larger than the capacity.
	ReasonTooLarge
)

func (r Reason) String() string {
	switch r {
	case ReasonSpilling:
		return "waiting for spills"
	case ReasonAllPinned:
		return "all pinned"
	case ReasonAllInUse:
		return "all in use"
	case ReasonEmpty:
		return "nothing to evict"
	case ReasonTooLarge:
		return "object larger than the arena"
	}
	return "none"
}

// Config configures a Policy. Zero fields take the documented defaults (EnsureDefaults).
type Config struct {
	// Capacity is the DRAM capacity in bytes. Required (> 0).
	Capacity int64
	// HighWatermark: background eviction starts when Used() exceeds this share of Capacity.
	// Default 0.95.
	HighWatermark float64
	// LowWatermark: background eviction stops at this share of Capacity. Default 0.85: evicting
	// 10% at a time amortises the wake-ups of the evictor without emptying a warm cache.
	LowWatermark float64
	// ProtectedShare caps the protected segment at this share of Capacity. Default 0.8 (the
	// share commonly used for SLRU's protected segment), so one fifth of DRAM is always
	// available to new objects before they must prove themselves.
	ProtectedShare float64
	// PromoteOnHit promotes a lower-tier object to DRAM on its Nth hit. Default 2 (second-hit
	// admission: a single read of a cold object does not push a warm one out).
	PromoteOnHit int
	// HasLower says whether a lower tier exists. Without it every victim is dropped.
	HasLower bool
}

// EnsureDefaults fills zero fields with their defaults.
func (c *Config) EnsureDefaults() {
	if c.HighWatermark == 0 {
		c.HighWatermark = 0.95
	}
	if c.LowWatermark == 0 {
		c.LowWatermark = 0.85
	}
	if c.ProtectedShare == 0 {
		c.ProtectedShare = 0.8
	}
	if c.PromoteOnHit == 0 {
		c.PromoteOnHit = 2
	}
}

// Validate checks a Config; it presumes EnsureDefaults has been called.
func (c *Config) Validate() error {
	switch {
	case c.Capacity <= 0:
		return fmt.Errorf("%w: policy: capacity %d must be > 0", base.ErrInvalidParams, c.Capacity)
	case !(c.LowWatermark > 0 && c.LowWatermark <= c.HighWatermark && c.HighWatermark <= 1):
		return fmt.Errorf("%w: policy: watermarks must satisfy 0 < low (%v) <= high (%v) <= 1",
			base.ErrInvalidParams, c.LowWatermark, c.HighWatermark)
	case !(c.ProtectedShare > 0 && c.ProtectedShare <= 1):
		return fmt.Errorf("%w: policy: protected share %v must be in (0, 1]", base.ErrInvalidParams, c.ProtectedShare)
	case c.PromoteOnHit < 1:
		return fmt.Errorf("%w: policy: promote-on-hit %d must be >= 1", base.ErrInvalidParams, c.PromoteOnHit)
	}
	return nil
}

// Object describes an object the engine hands to the policy.
type Object struct {
	ID   ID
	Size int64
	// Persistence is the object's resolved mode (never PersistenceDefault).
	Persistence base.Persistence
	// OnLower: the object's bytes are on the lower tier too (durable puts).
	OnLower bool
	// KeepLower: the lower-tier copy must stay while the object is held, whatever its
	// Persistence says: an object found on the lower tier at Open, whose mode the lower tier
	// does not record (it may have been durable). Durable objects keep theirs anyway.
	KeepLower bool
	// HardPin: never evicted from DRAM (nor from the lower tier).
	HardPin bool
	// Tenant is the object's tenant (base.TenantOf of its key; tenants.go).
	Tenant string
	// SoftPinUntil: evicted only after unpinned objects until this time (unix nanos); 0: none.
	SoftPinUntil int64
}

type segment uint8

const (
	segNone segment = iota
	segProbation
	segProtected
)

// entry is the policy's record of one object.
type entry struct {
	Object
	loc Location
	seg segment // segNone unless loc == LocDRAM && !HardPin
	// readers counts Acquire minus Release while loc is LocDRAM or LocSpilling.
	// Invariant: readers >= 0.
	readers int
	// lowerHits counts hits while loc == LocLower (promotion admission).
	lowerHits int
	// prev, next link the entry into its segment's list (LocDRAM) or into the lower tier's
	// LRU (LocLower and !keepLower()); an entry is in at most one list.
	prev, next *entry
}

// keepLower says the entry's lower-tier copy is its persistence guarantee: never released on
// promotion, never evicted from the lower tier.
func (e *entry) keepLower() bool {
	return e.KeepLower || e.Persistence == base.PersistenceDurable
}

// list is a circular doubly linked list with a sentinel; front = oldest / least recent.
type list struct {
	root  entry
	n     int
	bytes int64
}

func (l *list) init() { l.root.next, l.root.prev = &l.root, &l.root }

func (l *list) pushBack(e *entry) {
	e.prev, e.next = l.root.prev, &l.root
	l.root.prev.next = e
	l.root.prev = e
	l.n++
	l.bytes += e.Size
}

func (l *list) remove(e *entry) {
	e.prev.next, e.next.prev = e.next, e.prev
	e.prev, e.next = nil, nil
	l.n--
	l.bytes -= e.Size
}

func (l *list) front() *entry {
	if l.n == 0 {
		return nil
	}
	return l.root.next
}

// next returns the entry after e, or nil at the end.
func (l *list) next(e *entry) *entry {
	if e.next == &l.root {
		return nil
	}
	return e.next
}

// Policy is the eviction/promotion state machine. Not goroutine-safe.
type Policy struct {
	cfg Config
	m   map[ID]*entry
	// probation and protected hold the LocDRAM entries that are not hard-pinned.
	probation, protected list
	// lowerLRU holds the LocLower entries whose lower-tier copy may be evicted (not
	// keepLower), least recently used first: EvictLower's candidates.
	lowerLRU list
	// dramBytes counts LocDRAM and LocSpilling entries. spillingBytes counts LocSpilling.
	dramBytes, spillingBytes int64
	dramObjects, spilling    int
	// pinnedBytes / pinnedObjects count LocDRAM entries that are hard-pinned.
	pinnedBytes   int64
	pinnedObjects int
	// lowerBytes / lowerObjects count entries whose bytes are on the lower tier.
	lowerBytes   int64
	lowerObjects int
	// reserved counts Reserve()d bytes. Invariant: reserved >= 0.
	reserved int64
	// tenantDRAM and shares: each tenant's DRAM bytes and its share (tenants.go).
	tenantDRAM map[string]int64
	shares     map[string]int64
	// tenantLower and nvmeShares: each tenant's bytes on the lower tier and its share of it
	// (tenants.go).
	tenantLower map[string]int64
	nvmeShares  map[string]int64
}

// New returns an empty Policy.
func New(cfg Config) (*Policy, error) {
	cfg.EnsureDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	p := &Policy{cfg: cfg, m: make(map[ID]*entry)}
	p.probation.init()
	p.protected.init()
	p.lowerLRU.init()
	return p, nil
}

// Config returns the policy's configuration with defaults applied.
func (p *Policy) Config() Config { return p.cfg }

// Used returns the DRAM bytes in use: resident objects (including those being spilled) plus
// reserved bytes.
func (p *Policy) Used() int64 { return p.dramBytes + p.reserved }

// Reserve accounts n bytes of DRAM that are not an indexed object (a writer's range before
// Commit, a detached copy held by a reader, a temporary read).
func (p *Policy) Reserve(n int64) { p.reserved += n }

// Unreserve returns bytes accounted by Reserve.
func (p *Policy) Unreserve(n int64) {
	p.reserved -= n
	if p.reserved < 0 {
		// The engine unreserved more than it reserved: clamp so the policy stays usable; the
		// engine's invariants builds catch this on its side.
		p.reserved = 0
	}
}

// Location returns where the object is, LocNone if unknown.
func (p *Policy) Location(id ID) Location {
	if e, ok := p.m[id]; ok {
		return e.loc
	}
	return LocNone
}

// AddDRAM records a newly committed (or warmed-up) DRAM object. It enters probation (or the
// pinned set). An ID already held is replaced.
func (p *Policy) AddDRAM(o Object) {
	p.Remove(o.ID)
	e := &entry{Object: o, loc: LocDRAM}
	p.m[o.ID] = e
	p.dramBytes += o.Size
	p.dramObjects++
	if o.OnLower {
		p.countLower(e, 1)
	}
	p.placeDRAM(e, segProbation)
}

// AddLower records an object held on the lower tier only (found at restart).
func (p *Policy) AddLower(o Object) {
	p.Remove(o.ID)
	o.OnLower = true
	e := &entry{Object: o, loc: LocLower}
	p.m[o.ID] = e
	p.countLower(e, 1)
	p.placeLower(e)
}

// placeLower records that e just became LocLower: unless its copy is kept, it enters the
// lower tier's LRU at the most recent end.
func (p *Policy) placeLower(e *entry) {
	if !e.keepLower() {
		p.lowerLRU.pushBack(e)
	}
}

// unplaceLower takes a LocLower entry out of the lower tier's LRU (if it is there).
func (p *Policy) unplaceLower(e *entry) {
	if !e.keepLower() {
		p.lowerLRU.remove(e)
	}
}

// placeDRAM puts a LocDRAM entry into seg, or into the pinned set if hard-pinned.
func (p *Policy) placeDRAM(e *entry, seg segment) {
	p.countTenant(e, 1)
	if e.HardPin {
		e.seg = segNone
		p.pinnedBytes += e.Size
		p.pinnedObjects++
		return
	}
	e.seg = seg
	if seg == segProtected {
		p.protected.pushBack(e)
		p.rebalance()
	} else {
		p.probation.pushBack(e)
	}
}

// unplaceDRAM takes a LocDRAM entry out of its segment or the pinned set.
func (p *Policy) unplaceDRAM(e *entry) {
	if e.HardPin || e.seg != segNone {
		p.countTenant(e, -1) // NB: evictEntry's drop unplaces twice (then Remove): count once
	}
	switch {
	case e.HardPin:
		p.pinnedBytes -= e.Size
		p.pinnedObjects--
	case e.seg == segProbation:
		p.probation.remove(e)
	case e.seg == segProtected:
		p.protected.remove(e)
	}
	e.seg = segNone
}

// rebalance demotes protected's least recent entries to probation's new end while protected
// exceeds its share. It always leaves at least one entry in protected, so an object larger
// than the share can still be protected.
func (p *Policy) rebalance() {
	limit := int64(p.cfg.ProtectedShare * float64(p.cfg.Capacity))
	for p.protected.bytes > limit && p.protected.n > 1 {
		e := p.protected.front()
		p.protected.remove(e)
		e.seg = segProbation
		p.probation.pushBack(e)
	}
}

// Remove forgets an object in any location. It returns the DRAM bytes it held (0 if it was on
// the lower tier only or unknown).
func (p *Policy) Remove(id ID) int64 {
	e, ok := p.m[id]
	if !ok {
		return 0
	}
	var dram int64
	switch e.loc {
	case LocDRAM:
		p.unplaceDRAM(e)
		dram = e.Size
	case LocSpilling:
		p.spillingBytes -= e.Size
		p.spilling--
		dram = e.Size
	case LocLower:
		p.unplaceLower(e)
	}
	if dram > 0 {
		p.dramBytes -= e.Size
		p.dramObjects--
	}
	if e.OnLower {
		p.countLower(e, -1)
	}
	delete(p.m, id)
	return dram
}

// HitResult is what Hit tells the engine.
type HitResult struct {
	Loc Location
	// Promote: the object is on the lower tier only and has earned a DRAM copy.
	Promote bool
}

// Hit records a read. A DRAM hit moves the object to protected's MRU end; a lower-tier hit
// counts toward promotion.
func (p *Policy) Hit(id ID) HitResult {
	e, ok := p.m[id]
	if !ok {
		return HitResult{}
	}
	switch e.loc {
	case LocDRAM:
		if e.seg != segNone {
			p.unplaceDRAM(e)
			p.placeDRAM(e, segProtected)
		}
	case LocLower:
		e.lowerHits++
		if !e.keepLower() {
			p.lowerLRU.remove(e)
			p.lowerLRU.pushBack(e)
		}
		return HitResult{Loc: LocLower, Promote: e.lowerHits >= p.cfg.PromoteOnHit}
	}
	return HitResult{Loc: e.loc}
}

// Promoted records that a LocLower object got a DRAM copy; it enters protected (it earned it).
//
// The tiers are exclusive where persistence allows (a victim cache): unless the object's
// lower-tier copy is kept (durable, or found at Open: keepLower), the promotion moves the
// object rather than copying it, and releaseLower tells the engine to delete the lower-tier
// copy. The object is then like a fresh spill-mode put: evicting it spills it again. So DRAM
// and the lower tier hold distinct objects and their capacities add up, at the price of a
// rewrite when a promoted object goes cold again.
func (p *Policy) Promoted(id ID) (releaseLower bool, err error) {
	e, ok := p.m[id]
	if !ok || e.loc != LocLower {
		return false, fmt.Errorf("%w: %d is not on the lower tier only", ErrUnknownObject, id)
	}
	p.unplaceLower(e)
	e.loc = LocDRAM
	e.lowerHits = 0
	p.dramBytes += e.Size
	p.dramObjects++
	if !e.keepLower() {
		e.OnLower = false
		p.countLower(e, -1)
		releaseLower = true
	}
	p.placeDRAM(e, segProtected)
	return releaseLower, nil
}

// Acquire records a reader of a DRAM-resident object (LocDRAM or LocSpilling).
func (p *Policy) Acquire(id ID) {
	if e, ok := p.m[id]; ok && (e.loc == LocDRAM || e.loc == LocSpilling) {
		e.readers++
	}
}

// Release ends a reader recorded by Acquire.
func (p *Policy) Release(id ID) {
	if e, ok := p.m[id]; ok && e.readers > 0 {
		e.readers--
	}
}

// SetPins replaces an object's pins. softUntil is unix nanos (0: none).
func (p *Policy) SetPins(id ID, hard bool, softUntil int64) error {
	e, ok := p.m[id]
	if !ok {
		return fmt.Errorf("%w: %d", ErrUnknownObject, id)
	}
	if e.loc != LocDRAM || e.HardPin == hard {
		// Not in a segment, or it stays where it is: a soft pin only changes the pass in
		// which Evict may take it.
		e.HardPin, e.SoftPinUntil = hard, softUntil
		return nil
	}
	// The hard pin changes: move between the pinned set and a segment. A pin lifted puts the
	// object at probation's new end.
	p.unplaceDRAM(e)
	e.HardPin, e.SoftPinUntil = hard, softUntil
	p.placeDRAM(e, segProbation)
	return nil
}

// SpillDone records the end of a spill started by ActionSpill. ok: the object is now on the
// lower tier only (its DRAM copy is to be freed by the engine). !ok: the spill failed and the
// object is forgotten (the engine frees its DRAM copy and reports the loss).
func (p *Policy) SpillDone(id ID, ok bool) error {
	e, found := p.m[id]
	if !found || e.loc != LocSpilling {
		return fmt.Errorf("%w: %d is not being spilled", ErrUnknownObject, id)
	}
	if !ok {
		p.Remove(id)
		return nil
	}
	p.spillingBytes -= e.Size
	p.spilling--
	p.dramBytes -= e.Size
	p.dramObjects--
	e.loc = LocLower
	e.readers = 0
	e.lowerHits = 0
	e.OnLower = true
	p.countLower(e, 1)
	p.placeLower(e)
	return nil
}

// MarkOnLower records that a DRAM object's bytes were written to the lower tier while its DRAM
// copy stays (SpillAll at shutdown). Later evictions only drop the copy.
func (p *Policy) MarkOnLower(id ID) error {
	e, ok := p.m[id]
	if !ok || e.loc != LocDRAM {
		return fmt.Errorf("%w: %d is not in DRAM", ErrUnknownObject, id)
	}
	if !e.OnLower {
		e.OnLower = true
		p.countLower(e, 1)
	}
	return nil
}

// Victim is one object the engine must evict.
type Victim struct {
	ID     ID
	Size   int64
	Action Action
}

// NoSpace explains an empty plan.
type NoSpace struct {
	Reason Reason
	// PinnedObjects/PinnedBytes: hard-pinned DRAM objects.
	PinnedObjects int
	PinnedBytes   int64
	// InUseObjects/InUseBytes: unpinned DRAM objects held by readers, counted (InUseCounted)
	// only for the reasons that need them: the count walks every DRAM object.
	InUseObjects int
	InUseBytes   int64
	InUseCounted bool
	// ReservedBytes: bytes of writers and of detached copies held by readers.
	ReservedBytes int64
	// SupersededBytes: versions an upsert replaced, kept until the master drops them (tier's
	// supersede.go). The policy counts them in ReservedBytes and cannot tell them apart: the
	// engine fills this field and takes the same bytes out of ReservedBytes.
	SupersededBytes int64
	// SpillingBytes: bytes being spilled (freed when the spills end).
	SpillingBytes int64
}

func (n NoSpace) String() string {
	sup := ""
	if n.SupersededBytes > 0 {
		sup = fmt.Sprintf("superseded versions awaiting the master's drop: %d bytes; ", n.SupersededBytes)
	}
	inUse := ""
	if n.InUseCounted {
		inUse = fmt.Sprintf("in use by readers: %d objects, %d bytes; ", n.InUseObjects, n.InUseBytes)
	}
	return fmt.Sprintf("%s (hard-pinned: %d objects, %d bytes; %s"+
		"held by writers and readers of removed objects: %d bytes; %sbeing spilled: %d bytes)",
		n.Reason, n.PinnedObjects, n.PinnedBytes, inUse, n.ReservedBytes, sup, n.SpillingBytes)
}

// Plan is the result of Evict.
type Plan struct {
	Victims []Victim
	// NoSpace explains why Victims is empty (Reason == ReasonNone when it is not).
	NoSpace NoSpace
}

// Evict picks victims to free at least need bytes of DRAM (fewer if not enough can be freed),
// applies their transitions (see Action) and returns them. Bytes already being spilled count
// toward need: with need <= SpillingBytes it picks nothing and says ReasonSpilling. now (unix
// nanos) decides which soft pins have expired.
func (p *Policy) Evict(need int64, now int64) Plan {
	switch {
	case need <= 0:
		return Plan{}
	case need > p.cfg.Capacity:
		return Plan{NoSpace: p.quickNoSpace(ReasonTooLarge)}
	}
	target := need - p.spillingBytes
	if target <= 0 {
		return Plan{NoSpace: p.quickNoSpace(ReasonSpilling)}
	}
	return p.evict(target, now)
}

// EvictToLow is the background evictor's Evict: victims to bring DRAM down to the low
// watermark, NeedEviction's bytes (which already count the bytes being spilled, so they are
// not taken off a second time).
func (p *Policy) EvictToLow(now int64) Plan {
	need := p.NeedEviction()
	if need <= 0 {
		return Plan{}
	}
	return p.evict(need, now)
}

// evict picks victims to free at least target bytes (Evict's rules).
func (p *Policy) evict(target int64, now int64) Plan {
	// Tenants over their share first (tenants.go); then pass 0 skips unexpired soft pins and
	// pass 1 takes them (soft pins go last).
	victims, freed := p.evictOverShare(target, now)
	for pass := 0; pass < 2 && freed < target; pass++ {
		for _, l := range []*list{&p.probation, &p.protected} {
			for e := l.front(); e != nil && freed < target; {
				next := l.next(e)
				soft := e.SoftPinUntil > now
				if e.readers == 0 && soft == (pass == 1) {
					victims = append(victims, p.evictEntry(e))
					freed += e.Size
				}
				e = next
			}
		}
	}
	if len(victims) > 0 {
		return Plan{Victims: victims}
	}
	if p.spillingBytes > 0 {
		return Plan{NoSpace: p.quickNoSpace(ReasonSpilling)}
	}
	ns := p.noSpace(ReasonNone)
	switch {
	case ns.InUseObjects > 0 || ns.ReservedBytes > 0:
		ns.Reason = ReasonAllInUse
	case ns.PinnedObjects > 0:
		ns.Reason = ReasonAllPinned
	default:
		ns.Reason = ReasonEmpty
	}
	return Plan{NoSpace: ns}
}

// evictEntry applies a victim's transition and returns it. REQUIRES: e.loc == LocDRAM, not
// hard-pinned, no readers.
func (p *Policy) evictEntry(e *entry) Victim {
	v := Victim{ID: e.ID, Size: e.Size}
	p.unplaceDRAM(e)
	switch {
	case e.OnLower:
		v.Action = ActionDropCopy
		e.loc = LocLower
		e.lowerHits = 0
		p.dramBytes -= e.Size
		p.dramObjects--
		p.placeLower(e)
	case p.cfg.HasLower && e.Persistence != base.PersistenceCache:
		v.Action = ActionSpill
		e.loc = LocSpilling
		p.spillingBytes += e.Size
		p.spilling++
	default:
		v.Action = ActionDrop
		p.Remove(e.ID)
	}
	return v
}

// EvictLower picks objects held on the lower tier only to delete from it, least recently
// used first (a spill or a lower-tier hit makes an object the most recent), until their
// sizes add up to at least need (fewer if not enough can be taken). The engine calls it when
// the lower tier refuses a write for lack of room: the lower tier then evicts its own LRU
// objects rather than refusing the newer, hotter one. Never taken: objects whose lower-tier
// copy is kept (durable, found at Open: see Object.KeepLower), hard-pinned objects, and those
// busy says are (the engine passes the keys whose lower-tier writes are in progress). Each
// victim is forgotten at once (ActionDrop): the engine deletes it from the lower tier and
// reports it lost.
func (p *Policy) EvictLower(need int64, busy func(ID) bool) []Victim {
	var victims []Victim
	var freed int64
	for e := p.lowerLRU.front(); e != nil && freed < need; {
		next := p.lowerLRU.next(e)
		if !e.HardPin && (busy == nil || !busy(e.ID)) {
			victims = append(victims, Victim{ID: e.ID, Size: e.Size, Action: ActionDrop})
			freed += e.Size
			p.Remove(e.ID)
		}
		e = next
	}
	return victims
}

// quickNoSpace is noSpace without the objects in use, which take a walk of every DRAM object:
// for the reasons that do not need them (ReasonSpilling: wait for the spills; ReasonTooLarge),
// met on hot paths under the engine's lock (every Put past the high watermark kicks the
// evictor, and every writer waiting for room asks again after each spill). A walk there
// held the lock long enough, with a hundred thousand objects, to starve the worker's
// heartbeat past client_ttl.
func (p *Policy) quickNoSpace(r Reason) NoSpace {
	return NoSpace{
		Reason:        r,
		PinnedObjects: p.pinnedObjects,
		PinnedBytes:   p.pinnedBytes,
		ReservedBytes: p.reserved,
		SpillingBytes: p.spillingBytes,
	}
}

// noSpace gathers the counts that explain a failed eviction.
func (p *Policy) noSpace(r Reason) NoSpace {
	ns := p.quickNoSpace(r)
	ns.InUseCounted = true
	for _, l := range []*list{&p.probation, &p.protected} {
		for e := l.front(); e != nil; e = l.next(e) {
			if e.readers > 0 {
				ns.InUseObjects++
				ns.InUseBytes += e.Size
			}
		}
	}
	return ns
}

// NeedEviction returns how many bytes background eviction should free now: 0 while Used() is
// at or under the high watermark, else the excess over the low watermark minus the bytes
// already being spilled.
func (p *Policy) NeedEviction() int64 {
	used := p.Used()
	if float64(used) <= p.cfg.HighWatermark*float64(p.cfg.Capacity) {
		return 0
	}
	need := used - int64(p.cfg.LowWatermark*float64(p.cfg.Capacity)) - p.spillingBytes
	return max(need, 0)
}

// Stats is a snapshot of the policy's accounting.
type Stats struct {
	DRAMObjects, SpillingObjects, PinnedObjects, LowerObjects   int
	DRAMBytes, SpillingBytes, PinnedBytes, LowerBytes, Reserved int64
	ProbationObjects, ProtectedObjects                          int
	ProbationBytes, ProtectedBytes                              int64
	// LowerLRUObjects/LowerLRUBytes: lower-tier-only objects EvictLower may take.
	LowerLRUObjects int
	LowerLRUBytes   int64
}

// Stats returns the current accounting.
func (p *Policy) Stats() Stats {
	return Stats{
		DRAMObjects: p.dramObjects, SpillingObjects: p.spilling, PinnedObjects: p.pinnedObjects,
		LowerObjects: p.lowerObjects, DRAMBytes: p.dramBytes, SpillingBytes: p.spillingBytes,
		PinnedBytes: p.pinnedBytes, LowerBytes: p.lowerBytes, Reserved: p.reserved,
		ProbationObjects: p.probation.n, ProtectedObjects: p.protected.n,
		ProbationBytes: p.probation.bytes, ProtectedBytes: p.protected.bytes,
		LowerLRUObjects: p.lowerLRU.n, LowerLRUBytes: p.lowerLRU.bytes,
	}
}
