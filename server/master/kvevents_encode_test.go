package master

import (
	"reflect"
	"strings"
	"testing"

	mctest "github.com/mooncake-go/mooncake/internal/testutil"

	"github.com/mooncake-go/mooncake/internal/base"
	"github.com/mooncake-go/mooncake/raftmeta"
)

// TestMsgpackEncoder round-trips every width the encoder chooses between.
func TestMsgpackEncoder(t *testing.T) {
	f := func(enc func(*mpEnc), want any) {
		t.Helper()
		var e mpEnc
		enc(&e)
		got, rest, err := mctest.MsgpackDecode(e.b)
		if err != nil || len(rest) != 0 || !reflect.DeepEqual(got, want) {
			t.Fatalf("decoded %#v (rest %d, %v), want %#v", got, len(rest), err, want)
		}
	}
	for _, v := range []uint64{0, 127, 128, 255, 256, 65535, 65536, 1<<32 - 1, 1 << 32, 1<<64 - 1} {
		f(func(e *mpEnc) { e.uint(v) }, v)
	}
	f(func(e *mpEnc) { e.int(-1) }, int64(-1))
	f(func(e *mpEnc) { e.int(-1 << 40) }, int64(-1<<40))
	f(func(e *mpEnc) { e.int(5) }, uint64(5))
	for _, n := range []int{0, 31, 32, 255, 256, 65535, 65536} {
		s := strings.Repeat("x", n)
		f(func(e *mpEnc) { e.str(s) }, s)
	}
	f(func(e *mpEnc) { e.strOrNil("") }, nil)
	for _, n := range []int{0, 15, 16, 65535, 65536} {
		want := make([]any, n)
		for i := range want {
			want[i] = nil
		}
		f(func(e *mpEnc) {
			e.array(n)
			for range n {
				e.nil()
			}
		}, want)
	}
	f(func(e *mpEnc) {
		e.mapHeader(16)
		for i := range 16 {
			e.str(string(rune('a' + i)))
			e.uint(uint64(i))
		}
	}, func() any {
		m := map[string]any{}
		for i := range 16 {
			m[string(rune('a'+i))] = uint64(i)
		}
		return m
	}())
}

// TestKVEventEncode checks one batch of each kind against Mooncake's field list: a map whose
// header miscounts its fields does not decode to the end.
func TestKVEventEncode(t *testing.T) {
	for _, legacy := range []bool{false, true} {
		p := &kvPublisher{cfg: KVEventsConfig{BackendID: "b", ModelName: "fallback", BlockSize: 16, DPRank: 3,
			EmitObjectKey: true, EmitLegacyCompat: legacy}}
		b := raftmeta.KVEventBatch{Seq: 7, Index: 42, Events: []raftmeta.KVEvent{
			{Kind: raftmeta.KVStored, Key: "k1", Size: 10, Tokens: 4, Model: "llama", Workers: []base.WorkerID{"w1", "w2"}},
			{Kind: raftmeta.KVEvicted, Key: "k2", Size: 5, Workers: []base.WorkerID{"w1"}},
			{Kind: raftmeta.KVCleared},
		}}
		payload, n, skipped := p.encode(b, 1234)
		if n != 3 || skipped != 0 {
			t.Fatalf("n %d skipped %d", n, skipped)
		}
		v, rest, err := mctest.MsgpackDecode(payload)
		if err != nil || len(rest) != 0 {
			t.Fatalf("decode: %v, %d bytes left", err, len(rest))
		}
		top := v.([]any)
		if top[0] != uint64(1234) || top[2] != uint64(3) {
			t.Fatalf("envelope %v", top)
		}
		evs := top[1].([]any)
		st, rm, cl := evs[0].(map[string]any), evs[1].(map[string]any), evs[2].(map[string]any)
		for k, want := range map[string]any{"event_type": "stored", "object_key": "k1", "model_name": "llama", "block_size": uint64(16),
			"tenant_id": "default", "backend_id": "b", "medium": "cpu", "dp_rank": uint64(3), "token_ids": nil, "tokens": uint64(4),
			"raft_index": uint64(42), "timestamp": uint64(1234), "lora_name": nil} {
			if got, ok := st[k]; !ok || !reflect.DeepEqual(got, want) {
				t.Errorf("stored %s = %#v, want %#v", k, got, want)
			}
		}
		if !reflect.DeepEqual(st["workers"], []any{"w1", "w2"}) {
			t.Errorf("workers %v", st["workers"])
		}
		if rm["event_type"] != "removed" || rm["reason"] != "evicted" || rm["model_name"] != "fallback" {
			t.Errorf("removed %v", rm)
		}
		if _, ok := rm["token_ids"]; ok {
			t.Errorf("removed has stored-only fields: %v", rm)
		}
		if cl["event_type"] != "cleared" || cl["medium"] != nil {
			t.Errorf("cleared %v", cl)
		}
		if _, ok := cl["object_key"]; ok {
			t.Errorf("cleared has object fields: %v", cl)
		}
		if _, ok := st["type"]; ok != legacy || (legacy && (st["type"] != "BlockStored" || rm["type"] != "BlockRemoved" || cl["type"] != "AllBlocksCleared")) {
			t.Errorf("legacy %v: types %v %v %v", legacy, st["type"], rm["type"], cl["type"])
		}
	}
	p := &kvPublisher{cfg: KVEventsConfig{BackendID: "b"}}
	if _, n, skipped := p.encode(raftmeta.KVEventBatch{Events: []raftmeta.KVEvent{{Kind: raftmeta.KVStored, Key: "k"}, {Kind: raftmeta.KVCleared}}}, 1); n != 1 || skipped != 1 {
		t.Errorf("without emit_object_key: %d sent, %d skipped; want the cleared sent and the object skipped", n, skipped)
	}
}
