package raftmeta

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"

	"github.com/mooncake-go/mooncake/internal/base"
)

// checkModelInvariants compares st's model counters with want's, recomputed from the records.
func checkModelInvariants(t testing.TB, st, want *state) {
	t.Helper()
	if st.mdl.none != want.mdl.none {
		t.Fatalf("no-model counters %+v, recomputed %+v", st.mdl.none, want.mdl.none)
	}
	if len(st.mdl.index) != len(st.mdl.recs)-min(1, len(st.mdl.recs))-countNil(st.mdl.recs) {
		t.Fatalf("model index has %d names, table %d slots", len(st.mdl.index), len(st.mdl.recs))
	}
	for i, r := range st.mdl.recs {
		if r == nil {
			continue
		}
		if i == 0 || st.mdl.index[r.name] != uint16(i) {
			t.Fatalf("model %q at slot %d, index says %d", r.name, i, st.mdl.index[r.name])
		}
		if r.acct != want.mdl.recs[i].acct {
			t.Fatalf("model %q counters %+v, recomputed %+v", r.name, r.acct, want.mdl.recs[i].acct)
		}
	}
}

func countNil(rs []*modelRec) int {
	n := 0
	for i, r := range rs {
		if i > 0 && r == nil {
			n++
		}
	}
	return n
}

func formatModels(ms []ModelUsage) string {
	var b strings.Builder
	for _, m := range ms {
		name := m.Name
		if name == "" {
			name = "(none)"
		}
		fmt.Fprintf(&b, "%s registered=%t bpt=%d objects=%d tokens=%d untokened=%d bytes=%d replica_bytes=%d replica_tokens=%d untokened_bytes=%d",
			name, m.Registered, m.BytesPerToken, m.Objects, m.Tokens, m.Untokened, m.Bytes, m.ReplicaBytes, m.ReplicaTokens, m.UntokenedReplicaBytes)
		if m.Description != "" {
			fmt.Fprintf(&b, " desc=%q", m.Description)
		}
		b.WriteByte('\n')
	}
	return b.String()
}

// TestPutTokensEncoding: a PutEnd without tokens encodes as it always did; with tokens it
// round-trips, and a bad tokens section is refused.
func TestPutTokensEncoding(t *testing.T) {
	plain := PutEnd{Now: 5, Items: []base.Object{{ObjectMeta: base.ObjectMeta{Key: "a", Size: 1, Version: 1},
		Replicas: []base.WorkerID{"w"}}}}
	enc := EncodeCommand(plain)
	withTok := plain
	withTok.Items = []base.Object{plain.Items[0], plain.Items[0], plain.Items[0]}
	withTok.Items[1].Key, withTok.Items[1].Tokens, withTok.Items[1].Model = "b", 256, "qwen2-7b"
	withTok.Items[2].Key, withTok.Items[2].Model = "c", "m"
	encTok := EncodeCommand(withTok)
	for _, c := range []PutEnd{plain, withTok} {
		got, err := DecodeCommand(EncodeCommand(c))
		if err != nil || !reflect.DeepEqual(got, c) {
			t.Fatalf("round trip: %+v, %v; want %+v", got, err, c)
		}
	}
	// The old encoding is a prefix: no tokens, no section.
	if want := EncodeCommand(PutEnd{Now: 5, Items: []base.Object{plain.Items[0]}}); !bytes.Equal(enc, want) || bytes.Contains(enc, []byte("qwen")) {
		t.Fatal("a PutEnd without tokens changed encoding")
	}
	// Corrupt sections: index out of order, out of range, empty entry, trailing garbage.
	for _, tail := range [][]byte{{1, 5, 1, 0}, {2, 1, 1, 0, 0, 1, 0}, {1, 0, 0, 0}, {0}} {
		b := append(bytes.Clone(enc), tail...)
		if _, err := DecodeCommand(b); !errors.Is(err, ErrBadCommand) {
			t.Fatalf("tail %v: %v, want ErrBadCommand", tail, err)
		}
	}
	if _, err := DecodeCommand(encTok[:len(encTok)-1]); !errors.Is(err, ErrBadCommand) {
		t.Fatalf("truncated: %v", err)
	}
	bad := withTok
	bad.Items = append([]base.Object(nil), withTok.Items...)
	bad.Items[1].Tokens = MaxTokens + 1
	if err := bad.Validate(); !errors.Is(err, base.ErrInvalidParams) {
		t.Fatalf("too many tokens: %v", err)
	}
	bad.Items[1].Tokens, bad.Items[1].Model = 1, "has space"
	if err := bad.Validate(); !errors.Is(err, base.ErrInvalidParams) {
		t.Fatalf("bad model name: %v", err)
	}
	for _, c := range []Command{RegisterModel{Name: "q", BytesPerToken: 57344, Description: "4 x 128"}, RemoveModel{Name: "q"}} {
		got, err := DecodeCommand(EncodeCommand(c))
		if err != nil || !reflect.DeepEqual(got, c) {
			t.Fatalf("round trip: %+v, %v; want %+v", got, err, c)
		}
	}
	if err := (RegisterModel{Name: "q"}).Validate(); !errors.Is(err, base.ErrInvalidParams) {
		t.Fatalf("zero bytes per token: %v", err)
	}
}

// TestModelsSnapshotRandom applies random commands with tokens and models and checks that a
// snapshot restores the same models and counters at every step.
func TestModelsSnapshotRandom(t *testing.T) {
	seed := rand.Uint64()
	t.Logf("seed %d", seed)
	r := rand.New(rand.NewPCG(seed, 1))
	f := newFSM()
	models := []string{"", "qwen", "llama", "ds"}
	for i := range 400 {
		var c Command
		switch p := r.IntN(10); {
		case p == 0:
			c = RegisterModel{Name: models[1+r.IntN(3)], BytesPerToken: 1 + r.Int64N(1000)}
		case p == 1:
			c = RemoveModel{Name: models[1+r.IntN(3)]}
		default:
			c = randomCommand(r, int64(i))
			if pe, ok := c.(PutEnd); ok {
				for j := range pe.Items {
					pe.Items[j].Tokens = r.Int64N(3) * r.Int64N(1000)
					pe.Items[j].Model = models[r.IntN(len(models))]
				}
			}
		}
		if c.Validate() != nil {
			continue
		}
		applyEncoded(t, f, uint64(i+1), c)
		checkInvariants(t, f.st)
		if i%20 == 0 {
			var buf bytes.Buffer
			if err := writeSnapshot(&buf, f.st, f.applied); err != nil {
				t.Fatal(err)
			}
			g := newFSM()
			if err := g.Restore(nopCloser{&buf}); err != nil {
				t.Fatalf("step %d: %v", i, err)
			}
			if diff := statesEqual(f.st, g.st); diff != "" {
				t.Fatalf("step %d: %s", i, diff)
			}
		}
	}
}

// BenchmarkApplyPutEnd measures decoding and applying a PutEnd of 64 objects with and without
// token counts: the FSM's share of the accounting's cost on the put path.
func BenchmarkApplyPutEnd(b *testing.B) {
	for _, tokens := range []bool{false, true} {
		b.Run(fmt.Sprintf("tokens=%t", tokens), func(b *testing.B) {
			f := newFSM()
			applyEncoded(b, f, 1, RegisterWorker{ID: "w1", Address: "a:1"})
			applyEncoded(b, f, 2, RegisterModel{Name: "qwen2-7b", BytesPerToken: 57344})
			b.ReportAllocs()
			for i := range b.N {
				c := PutEnd{Upsert: true, Now: int64(i)}
				for j := range 64 {
					it := base.Object{ObjectMeta: base.ObjectMeta{Key: fmt.Sprintf("k%d", j), Size: 256 * 57344,
						Version: base.Version(i + 1)}, Replicas: []base.WorkerID{"w1"}}
					if tokens {
						it.Tokens, it.Model = 256, "qwen2-7b"
					}
					c.Items = append(c.Items, it)
				}
				applyEncoded(b, f, uint64(i+3), c)
			}
		})
	}
}
