package policy

import (
	"flag"
	"math/rand/v2"
	"reflect"
	"sort"
	"testing"
	"time"

	"github.com/mooncake-go/mooncake/internal/base"
)

var modelSeed = flag.Uint64("policy-seed", 0, "seed for TestModel (0: time-based)")

// model is a dumb reference of the eviction order, after etcd-io/raft quorum/quick_test.go
// ("agrees with a dumb alternative version"): no lists, every decision by sorting all objects
// by (segment, sequence number) where a sequence number is taken from a global counter each
// time an object enters a segment or moves to its MRU end.
type model struct {
	cfg  Config
	objs map[ID]*mobj
	seq  int
}

type mobj struct {
	size               int64
	persist            base.Persistence
	loc                Location
	onLower, hard      bool
	keep               bool // Object.KeepLower
	soft               int64
	readers, hits, seg int // seg: 0 probation, 1 protected
	seqNo              int
	lowerSeq           int // when it last entered the lower tier or was hit there
}

func (m *model) bump(o *mobj, seg int) { m.seq++; o.seg, o.seqNo = seg, m.seq }

// toLower records that o is now on the lower tier only: the most recent there.
func (m *model) toLower(o *mobj) { m.seq++; o.loc, o.lowerSeq = LocLower, m.seq }

func (o *mobj) keepLower() bool { return o.keep || o.persist == base.PersistenceDurable }

// evictLower: every lower-only object whose copy is not kept, by lowerSeq, skipping hard pins
// and busy ones, until need is covered.
func (m *model) evictLower(need int64, busy func(ID) bool) []Victim {
	var ids []ID
	for id, o := range m.objs {
		if o.loc == LocLower && !o.keepLower() {
			ids = append(ids, id)
		}
	}
	sort.Slice(ids, func(i, j int) bool { return m.objs[ids[i]].lowerSeq < m.objs[ids[j]].lowerSeq })
	var vs []Victim
	var freed int64
	for _, id := range ids {
		o := m.objs[id]
		if freed >= need || o.hard || busy(id) {
			continue
		}
		vs = append(vs, Victim{ID: id, Size: o.size, Action: ActionDrop})
		freed += o.size
		delete(m.objs, id)
	}
	return vs
}

func (m *model) sorted(pred func(*mobj) bool) []ID {
	var ids []ID
	for id, o := range m.objs {
		if pred(o) {
			ids = append(ids, id)
		}
	}
	sort.Slice(ids, func(i, j int) bool {
		a, b := m.objs[ids[i]], m.objs[ids[j]]
		if a.seg != b.seg {
			return a.seg < b.seg
		}
		return a.seqNo < b.seqNo
	})
	return ids
}

func (m *model) inSegs(o *mobj) bool { return o.loc == LocDRAM && !o.hard }

func (m *model) rebalance() {
	limit := int64(m.cfg.ProtectedShare * float64(m.cfg.Capacity))
	for {
		prot := m.sorted(func(o *mobj) bool { return m.inSegs(o) && o.seg == 1 })
		var bytes int64
		for _, id := range prot {
			bytes += m.objs[id].size
		}
		if bytes <= limit || len(prot) <= 1 {
			return
		}
		m.bump(m.objs[prot[0]], 0)
	}
}

func (m *model) evict(need, now int64) []Victim {
	var spilling int64
	for _, o := range m.objs {
		if o.loc == LocSpilling {
			spilling += o.size
		}
	}
	if need > m.cfg.Capacity || need-spilling <= 0 {
		return nil
	}
	target, freed := need-spilling, int64(0)
	var vs []Victim
	for pass := 0; pass < 2 && freed < target; pass++ {
		for _, id := range m.sorted(func(o *mobj) bool { return m.inSegs(o) }) {
			o := m.objs[id]
			if freed >= target || o.readers > 0 || (o.soft > now) != (pass == 1) {
				continue
			}
			v := Victim{ID: id, Size: o.size}
			switch {
			case o.onLower:
				v.Action, o.hits = ActionDropCopy, 0
				m.toLower(o)
			case m.cfg.HasLower && o.persist != base.PersistenceCache:
				v.Action, o.loc = ActionSpill, LocSpilling
			default:
				v.Action = ActionDrop
				delete(m.objs, id)
			}
			vs = append(vs, v)
			freed += o.size
		}
	}
	return vs
}

func (m *model) stats() (dram, spill, lower, pinned int64) {
	for _, o := range m.objs {
		switch o.loc {
		case LocDRAM:
			dram += o.size
			if o.hard {
				pinned += o.size
			}
		case LocSpilling:
			dram += o.size
			spill += o.size
		}
		if o.onLower {
			lower += o.size
		}
	}
	return
}

// modelTenant is the tenant of the model's object id: three tenants.
func modelTenant(id ID) string { return []string{"a", "b", "c"}[id%3] }

// tenants returns each tenant's bytes resident in DRAM (not being spilled) and on the lower
// tier, as the policy counts them (tenants.go).
func (m *model) tenants() (dram, lower map[string]int64) {
	dram, lower = map[string]int64{}, map[string]int64{}
	for id, o := range m.objs {
		if o.loc == LocDRAM {
			dram[modelTenant(id)] += o.size
		}
		if o.onLower {
			lower[modelTenant(id)] += o.size
		}
	}
	return dram, lower
}

// sameBytes compares byte counts by tenant, a missing tenant counting as 0.
func sameBytes(a, b map[string]int64) bool {
	for _, t := range []string{"a", "b", "c"} {
		if a[t] != b[t] {
			return false
		}
	}
	return len(a) <= 3 && len(b) <= 3
}

// TestModel drives the Policy and the model with the same random operations and requires the
// same victims, promotions and byte counts after every step. Run with -policy-seed=N to
// reproduce a failure.
func TestModel(t *testing.T) {
	seed := *modelSeed
	if seed == 0 {
		seed = uint64(time.Now().UnixNano())
	}
	t.Logf("seed %d (rerun with -policy-seed=%d)", seed, seed)
	rng := rand.New(rand.NewPCG(seed, 0))
	for round := 0; round < 200; round++ {
		cfg := Config{
			Capacity:       1000,
			ProtectedShare: []float64{0.2, 0.5, 0.8, 1}[rng.IntN(4)],
			PromoteOnHit:   1 + rng.IntN(3),
			HasLower:       rng.IntN(4) != 0,
		}
		p, err := New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		m := &model{cfg: p.Config(), objs: map[ID]*mobj{}}
		const ids = 24
		for step := 0; step < 400; step++ {
			id := ID(rng.IntN(ids) + 1)
			o := m.objs[id]
			switch op := rng.IntN(14); op {
			case 0, 1: // add to DRAM
				obj := Object{ID: id, Size: int64(10 + rng.IntN(90)),
					Persistence: []base.Persistence{base.PersistenceCache, base.PersistenceSpill, base.PersistenceDurable}[rng.IntN(3)],
					HardPin:     rng.IntN(8) == 0, Tenant: modelTenant(id)}
				if rng.IntN(5) == 0 {
					obj.SoftPinUntil = int64(rng.IntN(100))
				}
				obj.OnLower = obj.Persistence == base.PersistenceDurable
				p.AddDRAM(obj)
				n := &mobj{size: obj.Size, persist: obj.Persistence, loc: LocDRAM, onLower: obj.OnLower, hard: obj.HardPin, soft: obj.SoftPinUntil}
				m.objs[id] = n
				m.bump(n, 0)
			case 2: // add on lower only
				sz, keep, hard := int64(10+rng.IntN(90)), rng.IntN(3) == 0, rng.IntN(8) == 0
				p.AddLower(Object{ID: id, Size: sz, Persistence: base.PersistenceSpill, KeepLower: keep, HardPin: hard, Tenant: modelTenant(id)})
				n := &mobj{size: sz, persist: base.PersistenceSpill, onLower: true, keep: keep, hard: hard}
				m.objs[id] = n
				m.toLower(n)
			case 3, 4: // hit
				r := p.Hit(id)
				want := HitResult{}
				if o != nil {
					want.Loc = o.loc
					switch o.loc {
					case LocDRAM:
						if !o.hard {
							m.bump(o, 1)
							m.rebalance()
						}
					case LocLower:
						o.hits++
						want.Promote = o.hits >= m.cfg.PromoteOnHit
						if !o.keepLower() {
							m.toLower(o)
						}
					}
				}
				if r != want {
					t.Fatalf("seed %d round %d step %d: hit %d = %+v, want %+v", seed, round, step, id, r, want)
				}
				if r.Promote && rng.IntN(2) == 0 {
					release, err := p.Promoted(id)
					if err != nil {
						t.Fatal(err)
					}
					if release != !o.keepLower() {
						t.Fatalf("seed %d round %d step %d: promoted %d: release-lower %t, keep %t", seed, round, step, id, release, o.keepLower())
					}
					o.loc, o.hits = LocDRAM, 0
					o.onLower = o.keepLower()
					if !o.hard {
						m.bump(o, 1)
						m.rebalance()
					}
				}
			case 5: // acquire
				p.Acquire(id)
				if o != nil && (o.loc == LocDRAM || o.loc == LocSpilling) {
					o.readers++
				}
			case 6: // release
				p.Release(id)
				if o != nil && o.readers > 0 {
					o.readers--
				}
			case 7: // remove
				p.Remove(id)
				delete(m.objs, id)
			case 8: // pins
				hard, soft := rng.IntN(3) == 0, int64(0)
				if rng.IntN(2) == 0 {
					soft = int64(rng.IntN(100))
				}
				err := p.SetPins(id, hard, soft)
				if (err == nil) != (o != nil) {
					t.Fatalf("seed %d: SetPins(%d) = %v", seed, id, err)
				}
				if o != nil {
					wasHard := o.hard
					o.hard, o.soft = hard, soft
					if o.loc == LocDRAM && (wasHard || hard) {
						seg := o.seg
						if wasHard {
							seg = 0
						}
						if !hard {
							m.bump(o, seg)
						}
					}
				}
			case 9, 10: // evict
				need, now := int64(rng.IntN(400)), int64(rng.IntN(120))
				got := p.Evict(need, now).Victims
				want := m.evict(need, now)
				if !reflect.DeepEqual(got, want) {
					t.Fatalf("seed %d round %d step %d: evict(%d, %d) = %v, want %v", seed, round, step, need, now, got, want)
				}
			case 11: // spill done
				ok := rng.IntN(5) != 0
				err := p.SpillDone(id, ok)
				if (err == nil) != (o != nil && o.loc == LocSpilling) {
					t.Fatalf("seed %d: SpillDone(%d) = %v", seed, id, err)
				}
				if err == nil {
					if ok {
						o.onLower, o.readers, o.hits = true, 0, 0
						m.toLower(o)
					} else {
						delete(m.objs, id)
					}
				}
			case 12, 13: // evict from the lower tier; a third of the IDs are busy
				need, k := int64(rng.IntN(300)), ID(rng.IntN(3))
				busy := func(id ID) bool { return id%3 == k }
				got := p.EvictLower(need, busy)
				want := m.evictLower(need, busy)
				if !reflect.DeepEqual(got, want) {
					t.Fatalf("seed %d round %d step %d: evict-lower(%d) = %v, want %v", seed, round, step, need, got, want)
				}
			}
			dram, spill, lower, pinned := m.stats()
			s := p.Stats()
			if s.DRAMBytes != dram || s.SpillingBytes != spill || s.LowerBytes != lower || s.PinnedBytes != pinned {
				t.Fatalf("seed %d round %d step %d: stats %+v, model dram=%d spill=%d lower=%d pinned=%d",
					seed, round, step, s, dram, spill, lower, pinned)
			}
			if d, l := m.tenants(); !sameBytes(p.tenantDRAM, d) || !sameBytes(p.TenantsLower(), l) {
				t.Fatalf("seed %d round %d step %d: tenants dram=%v lower=%v, model dram=%v lower=%v",
					seed, round, step, p.tenantDRAM, p.TenantsLower(), d, l)
			}
			if got, want := p.Order(), m.sorted(func(o *mobj) bool { return m.inSegs(o) }); !reflect.DeepEqual(got, want) && !(len(got) == 0 && len(want) == 0) {
				t.Fatalf("seed %d round %d step %d: order %v, model %v", seed, round, step, got, want)
			}
			wantLower := m.sorted(func(o *mobj) bool { return o.loc == LocLower && !o.keepLower() })
			sort.Slice(wantLower, func(i, j int) bool { return m.objs[wantLower[i]].lowerSeq < m.objs[wantLower[j]].lowerSeq })
			if got := p.LowerOrder(); !reflect.DeepEqual(got, wantLower) && !(len(got) == 0 && len(wantLower) == 0) {
				t.Fatalf("seed %d round %d step %d: lower order %v, model %v", seed, round, step, got, wantLower)
			}
		}
	}
}
