package raftmeta

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"hash"
	"io"

	"github.com/mooncake-go/mooncake/internal/base"
)

// snapshotMagic opens every snapshot stream; snapshotVersion follows it (see doc.go,
// "Snapshot format").
const (
	snapshotMagic   = "MCRMSNAP"
	snapshotVersion = 1
)

// writeSnapshot streams st to w in the snapshot format. applied is the raft index the state
// reflects. It does not close w.
func writeSnapshot(w io.Writer, st *state, applied uint64) error {
	h := base.NewChecksum()
	bw := bufio.NewWriterSize(io.MultiWriter(w, h), 256<<10)
	var b []byte
	flush := func() error {
		_, err := bw.Write(b)
		b = b[:0]
		return err
	}
	b = append(b, snapshotMagic...)
	b = append(b, snapshotVersion)
	b = binary.AppendUvarint(b, applied)

	b = binary.AppendUvarint(b, uint64(len(st.masters)))
	for id, addr := range st.masters {
		b = appendStr(b, id)
		b = appendStr(b, addr)
	}
	n := 0
	for _, s := range st.slots {
		if s != nil {
			n++
		}
	}
	b = binary.AppendUvarint(b, uint64(n))
	for slot, s := range st.slots {
		if s == nil {
			continue
		}
		b = binary.LittleEndian.AppendUint16(b, uint16(slot))
		b = appendStr(b, string(s.id))
		b = appendStr(b, s.addr)
		b = binary.AppendVarint(b, s.dram)
		b = binary.AppendVarint(b, s.nvme)
		b = append(b, byte(s.state))
	}
	b = binary.AppendUvarint(b, uint64(len(st.objects)))
	if err := flush(); err != nil {
		return err
	}
	for k, i := range st.objects {
		rec := st.recs.at(i)
		b = appendStr(b, k)
		b = binary.AppendUvarint(b, rec.sizeFlags)
		b = binary.AppendUvarint(b, rec.version)
		b = binary.LittleEndian.AppendUint64(b, rec.checksum)
		b = binary.AppendVarint(b, rec.created)
		b = binary.AppendVarint(b, rec.softPin)
		b = binary.AppendUvarint(b, uint64(rec.nreps()))
		b = append(b, rec.reps...)
		if len(b) > 32<<10 {
			if err := flush(); err != nil {
				return err
			}
		}
	}
	var err error
	if b, err = appendModelsSection(b, st, func(b []byte) ([]byte, error) {
		_, err := bw.Write(b)
		return b[:0], err
	}); err != nil {
		return err
	}
	if err := flush(); err != nil {
		return err
	}
	b, err = writeLifecycleSection(b, st, func(p []byte) ([]byte, error) {
		_, err := bw.Write(p)
		return p[:0], err
	})
	if err != nil {
		return err
	}
	if b, err = appendKVSessionsSection(b, st, func(p []byte) ([]byte, error) {
		_, err := bw.Write(p)
		return p[:0], err
	}); err != nil {
		return err
	}
	b = appendEventsSection(b, st)
	b = appendTenantsSection(b, st)
	if err := flush(); err != nil {
		return err
	}
	if err := bw.Flush(); err != nil {
		return err
	}
	// The trailer is written to w only: it is the checksum of everything before it.
	_, err = w.Write(binary.LittleEndian.AppendUint64(nil, h.Sum64()))
	return err
}

// trailerReader passes a stream through minus its last 8 bytes (the checksum trailer),
// hashing what it passes in bulk. After io.EOF, trailer holds the held-back bytes.
type trailerReader struct {
	r       io.Reader
	h       hash.Hash64
	pending []byte // read from r, not yet passed on; the last 8 are withheld until EOF
	eof     bool
	chunk   []byte
}

func (t *trailerReader) Read(p []byte) (int, error) {
	for len(t.pending) <= 8 && !t.eof {
		if t.chunk == nil {
			t.chunk = make([]byte, 256<<10)
		}
		n, err := t.r.Read(t.chunk)
		t.pending = append(t.pending, t.chunk[:n]...)
		if errors.Is(err, io.EOF) {
			t.eof = true
		} else if err != nil {
			return 0, err
		}
	}
	avail := len(t.pending) - 8
	if avail <= 0 {
		return 0, io.EOF
	}
	n := copy(p, t.pending[:avail])
	t.h.Write(p[:n])
	// Slide the rest down so pending does not grow without bound.
	t.pending = t.pending[:copy(t.pending, t.pending[n:])]
	return n, nil
}

// trailer returns the withheld bytes once the stream is drained.
func (t *trailerReader) trailer() []byte { return t.pending }

// snapReader decodes a snapshot stream. The first error sticks.
type snapReader struct {
	r   *bufio.Reader
	err error
	buf []byte
}

func (d *snapReader) fail(format string, args ...any) {
	if d.err == nil {
		d.err = fmt.Errorf("%w: %s", ErrCorruptSnapshot, fmt.Sprintf(format, args...))
	}
}

func (d *snapReader) ioFail(err error) {
	if errors.Is(err, io.EOF) {
		err = io.ErrUnexpectedEOF
	}
	d.fail("%v", err)
}

// full reads exactly n bytes into d.buf (reused until the next call).
func (d *snapReader) full(n int) []byte {
	if d.err != nil {
		return nil
	}
	if cap(d.buf) < n {
		d.buf = make([]byte, n)
	}
	p := d.buf[:n]
	if _, err := io.ReadFull(d.r, p); err != nil {
		d.ioFail(err)
		return nil
	}
	return p
}

func (d *snapReader) byte1() byte {
	if d.err != nil {
		return 0
	}
	c, err := d.r.ReadByte()
	if err != nil {
		d.ioFail(err)
		return 0
	}
	return c
}

// uvarint reads a canonical uvarint.
func (d *snapReader) uvarint() uint64 {
	var x uint64
	var s uint
	for i := 0; i < binary.MaxVarintLen64; i++ {
		c := d.byte1()
		if d.err != nil {
			return 0
		}
		if c < 0x80 {
			if (i == binary.MaxVarintLen64-1 && c > 1) || (i > 0 && c == 0) {
				break // overflow, or an overlong encoding
			}
			return x | uint64(c)<<s
		}
		x |= uint64(c&0x7f) << s
		s += 7
	}
	d.fail("bad uvarint")
	return 0
}

func (d *snapReader) varint() int64 {
	ux := d.uvarint()
	x := int64(ux >> 1)
	if ux&1 != 0 {
		x = ^x
	}
	return x
}

func (d *snapReader) u64() uint64 {
	p := d.full(8)
	if p == nil {
		return 0
	}
	return binary.LittleEndian.Uint64(p)
}

func (d *snapReader) u16() uint16 {
	p := d.full(2)
	if p == nil {
		return 0
	}
	return binary.LittleEndian.Uint16(p)
}

func (d *snapReader) str(max int) string {
	n := d.uvarint()
	if d.err != nil {
		return ""
	}
	if n > uint64(max) {
		d.fail("string of %d bytes, limit %d", n, max)
		return ""
	}
	return string(d.full(int(n)))
}

// readSnapshot decodes a snapshot stream into a new state and checks it (every reference and
// uniqueness invariant of state), so a restored FSM is as sound as one built by apply.
func readSnapshot(r io.Reader) (*state, uint64, error) {
	tr := &trailerReader{r: r, h: base.NewChecksum()}
	d := &snapReader{r: bufio.NewReaderSize(tr, 256<<10)}
	if m := d.full(len(snapshotMagic)); d.err == nil && string(m) != snapshotMagic {
		return nil, 0, fmt.Errorf("%w: bad magic %q", ErrCorruptSnapshot, m)
	}
	if v := d.byte1(); d.err == nil && v != snapshotVersion {
		return nil, 0, fmt.Errorf("%w: unknown snapshot version %d", ErrCorruptSnapshot, v)
	}
	applied := d.uvarint()
	st := newState()

	d.readMasters(st)
	d.readSegments(st)
	d.readObjects(st)
	// Trailing sections (snapshot_lifecycle.go dispatches them by id), then the trailer:
	// everything before it is consumed.
	d.readTrailingSections(st)
	if d.err != nil {
		return nil, 0, d.err
	}
	sum := tr.h.Sum64()
	if len(tr.trailer()) != 8 {
		return nil, 0, fmt.Errorf("%w: missing checksum trailer", ErrCorruptSnapshot)
	}
	if got := binary.LittleEndian.Uint64(tr.trailer()); got != sum {
		return nil, 0, fmt.Errorf("%w: checksum %#x, computed %#x", ErrCorruptSnapshot, got, sum)
	}
	return st, applied, nil
}

// readMasters reads the snapshot's masters section into st (d.err says whether it failed).
func (d *snapReader) readMasters(st *state) {
	nm := d.uvarint()
	for i := uint64(0); i < nm && d.err == nil; i++ {
		id, addr := d.str(maxAddrLen), d.str(maxAddrLen)
		if d.err != nil {
			return
		}
		if _, dup := st.masters[id]; dup || id == "" || addr == "" {
			d.fail("bad master %q -> %q", id, addr)
			return
		}
		st.masters[id] = addr
	}
}

// readSegments reads the snapshot's segments section into st (d.err says whether it failed).
func (d *snapReader) readSegments(st *state) {
	ns := d.uvarint()
	if d.err == nil && ns > maxSlots {
		d.fail("%d segments", ns)
	}
	for i := uint64(0); i < ns && d.err == nil; i++ {
		slot := d.u16()
		s := &segRec{id: base.WorkerID(d.str(base.MaxWorkerIDLen)), addr: d.str(maxAddrLen)}
		s.dram, s.nvme = d.varint(), d.varint()
		s.state = SegmentState(d.byte1())
		if d.err != nil {
			return
		}
		if err := base.ValidateWorkerID(s.id); err != nil || slot == 0 || s.addr == "" || s.dram < 0 || s.nvme < 0 ||
			(s.state != SegmentActive && s.state != SegmentDead && s.state != SegmentLeft) {
			d.fail("bad segment %q at slot %d", s.id, slot)
			return
		}
		for int(slot) >= len(st.slots) {
			st.slots = append(st.slots, nil)
		}
		if _, dup := st.slotOf[s.id]; dup || st.slots[slot] != nil {
			d.fail("segment %q or slot %d listed twice", s.id, slot)
			return
		}
		st.slots[slot] = s
		st.slotOf[s.id] = slot
	}
}

// readObjects reads the snapshot's objects section into st (d.err says whether it failed).
func (d *snapReader) readObjects(st *state) {
	no := d.uvarint()
	// Do not trust the count for a preallocation beyond what is cheap to waste.
	st.objects = make(map[string]uint32, min(no, 1<<20))
	for i := uint64(0); i < no && d.err == nil; i++ {
		key := d.str(base.MaxKeyLen)
		var rec objRec
		rec.sizeFlags = d.uvarint()
		rec.version = d.uvarint()
		rec.checksum = d.u64()
		rec.created = d.varint()
		rec.softPin = d.varint()
		nr := d.uvarint()
		if d.err != nil {
			return
		}
		// No live replica: an invisible object, whose lost replicas a trailing section lists
		// (checked in readTrailingSections).
		if nr > MaxReplicas {
			d.fail("key %q: %d replicas", key, nr)
			return
		}
		rec.reps = string(d.full(2 * int(nr)))
		if d.err != nil {
			return
		}
		if err := st.checkRecord(key, &rec); err != nil {
			d.fail("%v", err)
			return
		}
		// One map operation per key: a duplicate shows as a map that did not grow.
		n0 := len(st.objects)
		idx := st.recs.alloc()
		st.objects[key] = idx
		if len(st.objects) == n0 {
			d.fail("key %q listed twice", key)
			return
		}
		*st.recs.at(idx) = rec
		st.keyBytes += int64(len(key))
		st.account(&rec)
		st.countTenant(key, rec.size(), 1)
	}
}

// checkRecord checks a decoded record against the invariants of objRec.
func (st *state) checkRecord(key string, rec *objRec) error {
	if err := base.ValidateKey(key); err != nil {
		return err
	}
	if rec.version == 0 || rec.softPin < 0 {
		return fmt.Errorf("key %q: version 0 or negative pin", key)
	}
	for i := 0; i < rec.nreps(); i++ {
		s := rec.rep(i)
		if int(s) >= len(st.slots) || st.slots[s] == nil {
			return fmt.Errorf("key %q: replica names free slot %d", key, s)
		}
		for j := 0; j < i; j++ {
			if rec.rep(j) == s {
				return fmt.Errorf("key %q: slot %d listed twice", key, s)
			}
		}
	}
	return nil
}
