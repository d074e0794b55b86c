package raftmeta

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/mooncake-go/mooncake/internal/base"
)

var seedFlag = flag.Uint64("seed", 0, "seed for the randomized FSM tests (0: time-based)")

// applyEncoded runs c through the codec and applies it, as a raft node would.
func applyEncoded(t testing.TB, f *fsm, index uint64, c Command) Result {
	t.Helper()
	f.mu.Lock()
	defer f.mu.Unlock()
	res := f.applyLocked(index, EncodeCommand(c))
	f.advanceLocked(index)
	return res
}

// checkInvariants recomputes every derived counter and checks the record invariants.
func checkInvariants(t testing.TB, st *state) {
	t.Helper()
	checkKVSessions(t, st)
	want := newState()
	want.slots = make([]*segRec, len(st.slots))
	for i, s := range st.slots {
		if s != nil {
			cp := *s
			cp.objects, cp.bytes, cp.lost = 0, 0, 0
			want.slots[i] = &cp
			if st.slotOf[s.id] != uint16(i) {
				t.Fatalf("slotOf[%q] = %d, want %d", s.id, st.slotOf[s.id], i)
			}
		}
	}
	want.mdl = st.mdl.clone()
	want.mdl.clearObjects()
	if len(st.slotOf) != countSlots(st) {
		t.Fatalf("slotOf has %d entries, %d slots used", len(st.slotOf), countSlots(st))
	}
	if len(st.slots) > 1 && st.slots[len(st.slots)-1] == nil {
		t.Fatal("trailing free slot")
	}
	if int(st.recs.n)-len(st.recs.free) != len(st.objects) {
		t.Fatalf("%d records in use, %d objects", int(st.recs.n)-len(st.recs.free), len(st.objects))
	}
	seenIdx := map[uint32]bool{}
	for _, i := range st.recs.free {
		seenIdx[i] = true
	}
	for k, i := range st.objects {
		if seenIdx[i] || i >= st.recs.n {
			t.Fatalf("%q: record index %d free, shared or out of range", k, i)
		}
		seenIdx[i] = true
		rec := *st.recs.at(i)
		if err := want.checkRecord(k, &rec); err != nil {
			t.Fatal(err)
		}
		lost := st.lost[k]
		if rec.nreps() == 0 && lost == "" {
			t.Fatalf("%q has no replica, live or lost", k)
		}
		for j := 0; j < len(lost)/2; j++ {
			s := uint16(lost[2*j]) | uint16(lost[2*j+1])<<8
			if int(s) >= len(st.slots) || st.slots[s] == nil || rec.hasRep(s) || hasSlot(lost[:2*j], s) {
				t.Fatalf("%q: bad lost slot %d", k, s)
			}
		}
		want.keyBytes += int64(len(k))
		want.account(&rec)
		want.countLost(lost, 1)
	}
	for k := range st.lost {
		if _, ok := st.objects[k]; !ok || st.lost[k] == "" {
			t.Fatalf("lost replicas of absent key %q (or empty)", k)
		}
	}
	for i, s := range st.slots {
		if s != nil && (s.objects != want.slots[i].objects || s.bytes != want.slots[i].bytes || s.lost != want.slots[i].lost) {
			t.Fatalf("slot %d counters %d/%d/%d, recomputed %d/%d/%d", i, s.objects, s.bytes, s.lost,
				want.slots[i].objects, want.slots[i].bytes, want.slots[i].lost)
		}
	}
	got := [7]int64{st.keyBytes, st.bytes, st.replicas, st.softPinned, st.hardPinned, st.invisible, st.lostReplicas}
	exp := [7]int64{want.keyBytes, want.bytes, want.replicas, want.softPinned, want.hardPinned, want.invisible, want.lostReplicas}
	if got != exp {
		t.Fatalf("counters %v, recomputed %v", got, exp)
	}
	checkModelInvariants(t, st, want)
	checkTenantInvariants(t, st)
}

func countSlots(st *state) int {
	n := 0
	for _, s := range st.slots {
		if s != nil {
			n++
		}
	}
	return n
}

func statesEqual(a, b *state) string {
	// Record indexes are private to a state; compare by key.
	if len(a.objects) != len(b.objects) {
		return fmt.Sprintf("objects differ: %d vs %d", len(a.objects), len(b.objects))
	}
	for k := range a.objects {
		ra, _ := a.get(k)
		rb, ok := b.get(k)
		if !ok || ra != rb {
			return fmt.Sprintf("object %q differs: %+v vs %+v (%v)", k, ra, rb, ok)
		}
	}
	if !reflect.DeepEqual(a.slots, b.slots) {
		return "slots differ"
	}
	if !reflect.DeepEqual(a.slotOf, b.slotOf) || !reflect.DeepEqual(a.masters, b.masters) {
		return "slotOf or masters differ"
	}
	if !reflect.DeepEqual(a.lost, b.lost) {
		return "lost replicas differ"
	}
	if a.keyBytes != b.keyBytes || a.bytes != b.bytes || a.replicas != b.replicas ||
		a.softPinned != b.softPinned || a.hardPinned != b.hardPinned || a.invisible != b.invisible ||
		a.lostReplicas != b.lostReplicas {
		return "counters differ"
	}
	if a.evSeq != b.evSeq {
		return fmt.Sprintf("KV event sequence differs: %d vs %d", a.evSeq, b.evSeq)
	}
	if !reflect.DeepEqual(a.models(), b.models()) {
		return fmt.Sprintf("models differ: %+v vs %+v", a.models(), b.models())
	}
	if ka, kb := formatKVSessions(&a.kvs), formatKVSessions(&b.kvs); ka != kb {
		return fmt.Sprintf("KV sessions differ:\n%s\nvs\n%s", ka, kb)
	}
	if !reflect.DeepEqual(a.tenants, b.tenants) && (len(a.tenants) != 0 || len(b.tenants) != 0) {
		return fmt.Sprintf("tenants differ: %+v vs %+v", a.tenants, b.tenants)
	}
	return ""
}

// randomCommand draws a command over a small universe of keys and workers, so commands
// collide (duplicates, missing keys, dead workers) often.
func randomCommand(r *rand.Rand, now int64) Command {
	worker := func() base.WorkerID { return base.WorkerID(fmt.Sprintf("w%d", r.IntN(6))) }
	key := func() string { return fmt.Sprintf("k%02d", r.IntN(60)) }
	switch p := r.IntN(100); {
	case p < 40:
		c := PutEnd{Upsert: r.IntN(3) == 0, Now: now}
		for range 1 + r.IntN(6) {
			it := base.Object{ObjectMeta: base.ObjectMeta{Key: key(), Size: r.Int64N(1 << 20),
				Version: base.Version(1 + r.IntN(4)), Checksum: r.Uint64() % 3}, HardPin: r.IntN(5) == 0}
			if r.IntN(4) == 0 {
				it.SoftPinUntil = now + r.Int64N(1000)
			}
			seen := map[base.WorkerID]bool{}
			for range 1 + r.IntN(3) {
				if w := worker(); !seen[w] {
					seen[w] = true
					it.Replicas = append(it.Replicas, w)
				}
			}
			c.Items = append(c.Items, it)
		}
		return c
	case p < 50:
		c := Remove{}
		for range 1 + r.IntN(4) {
			c.Keys = append(c.Keys, key())
		}
		return c
	case p < 53:
		return RemoveRegex{Pattern: fmt.Sprintf("^k%d", r.IntN(6))}
	case p < 54:
		return RemoveAll{}
	case p < 66:
		return RegisterWorker{ID: worker(), Address: fmt.Sprintf("10.0.0.%d:1", r.IntN(9)), DRAMCapacity: r.Int64N(1 << 40), NVMeCapacity: r.Int64N(1 << 40)}
	case p < 70:
		return UnregisterWorker{ID: worker()}
	case p < 80:
		c := DropReplicas{Worker: worker()}
		for range 1 + r.IntN(4) {
			c.Items = append(c.Items, base.KeyVersion{Key: key(), Version: base.Version(r.IntN(3))})
		}
		return c
	case p < 84:
		return MarkWorkerDead{ID: worker()}
	case p < 86:
		return MarkWorkerLost{ID: worker(), Now: now}
	case p < 88:
		return LeaveWorker{ID: worker(), Keep: r.IntN(2) == 0, Now: now}
	case p < 90:
		c := AdoptReplicas{Worker: worker()}
		for range 1 + r.IntN(4) {
			c.Items = append(c.Items, base.KeyVersion{Key: key(), Version: base.Version(1 + r.IntN(4))})
		}
		return c
	case p < 91 && r.IntN(2) == 0:
		c := AddReplicas{Worker: worker()}
		for range 1 + r.IntN(4) {
			c.Items = append(c.Items, base.KeyVersion{Key: key(), Version: base.Version(1 + r.IntN(4))})
		}
		return c
	case p < 92:
		c := MoveReplicas{}
		for range 1 + r.IntN(3) {
			from, to := worker(), worker()
			if from == to {
				continue
			}
			c.Items = append(c.Items, ReplicaMove{Key: key(), Version: base.Version(1 + r.IntN(4)), From: from, To: to})
		}
		if len(c.Items) == 0 {
			return SetWorkerDraining{ID: worker(), Draining: true}
		}
		return c
	case p < 93:
		return SetWorkerDraining{ID: worker(), Draining: r.IntN(2) == 0}
	case p < 95:
		return randomKVSession(r, key)
	case p < 97:
		return SetPin{Key: key(), Version: base.Version(r.IntN(3)), SoftPinUntil: r.Int64N(1000), HardPin: r.IntN(2) == 0}
	default:
		addr := ""
		if r.IntN(4) != 0 {
			addr = fmt.Sprintf("10.0.1.%d:50051", r.IntN(9))
		}
		return RegisterMaster{ID: fmt.Sprintf("m%d", r.IntN(3)), RPCAddr: addr}
	}
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

func resultString(r Result) string {
	s := fmt.Sprintf("idx=%d err=%q removed=%d dropped=%d", r.Index, errString(r.Err), r.Removed, r.Dropped)
	for _, e := range r.Items {
		s += " " + errString(e)
	}
	return s
}

func testSeed(t *testing.T) uint64 {
	seed := *seedFlag
	if seed == 0 {
		seed = uint64(time.Now().UnixNano())
	}
	t.Logf("seed %d (rerun with -seed %d)", seed, seed)
	return seed
}

// TestPropertySnapshotMidway applies one random command sequence to two FSMs; the second is
// snapshotted and restored into a fresh FSM midway. Both must end equal (and give equal
// results after the restore), and the invariants must hold after every command.
func TestPropertySnapshotMidway(t *testing.T) {
	seed := testSeed(t)
	for round := range 30 {
		r := rand.New(rand.NewPCG(seed, uint64(round)))
		n := 50 + r.IntN(400)
		cut := r.IntN(n)
		a, b := newFSM(), newFSM()
		for i := range n {
			c := randomCommand(r, int64(1000+i))
			idx := uint64(i + 1)
			ra := applyEncoded(t, a, idx, c)
			rb := applyEncoded(t, b, idx, c)
			if resultString(ra) != resultString(rb) {
				t.Fatalf("round %d step %d %T: results differ:\n%s\n%s", round, i, c, resultString(ra), resultString(rb))
			}
			checkInvariants(t, a.st)
			if i == cut {
				var buf bytes.Buffer
				snap, err := b.Snapshot()
				if err != nil {
					t.Fatal(err)
				}
				if err := writeSnapshot(&buf, snap.(*fsmSnapshot).st, b.applied); err != nil {
					t.Fatal(err)
				}
				snap.Release()
				b = newFSM()
				if err := b.Restore(nopCloser{&buf}); err != nil {
					t.Fatalf("round %d: restore: %v", round, err)
				}
				if b.applied != idx {
					t.Fatalf("restored applied index %d, want %d", b.applied, idx)
				}
				checkInvariants(t, b.st)
			}
		}
		if d := statesEqual(a.st, b.st); d != "" {
			t.Fatalf("round %d (n=%d cut=%d): %s", round, n, cut, d)
		}
	}
}

type nopCloser struct{ *bytes.Buffer }

func (nopCloser) Close() error { return nil }

func TestCommandRoundTrip(t *testing.T) {
	r := rand.New(rand.NewPCG(testSeed(t), 1))
	for range 2000 {
		c := randomCommand(r, r.Int64())
		b := EncodeCommand(c)
		got, err := DecodeCommand(b)
		if err != nil {
			t.Fatalf("%T %+v: %v", c, c, err)
		}
		if !reflect.DeepEqual(got, c) {
			t.Fatalf("round trip:\n%#v\n%#v", c, got)
		}
		// Every strict prefix must fail cleanly.
		for i := range b {
			if _, err := DecodeCommand(b[:i]); err == nil {
				t.Fatalf("%T: prefix of %d/%d bytes decoded", c, i, len(b))
			} else if !errors.Is(err, ErrBadCommand) || !errors.Is(err, base.ErrInvalidParams) {
				t.Fatalf("prefix error %v", err)
			}
		}
	}
}

func TestSnapshotCorruption(t *testing.T) {
	f := newFSM()
	r := rand.New(rand.NewPCG(7, 7))
	for i := range 300 {
		applyEncoded(t, f, uint64(i+1), randomCommand(r, int64(i)))
	}
	var buf bytes.Buffer
	if err := writeSnapshot(&buf, f.st, f.applied); err != nil {
		t.Fatal(err)
	}
	good := buf.Bytes()
	for i := 0; i < len(good); i += 1 + len(good)/200 {
		bad := bytes.Clone(good)
		bad[i] ^= 0x41
		if _, _, err := readSnapshot(bytes.NewReader(bad)); !errors.Is(err, ErrCorruptSnapshot) || !errors.Is(err, base.ErrCorruption) {
			t.Fatalf("flipped byte %d: %v", i, err)
		}
		if _, _, err := readSnapshot(bytes.NewReader(good[:i])); !errors.Is(err, ErrCorruptSnapshot) {
			t.Fatalf("truncated at %d: %v", i, err)
		}
	}
	// A failed restore leaves the FSM as it was.
	before := f.st
	if err := f.Restore(nopCloser{bytes.NewBuffer(good[:len(good)-1])}); err == nil || f.st != before {
		t.Fatalf("bad restore: %v", err)
	}
	st, applied, err := readSnapshot(bytes.NewReader(good))
	if err != nil || applied != 300 {
		t.Fatal(err, applied)
	}
	if d := statesEqual(f.st, st); d != "" {
		t.Fatal(d)
	}
}

func FuzzDecodeCommand(f *testing.F) {
	r := rand.New(rand.NewPCG(1, 2))
	for range 40 {
		f.Add(EncodeCommand(randomCommand(r, 5)))
	}
	f.Add(EncodeCommand(RegisterModel{Name: "qwen2-7b", BytesPerToken: 57344, Description: "d"}))
	f.Add(EncodeCommand(LeaveWorker{ID: "w1", Keep: true, Now: 5}))
	f.Add(EncodeCommand(KVSession{Op: KVSessionAttach, ID: "conv", Keys: []string{"k", "j"}}))
	f.Add(EncodeCommand(KVSession{Op: KVSessionPin, ID: "conv"}))
	f.Add(EncodeCommand(LeaveWorker{ID: "embedded-h-1-0000beef"}))
	f.Add(EncodeCommand(PutEnd{Items: []base.Object{{ObjectMeta: base.ObjectMeta{Key: "k", Size: 9, Version: 1},
		Replicas: []base.WorkerID{"w1"}, Tokens: 3, Model: "m"}}}))
	f.Add(EncodeCommand(SetTenantQuota{Tenant: "team-a", DRAMBytes: 100}))
	f.Add(EncodeCommand(SetTenantQuota{Default: true, DRAMBytes: 100, NVMeBytes: 5}))
	f.Add(EncodeCommand(RemoveTenant{Tenant: "team-a", Pattern: "^k"}))
	f.Add(EncodeCommand(PutEnd{Items: []base.Object{{ObjectMeta: base.ObjectMeta{Key: "\x00team-a\x00k", Size: 9, Version: 1},
		Replicas: []base.WorkerID{"w1"}}}}))
	f.Fuzz(func(t *testing.T, b []byte) {
		c, err := DecodeCommand(b)
		if err != nil {
			if !errors.Is(err, ErrBadCommand) {
				t.Fatalf("error %v does not wrap ErrBadCommand", err)
			}
			return
		}
		// What decodes re-encodes to the same bytes (the encoding is canonical for a decoded
		// command) and applies without panicking.
		if b2 := EncodeCommand(c); !bytes.Equal(b, b2) {
			t.Fatalf("re-encode differs:\n%x\n%x", b, b2)
		}
		fs := newFSM()
		applyEncoded(t, fs, 1, RegisterWorker{ID: "w1", Address: "a:1"})
		applyEncoded(t, fs, 2, c)
		checkInvariants(t, fs.st)
	})
}

func FuzzReadSnapshot(f *testing.F) {
	for seed := range uint64(8) {
		fs := newFSM()
		r := rand.New(rand.NewPCG(seed, 3))
		for i := range int(seed * 10) {
			applyEncoded(f, fs, uint64(i+1), randomCommand(r, int64(i)))
		}
		if seed%2 == 1 { // the models section (models.go)
			applyEncoded(f, fs, fs.applied+1, RegisterModel{Name: "m", BytesPerToken: 2})
			applyEncoded(f, fs, fs.applied+1, PutEnd{Items: []base.Object{{ObjectMeta: base.ObjectMeta{Key: "tok",
				Size: 9, Version: 1}, Replicas: []base.WorkerID{"w1"}, Tokens: 3, Model: "m"}}})
		}
		if seed%4 == 2 { // the tenants section, version 1 (tenants.go)
			applyEncoded(f, fs, fs.applied+1, SetTenantQuota{Tenant: "team-a", DRAMBytes: 1000})
		}
		if seed%4 == 3 { // the tenants section, version 2: with the default quota
			applyEncoded(f, fs, fs.applied+1, SetTenantQuota{Default: true, DRAMBytes: 500, NVMeBytes: 9})
		}
		var buf bytes.Buffer
		if err := writeSnapshot(&buf, fs.st, fs.applied); err != nil {
			f.Fatal(err)
		}
		f.Add(buf.Bytes())
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		st, applied, err := readSnapshot(bytes.NewReader(b))
		if err != nil {
			if !errors.Is(err, ErrCorruptSnapshot) {
				t.Fatalf("error %v does not wrap ErrCorruptSnapshot", err)
			}
			return
		}
		checkInvariants(t, st)
		var buf bytes.Buffer
		if err := writeSnapshot(&buf, st, applied); err != nil {
			t.Fatal(err)
		}
		st2, _, err := readSnapshot(&buf)
		if err != nil {
			t.Fatal(err)
		}
		if d := statesEqual(st, st2); d != "" {
			t.Fatal(d)
		}
	})
}

func TestList(t *testing.T) {
	f := newFSM()
	applyEncoded(t, f, 1, RegisterWorker{ID: "w1", Address: "a:1"})
	var want []string
	c := PutEnd{Now: 1}
	r := rand.New(rand.NewPCG(3, 4))
	for _, i := range r.Perm(500) {
		k := fmt.Sprintf("p/%03d", i)
		c.Items = append(c.Items, base.Object{ObjectMeta: base.ObjectMeta{Key: k, Version: 1},
			Replicas: []base.WorkerID{"w1"}})
		c.Items = append(c.Items, base.Object{ObjectMeta: base.ObjectMeta{Key: fmt.Sprintf("q/%03d", i), Version: 1},
			Replicas: []base.WorkerID{"w1"}})
	}
	for i := range 500 {
		want = append(want, fmt.Sprintf("p/%03d", i))
	}
	applyEncoded(t, f, 2, c)
	for _, limit := range []int{1, 7, 100, 1000} {
		var got []string
		after := ""
		for {
			page := f.list("p/", after, limit)
			if len(page) == 0 {
				break
			}
			if len(page) > limit {
				t.Fatalf("page of %d > limit %d", len(page), limit)
			}
			for _, o := range page {
				got = append(got, o.Key)
			}
			after = page[len(page)-1].Key
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("limit %d: listed %d keys, want %d", limit, len(got), len(want))
		}
	}
	if f.list("p/", "", 0) != nil || len(f.list("zz", "", 5)) != 0 {
		t.Fatal("empty cases")
	}
}

// TestPutEndReplaced: an upsert's Result names what each item replaced, as the log ordered
// it: two upserts of a key prepared against the same stored version each replace the one
// before them, whatever a lookup before either said.
func TestPutEndReplaced(t *testing.T) {
	f := newFSM()
	applyEncoded(t, f, 1, RegisterWorker{ID: "w1", Address: "10.0.0.1:7000"})
	put := func(index uint64, v base.Version, upsert bool) Result {
		t.Helper()
		res := applyEncoded(t, f, index, PutEnd{Upsert: upsert, Now: 1, Items: []base.Object{
			{ObjectMeta: base.ObjectMeta{Key: "k", Size: 10, Version: v, Checksum: uint64(v)},
				Replicas: []base.WorkerID{"w1"}}}})
		if res.Err != nil {
			t.Fatalf("put v%d: %v", v, res.Err)
		}
		return res
	}
	replaced := func(res Result) []base.Version {
		var vs []base.Version
		for _, o := range res.Replaced {
			if o.Key != "k" || len(o.Replicas) != 1 || o.Replicas[0] != "w1" {
				t.Fatalf("replaced %+v", o)
			}
			vs = append(vs, o.Version)
		}
		return vs
	}
	if got := replaced(put(2, 1, false)); got != nil {
		t.Fatalf("first put replaced %v", got)
	}
	if got := replaced(put(3, 3, true)); !reflect.DeepEqual(got, []base.Version{1}) {
		t.Fatalf("upsert of v3 replaced %v, want [1]", got)
	}
	// v2 was prepared while v1 was stored; its entry lands after v3's.
	if got := replaced(put(4, 2, true)); !reflect.DeepEqual(got, []base.Version{3}) {
		t.Fatalf("upsert of v2 replaced %v, want [3]", got)
	}
	if got := replaced(put(5, 2, true)); got != nil {
		t.Fatalf("a retried upsert replaced %v", got)
	}
}

// TestRemoveGone: every removal's Result names the objects it removed as they were just
// before it, with their replicas (the drops the leader owes), whatever a lookup before it
// said: a key put or replaced after the proposer looked is in it at its committed version.
func TestRemoveGone(t *testing.T) {
	f := newFSM()
	applyEncoded(t, f, 1, RegisterWorker{ID: "w1", Address: "10.0.0.1:7000"})
	index := uint64(1)
	put := func(key string, v base.Version, upsert bool) {
		t.Helper()
		index++
		res := applyEncoded(t, f, index, PutEnd{Upsert: upsert, Now: 1, Items: []base.Object{
			{ObjectMeta: base.ObjectMeta{Key: key, Size: 10, Version: v, Checksum: uint64(v)},
				Replicas: []base.WorkerID{"w1"}}}})
		if res.Err != nil {
			t.Fatalf("put %s v%d: %v", key, v, res.Err)
		}
	}
	gone := func(c Command) []string {
		t.Helper()
		index++
		res := applyEncoded(t, f, index, c)
		var out []string
		for _, o := range res.Gone {
			if len(o.Replicas) != 1 || o.Replicas[0] != "w1" {
				t.Fatalf("%T: gone %+v without its replica", c, o)
			}
			out = append(out, fmt.Sprintf("%s@%d", o.Key, o.Version))
		}
		slices.Sort(out)
		return out
	}
	put("a", 1, false)
	put("a", 2, true) // replaced after a proposer looked up a@1: the remove removes a@2
	if got := gone(Remove{Keys: []string{"a", "missing"}}); !reflect.DeepEqual(got, []string{"a@2"}) {
		t.Fatalf("Remove: gone %v, want [a@2]", got)
	}
	put("p/1", 3, false)
	put("p/2", 4, false)
	put("q/1", 5, false)
	if got := gone(RemoveRegex{Pattern: "^p/"}); !reflect.DeepEqual(got, []string{"p/1@3", "p/2@4"}) {
		t.Fatalf("RemoveRegex: gone %v", got)
	}
	tk, err := base.TenantKey("team", "x")
	if err != nil {
		t.Fatal(err)
	}
	put(tk, 6, false)
	if got := gone(RemoveTenant{Tenant: "team", All: true}); !reflect.DeepEqual(got, []string{tk + "@6"}) {
		t.Fatalf("RemoveTenant: gone %v", got)
	}
	if got := gone(RemoveAll{}); !reflect.DeepEqual(got, []string{"q/1@5"}) {
		t.Fatalf("RemoveAll: gone %v, want [q/1@5]", got)
	}
}
