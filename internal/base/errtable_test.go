package base

import (
	"net/http"
	"testing"
)

// TestErrorTable checks the table's own consistency; internal/repotest checks C, Python and
// the docs against it.
func TestErrorTable(t *testing.T) {
	known := map[MooncakeCode]MooncakeCodeInfo{}
	names := map[string]bool{}
	for i, m := range mooncakeCodes {
		if _, dup := known[m.Code]; dup || names[m.Name] || m.Name == "" {
			t.Errorf("Mooncake code %d %q: duplicate or unnamed", m.Code, m.Name)
		}
		if i > 0 && m.Code >= mooncakeCodes[i-1].Code {
			t.Errorf("Mooncake code %d is out of Mooncake's (descending) order", m.Code)
		}
		if m.Code.String() != m.Name {
			t.Errorf("MooncakeCode(%d).String() = %q, want %q", m.Code, m.Code.String(), m.Name)
		}
		known[m.Code], names[m.Name] = m, true
	}
	sentinels := map[error]Code{}
	for c := range Code(numCodes) {
		r := errorTable[c]
		if r.name == "" || (r.sentinel == nil) != (c == CodeOK) {
			t.Errorf("code %d: row %+v lacks a name or a sentinel", c, r)
		}
		if prev, dup := sentinels[r.sentinel]; dup && r.sentinel != nil {
			t.Errorf("codes %d and %d share a sentinel", prev, c)
		}
		sentinels[r.sentinel] = c
		if m, ok := known[r.client]; !ok || m.Scope != ScopeC {
			t.Errorf("%v: client code %d is not a C-scope Mooncake code", c, r.client)
		}
		if _, ok := known[r.master]; !ok {
			t.Errorf("%v: master code %d is not a Mooncake code", c, r.master)
		}
		if http.StatusText(r.httpStatus) == "" {
			t.Errorf("%v: HTTP status %d", c, r.httpStatus)
		}
	}
	if Code(999).Mooncake() != MooncakeInternalError || MooncakeCode(-2).String() != "" {
		t.Error("unknown codes")
	}
	if m, s := CodeNotLeader.MooncakeMaster(); m != MooncakeUnavailableInCurrentStatus || s != http.StatusServiceUnavailable || CodeNotLeader.Mooncake() != MooncakeRPCFail {
		t.Error("NOT_LEADER: the master speaks of itself, the client of the master it cannot reach")
	}
}
