package raftmeta

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/cockroachdb/datadriven"

	"github.com/mooncake-go/mooncake/internal/base"
)

// kvSessionScript runs the KV-session commands of the FSM scripts (testdata/fsm/kvsessions):
//
//	kv-attach id=<s> | kv-detach id=<s>   input: one key per line
//	kv-pin id=<s> | kv-unpin id=<s>
//	kv-sessions                           every session: id pinned=<b> members=<k,...>
//
// handled is false for any other command.
func kvSessionScript(t *testing.T, f *fsm, d *datadriven.TestData, apply func(Command) string) (out string, handled bool) {
	var id string
	d.MaybeScanArgs(t, "id", &id)
	switch d.Cmd {
	case "kv-attach":
		return apply(KVSession{Op: KVSessionAttach, ID: id, Keys: lines(d.Input)}), true
	case "kv-detach":
		return apply(KVSession{Op: KVSessionDetach, ID: id, Keys: lines(d.Input)}), true
	case "kv-pin":
		return apply(KVSession{Op: KVSessionPin, ID: id}), true
	case "kv-unpin":
		return apply(KVSession{Op: KVSessionUnpin, ID: id}), true
	case "kv-sessions":
		return formatKVSessions(&f.st.kvs), true
	}
	return "", false
}

// formatKVSessions prints the registry in a canonical order (also statesEqual's comparison).
func formatKVSessions(r *kvSessions) string {
	var out []string
	for id, s := range r.byID {
		keys := make([]string, 0, len(s.members))
		for k := range s.members {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		out = append(out, fmt.Sprintf("%s pinned=%t members=%s", id, s.pinned, strings.Join(keys, ",")))
	}
	slices.Sort(out)
	if len(out) == 0 {
		return "(none)\n"
	}
	return strings.Join(out, "\n") + "\n"
}

// checkKVSessions checks the registry's invariants against the objects.
func checkKVSessions(t testing.TB, st *state) {
	t.Helper()
	r := &st.kvs
	n := 0
	for id, s := range r.byID {
		if len(s.members) == 0 {
			t.Fatalf("KV session %q has no members", id)
		}
		for k := range s.members {
			n++
			if _, ok := st.objects[k]; !ok {
				t.Fatalf("KV session %q: member %q is no object", id, k)
			}
			if c := countOf(r.byKey[k], id); c != 1 {
				t.Fatalf("KV session %q: key %q lists it %d times", id, k, c)
			}
		}
	}
	m := 0
	for k, ids := range r.byKey {
		if len(ids) == 0 {
			t.Fatalf("key %q: empty session list", k)
		}
		for _, id := range ids {
			m++
			if _, ok := r.byID[id].membersOrNil()[k]; !ok {
				t.Fatalf("key %q lists session %q, which does not hold it", k, id)
			}
		}
	}
	if n != m {
		t.Fatalf("%d memberships by session, %d by key", n, m)
	}
}

func countOf(ids []string, id string) int {
	n := 0
	for _, x := range ids {
		if x == id {
			n++
		}
	}
	return n
}

// randomKVSession draws a KV-session command over a few sessions (randomCommand).
func randomKVSession(r *rand.Rand, key func() string) Command {
	c := KVSession{Op: KVSessionOp(1 + r.IntN(4)), ID: fmt.Sprintf("s%d", r.IntN(4))}
	if c.Op == KVSessionAttach || c.Op == KVSessionDetach {
		for range 1 + r.IntN(5) {
			c.Keys = append(c.Keys, key())
		}
	}
	return c
}

func TestKVSessionCommandRoundTrip(t *testing.T) {
	for _, c := range []KVSession{
		{Op: KVSessionAttach, ID: "conv-a", Keys: []string{"k1", "k2"}},
		{Op: KVSessionDetach, ID: strings.Repeat("s", base.MaxKVSessionIDLen), Keys: []string{"k"}},
		{Op: KVSessionPin, ID: "a"},
		{Op: KVSessionUnpin, ID: "a"},
		// Another tenant's session: its prefix may take the id past the client's limit.
		{Op: KVSessionPin, ID: "\x00team-a\x00" + strings.Repeat("s", base.MaxKVSessionIDLen)},
	} {
		got, err := DecodeCommand(EncodeCommand(c))
		if err != nil {
			t.Fatal(err)
		}
		if fmt.Sprint(got) != fmt.Sprint(c) {
			t.Fatalf("round trip: %+v, want %+v", got, c)
		}
	}
	for _, c := range []KVSession{
		{Op: KVSessionPin, ID: ""},
		{Op: KVSessionPin, ID: "a\x00b"},
		{Op: KVSessionPin, ID: "\x00team-a\x00a\x00b"},
		{Op: KVSessionPin, ID: "\x00default\x00a"},
		{Op: KVSessionPin, ID: "\x00bad tenant\x00a"},
		{Op: KVSessionPin, ID: "\x00team-a\x00"},
		{Op: KVSessionPin, ID: strings.Repeat("s", base.MaxKVSessionIDLen+1)},
		{Op: KVSessionAttach, ID: "a"},
		{Op: KVSessionPin, ID: "a", Keys: []string{"k"}},
		{Op: 9, ID: "a"},
	} {
		if err := c.Validate(); err == nil {
			t.Fatalf("%+v: valid", c)
		}
	}
}
