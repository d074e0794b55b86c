package raftmeta

import (
	"math/rand/v2"
	"slices"
	"testing"
)

// TestKVEventsFoldToVisibleKeys is a model test: folding the event stream of random commands
// (stored adds a key, the removals and cleared take keys away) gives exactly the visible
// keys after every entry, the sequence has no gap, and two nodes publish the same batches.
func TestKVEventsFoldToVisibleKeys(t *testing.T) {
	seed := testSeed(t)
	for round := range 20 {
		r := rand.New(rand.NewPCG(seed, uint64(round)))
		a, b, off := newFSM(), newFSM(), newFSM()
		a.keepEvents, b.keepEvents = true, true
		model := map[string]bool{}
		var last uint64
		for i := range 300 {
			c := randomCommand(r, int64(1000+i))
			idx := uint64(i + 1)
			applyEncoded(t, a, idx, c)
			applyEncoded(t, b, idx, c)
			applyEncoded(t, off, idx, c)
			if off.st.evSeq != a.st.evSeq || len(off.events.buf) != 0 {
				t.Fatalf("a node that keeps no events counts sequence %d (%d batches kept), want %d", off.st.evSeq, len(off.events.buf), a.st.evSeq)
			}
			got := a.events.buf
			if !slices.EqualFunc(got, b.events.buf, batchEqual) {
				t.Fatalf("round %d step %d %T: the two nodes' batches differ", round, i, c)
			}
			for _, bt := range got {
				if bt.Seq <= last {
					continue
				}
				if bt.Seq != last+1 || bt.Index != idx {
					t.Fatalf("round %d step %d: batch seq %d index %d after seq %d", round, i, bt.Seq, bt.Index, last)
				}
				last = bt.Seq
				for _, ev := range bt.Events {
					switch ev.Kind {
					case KVStored:
						model[ev.Key] = true
						if len(ev.Workers) == 0 {
							t.Fatalf("stored %q with no worker", ev.Key)
						}
					case KVRemoved, KVEvicted, KVWorkerGone:
						if !model[ev.Key] {
							t.Fatalf("round %d step %d %T: removal (%d) of %q, not stored", round, i, c, ev.Kind, ev.Key)
						}
						delete(model, ev.Key)
					case KVCleared:
						clear(model)
					}
				}
			}
			if last != a.st.evSeq {
				t.Fatalf("last seq %d, state says %d", last, a.st.evSeq)
			}
			visible := map[string]bool{}
			for k, ri := range a.st.objects {
				if a.st.recs.at(ri).nreps() > 0 {
					visible[k] = true
				}
			}
			for k := range visible {
				if !model[k] {
					t.Fatalf("round %d step %d %T: %q visible, the events say absent", round, i, c, k)
				}
			}
			for k := range model {
				if !visible[k] {
					t.Fatalf("round %d step %d %T: %q absent, the events say stored", round, i, c, k)
				}
			}
		}
	}
}

func batchEqual(x, y KVEventBatch) bool {
	return x.Seq == y.Seq && x.Index == y.Index && slices.EqualFunc(x.Events, y.Events, func(p, q KVEvent) bool {
		return p.Kind == q.Kind && p.Key == q.Key && p.Size == q.Size && p.Tokens == q.Tokens &&
			p.Model == q.Model && slices.Equal(p.Workers, q.Workers)
	})
}
