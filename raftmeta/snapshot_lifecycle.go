package raftmeta

import (
	"encoding/binary"
	"errors"
	"io"

	"github.com/mooncake-go/mooncake/internal/base"
)

// Trailing snapshot sections follow the objects section, each opened by a tag byte and a
// version byte, so branches that each add one stay independent (see doc.go, "Snapshot
// format"): 20 lifecycle (here), 30 models (models.go), 40 events (kvevents.go), 50 tenants
// (tenants.go). A snapshot without them (written before they existed) restores as if each were
// empty.
const (
	// lifecycleSectionTag opens the lifecycle section (CommandType range 20-29).
	lifecycleSectionTag     = 20
	lifecycleSectionVersion = 1
)

// writeLifecycleSection appends the lifecycle section: segments with a DeadSince or the
// draining flag, then every key with lost replicas.
//
//	| tag (1B) = 20 | version (1B) = 1 |
//	| segments: n uvarint, n × (slot u16, dead_since varint, draining bool) |
//	| lost: n uvarint, n × (key, r uvarint, r × slot u16) |
//
// flush hands b to the stream when it grows past a chunk and returns it emptied.
func writeLifecycleSection(b []byte, st *state, flush func([]byte) ([]byte, error)) ([]byte, error) {
	b = append(b, lifecycleSectionTag, lifecycleSectionVersion)
	n := 0
	for _, s := range st.slots {
		if s != nil && (s.deadSince != 0 || s.draining) {
			n++
		}
	}
	b = binary.AppendUvarint(b, uint64(n))
	for slot, s := range st.slots {
		if s != nil && (s.deadSince != 0 || s.draining) {
			b = binary.LittleEndian.AppendUint16(b, uint16(slot))
			b = binary.AppendVarint(b, s.deadSince)
			b = appendBool(b, s.draining)
		}
	}
	b = binary.AppendUvarint(b, uint64(len(st.lost)))
	for k, l := range st.lost {
		b = appendStr(b, k)
		b = binary.AppendUvarint(b, uint64(len(l)/2))
		b = append(b, l...)
		if len(b) > 32<<10 {
			var err error
			if b, err = flush(b); err != nil {
				return b, err
			}
		}
	}
	return b, nil
}

// readTrailingSections reads the sections after the objects up to the checksum trailer, then
// checks what they must agree on with the objects (every invisible object has a lost
// replica).
func (d *snapReader) readTrailingSections(st *state) {
	for d.err == nil {
		if _, err := d.r.Peek(1); errors.Is(err, io.EOF) {
			break
		}
		tag := d.byte1()
		switch tag {
		case lifecycleSectionTag:
			d.readLifecycleSection(st)
		case sectionModels:
			readModelsSection(d, st)
		case sectionEvents:
			readEventsSection(d, st)
		case sectionKVSessions:
			readKVSessionsSection(d, st)
		case sectionTenants:
			readTenantsSection(d, st)
		default:
			if d.err == nil {
				d.fail("unknown section tag %d after the objects", tag)
			}
		}
	}
	if d.err == nil && st.invisible > 0 {
		for k, i := range st.objects {
			if st.recs.at(i).nreps() == 0 && st.lost[k] == "" {
				d.fail("key %q: no replica, live or lost", k)
				return
			}
		}
	}
}

func (d *snapReader) readLifecycleSection(st *state) {
	if v := d.byte1(); d.err == nil && v != lifecycleSectionVersion {
		d.fail("unknown lifecycle section version %d", v)
	}
	ns := d.uvarint()
	if d.err == nil && ns > maxSlots {
		d.fail("%d lifecycle segments", ns)
	}
	for i := uint64(0); i < ns && d.err == nil; i++ {
		slot := d.u16()
		since := d.varint()
		draining := d.byte1()
		if d.err != nil {
			return
		}
		if int(slot) >= len(st.slots) || st.slots[slot] == nil || draining > 1 {
			d.fail("lifecycle of unknown slot %d", slot)
			return
		}
		st.slots[slot].deadSince, st.slots[slot].draining = since, draining == 1
	}
	nl := d.uvarint()
	for i := uint64(0); i < nl && d.err == nil; i++ {
		key := d.str(base.MaxKeyLen)
		nr := d.uvarint()
		if d.err != nil {
			return
		}
		if nr == 0 || nr > MaxReplicas {
			d.fail("key %q: %d lost replicas", key, nr)
			return
		}
		lost := string(d.full(2 * int(nr)))
		if d.err != nil {
			return
		}
		idx, ok := st.objects[key]
		if _, dup := st.lost[key]; !ok || dup {
			d.fail("lost replicas of unknown or repeated key %q", key)
			return
		}
		rec := st.recs.at(idx)
		for j := 0; j < int(nr); j++ {
			s := uint16(lost[2*j]) | uint16(lost[2*j+1])<<8
			if int(s) >= len(st.slots) || st.slots[s] == nil || rec.hasRep(s) || hasSlot(lost[:2*j], s) {
				d.fail("key %q: bad lost slot %d", key, s)
				return
			}
		}
		st.setLost(key, lost)
	}
}
