package repotest

import (
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/mooncake-go/mooncake/internal/base"
	"github.com/mooncake-go/mooncake/internal/testutil"
)

// The error table (internal/base errtable.go) against every other place that spells a code:
// the C header's defines, Python's ErrorCode enum, and the code tables of docs/protocol.md and
// docs/clib.md. Each check returns its disagreements, so the test can also show that it
// catches a deliberate one.

const (
	headerPath = "cmd/libmooncake_store/mooncake_store.h"
	pyPkgPath  = "python/mooncake"
)

// wantCodes returns the Mooncake codes of the table whose scope is in scopes, by name.
func wantCodes(scopes ...base.MooncakeScope) map[string]int {
	m := map[string]int{}
	for _, c := range base.MooncakeCodes() {
		if slices.Contains(scopes, c.Scope) {
			m[c.Name] = int(c.Code)
		}
	}
	return m
}

// diffCodes returns one line per name whose number differs between want and got.
func diffCodes(where string, want, got map[string]int) []string {
	var diffs []string
	for _, name := range slices.Sorted(maps.Keys(want)) {
		g, ok := got[name]
		switch {
		case !ok:
			diffs = append(diffs, fmt.Sprintf("%s lacks %s (%d)", where, name, want[name]))
		case g != want[name]:
			diffs = append(diffs, fmt.Sprintf("%s has %s = %d, the table %d", where, name, g, want[name]))
		}
	}
	for _, name := range slices.Sorted(maps.Keys(got)) {
		if _, ok := want[name]; !ok {
			diffs = append(diffs, fmt.Sprintf("%s has %s = %d, the table does not", where, name, got[name]))
		}
	}
	return diffs
}

var headerDefine = regexp.MustCompile(`(?m)^#define (MOONCAKE_(?:OK|ERR_\w+)) \(?(-?\d+)\)?`)

// cDefines returns the table's C-scope codes by their C header name.
func cDefines() map[string]int {
	m := map[string]int{}
	for _, c := range base.MooncakeCodes() {
		if c.Scope == base.ScopeC {
			m[c.CDefine()] = int(c.Code)
		}
	}
	return m
}

// headerCodes returns the header's MOONCAKE_OK and MOONCAKE_ERR_* defines.
func headerCodes(t *testing.T, header string) map[string]int {
	t.Helper()
	m := map[string]int{}
	for _, d := range headerDefine.FindAllStringSubmatch(header, -1) {
		n, err := strconv.Atoi(d[2])
		if err != nil {
			t.Fatal(err)
		}
		m[d[1]] = n
	}
	return m
}

// pythonCodes returns mooncake.store.ErrorCode from a copy of the package with the files in
// replace swapped in.
func pythonCodes(t *testing.T, replace map[string]string) map[string]int {
	t.Helper()
	const dump = `
import json, sys
sys.path.insert(0, sys.argv[1])
from mooncake.store import ErrorCode
print(json.dumps({m.name: int(m) for m in ErrorCode}))
`
	var m map[string]int
	if err := json.Unmarshal(runPython(t, replace, dump), &m); err != nil {
		t.Fatal(err)
	}
	return m
}

// runPython runs script with a copy of python/mooncake (files in replace swapped in) under
// the directory it gets as argv[1], and returns its standard output.
func runPython(t *testing.T, replace map[string]string, script string) []byte {
	t.Helper()
	py := testutil.LookTool(t, "python3")
	pkg := filepath.Join(t.TempDir(), "mooncake")
	if err := os.CopyFS(pkg, os.DirFS(filepath.Join(repoRoot(t), pyPkgPath))); err != nil {
		t.Fatal(err)
	}
	for name, text := range replace {
		if err := os.WriteFile(filepath.Join(pkg, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	out, err := exec.Command(py, "-B", "-c", script, filepath.Dir(pkg)).Output()
	if err != nil {
		t.Fatalf("python3: %v\n%s", err, stderrOf(err))
	}
	return out
}

func stderrOf(err error) []byte {
	if ee, ok := err.(*exec.ExitError); ok {
		return ee.Stderr
	}
	return nil
}

func readRepoFile(t *testing.T, rel string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(repoRoot(t), rel))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// mdTable returns the first two cells of each row of the markdown table that follows the
// heading in doc, as code number -> name.
func mdTable(t *testing.T, doc, heading string) map[string]int {
	t.Helper()
	_, rest, ok := strings.Cut(doc, "\n"+heading+"\n")
	if !ok {
		t.Fatalf("heading %q not found", heading)
	}
	m := map[string]int{}
	inTable := false
	for line := range strings.Lines(rest) {
		cells := strings.Split(line, "|")
		if !strings.HasPrefix(line, "|") || len(cells) < 3 {
			if inTable {
				break
			}
			continue
		}
		inTable = true
		n, err := strconv.Atoi(strings.TrimSpace(cells[1]))
		if err != nil {
			continue // the header row and the separator
		}
		m[strings.TrimSpace(cells[2])] = n
	}
	return m
}

// wireCodes returns the table's wire codes by name.
func wireCodes() map[string]int {
	m := map[string]int{}
	for c := base.Code(0); c.Known(); c++ {
		m[c.String()] = int(c)
	}
	return m
}

// TestErrorTable fails when the C header, Python's ErrorCode or the docs spell a code
// differently from internal/base's error table.
func TestErrorTable(t *testing.T) {
	header := readRepoFile(t, headerPath)
	types := readRepoFile(t, pyPkgPath+"/_types.py")
	clib := wantCodes(base.ScopeC)
	delete(clib, "OK")
	var diffs []string
	diffs = append(diffs, diffCodes(headerPath, cDefines(), headerCodes(t, header))...)
	diffs = append(diffs, diffCodes("python's ErrorCode", wantCodes(base.ScopeC, base.ScopePython), pythonCodes(t, nil))...)
	diffs = append(diffs, diffCodes("docs/clib.md", clib, mdTable(t, readRepoFile(t, "docs/clib.md"), "## Errors"))...)
	diffs = append(diffs, diffCodes("docs/protocol.md", wireCodes(), mdTable(t, readRepoFile(t, "docs/protocol.md"), "## 5. Error codes"))...)
	for _, d := range diffs {
		t.Error(d)
	}

	// Each check catches a deliberate disagreement.
	f := func(diffs []string, want string) {
		t.Helper()
		if len(diffs) != 1 || diffs[0] != want {
			t.Errorf("got %q, want [%q]", diffs, want)
		}
	}
	mutate := func(s, old, new string) string {
		t.Helper()
		if !strings.Contains(s, old) {
			t.Fatalf("mutation target %q not found", old)
		}
		return strings.Replace(s, old, new, 1)
	}
	f(diffCodes("h", cDefines(), headerCodes(t, mutate(header, "MOONCAKE_ERR_RPC_TIMEOUT (-901)", "MOONCAKE_ERR_RPC_TIMEOUT (-902)"))),
		"h has MOONCAKE_ERR_RPC_TIMEOUT = -902, the table -901")
	f(diffCodes("h", cDefines(), headerCodes(t, mutate(header, "#define MOONCAKE_ERR_TRANSFER_FAIL ", "// "))),
		"h lacks MOONCAKE_ERR_TRANSFER_FAIL (-800)")
	f(diffCodes("py", wantCodes(base.ScopeC, base.ScopePython),
		pythonCodes(t, map[string]string{"_types.py": mutate(types, "    BUFFER_OVERFLOW = -10\n", "    BUFFER_OVERFLOW = -11\n")})),
		"py has BUFFER_OVERFLOW = -11, the table -10")
	f(diffCodes("md", map[string]int{"OK": 0}, mdTable(t, "\n## E\n| code | name |\n|---|---|\n| 0 | OK |\n| 99 | NEW |\n\ntext\n| 1 | X |\n", "## E")),
		"md has NEW = 99, the table does not")
}
