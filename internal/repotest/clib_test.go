package repotest

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/mooncake-go/mooncake/internal/testutil"
)

// The C library's header against Python's ctypes declarations: gcc reads the header and
// prints its prototypes (-aux-info, so this test parses gcc's normalised output, not C), Python
// imports mooncake._lib and prints _FUNCS with ctypes' own type names; both must agree on
// every function's name, argument count and types.

// notInPython lists the header's functions Python does not declare, with the reason.
var notInPython = map[string]string{
	"mooncake_store_set_etcd_tls_config": "Mooncake's C-only etcd TLS call: no Python method uses it",
}

// pyTypeOverride lists the arguments Python deliberately declares with another ctypes type
// of the same size, keyed by "function argN" (N from 0), with the type it uses.
var pyTypeOverride = map[string]string{
	// char **json_out is read as void ** so Python keeps the address it must pass to
	// mooncake_store_free_buffer (a c_char_p would turn it into bytes and lose it).
	"mooncake_store_get_replica_desc arg2": "LP_c_void_p",
}

// proto is a function's return and argument types, as ctypes names ("c_int", "LP_c_char_p").
type proto struct {
	Ret  string   `json:"ret"`
	Args []string `json:"args"`
}

func (p proto) String() string { return p.Ret + "(" + strings.Join(p.Args, ", ") + ")" }

var auxLine = regexp.MustCompile(`extern (.+?) ?\b(mooncake_\w+) \((.*)\);`)

// headerProtos returns the prototypes of header (the header's text), as gcc sees them.
func headerProtos(t *testing.T, header string) map[string]proto {
	t.Helper()
	gcc := testutil.LookTool(t, "gcc")
	dir := t.TempDir()
	h := filepath.Join(dir, "mooncake_store.h")
	c := filepath.Join(dir, "use.c")
	aux := filepath.Join(dir, "aux.txt")
	if err := os.WriteFile(h, []byte(header), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(c, []byte("#include \"mooncake_store.h\"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(gcc, "-fsyntax-only", "-aux-info", aux, c).CombinedOutput(); err != nil {
		t.Fatalf("gcc: %v\n%s", err, out)
	}
	b, err := os.ReadFile(aux)
	if err != nil {
		t.Fatal(err)
	}
	protos := map[string]proto{}
	for _, m := range auxLine.FindAllStringSubmatch(string(b), -1) {
		p := proto{Ret: ctypesName(t, m[1])}
		if m[3] != "void" {
			for _, a := range strings.Split(m[3], ",") {
				p.Args = append(p.Args, ctypesName(t, a))
			}
		}
		protos[m[2]] = p
	}
	return protos
}

// ctypesBase maps the header's scalar and typedef names to ctypes class names. NB: on LP64
// Linux ctypes makes c_size_t and c_uint64 the same class (c_ulong), and c_int64 is c_long,
// so those pairs cannot be told apart from Python; what can differ (width, signedness,
// pointer depth, the struct) is compared.
var ctypesBase = map[string]string{
	"void":                        "void",
	"int":                         "c_int",
	"int64_t":                     "c_long",
	"uint64_t":                    "c_ulong",
	"size_t":                      "c_ulong",
	"mooncake_store_t":            "c_void_p",
	"mooncake_replicate_config_t": "ReplicateConfigC",
}

// ctypesName returns the ctypes class name a C type (as gcc prints it) is declared with.
func ctypesName(t *testing.T, ctype string) string {
	t.Helper()
	s := strings.Join(strings.Fields(strings.ReplaceAll(ctype, "const", " ")), " ")
	if inner, ok := strings.CutSuffix(s, "*"); ok {
		switch inner = strings.TrimSpace(inner); inner {
		case "char":
			return "c_char_p"
		case "void":
			return "c_void_p"
		default:
			return "LP_" + ctypesName(t, inner)
		}
	}
	name, ok := ctypesBase[s]
	if !ok {
		t.Fatalf("C type %q (from %q) has no ctypes mapping in this test: add it to ctypesBase", s, ctype)
	}
	return name
}

const dumpFuncs = `
import json, sys
sys.path.insert(0, sys.argv[1])
from mooncake import _lib
n = lambda t: "void" if t is None else t.__name__
print(json.dumps({k: {"ret": n(r), "args": [n(a) for a in args]} for k, (r, args) in _lib._FUNCS.items()}))
`

// pythonProtos returns mooncake._lib's _FUNCS from a copy of the package whose _lib.py is libPy.
func pythonProtos(t *testing.T, libPy string) map[string]proto {
	t.Helper()
	protos := map[string]proto{}
	out := runPython(t, map[string]string{"_lib.py": libPy}, dumpFuncs)
	if err := json.Unmarshal(out, &protos); err != nil {
		t.Fatalf("decode python's _FUNCS: %v\n%s", err, out)
	}
	return protos
}

// compareProtos returns one line per disagreement between the header and Python.
func compareProtos(header, python map[string]proto) []string {
	var diffs []string
	for name, h := range header {
		h.Args = slices.Clone(h.Args)
		for i := range h.Args {
			if o, ok := pyTypeOverride[fmt.Sprintf("%s arg%d", name, i)]; ok {
				h.Args[i] = o
			}
		}
		p, ok := python[name]
		switch {
		case !ok && notInPython[name] == "":
			diffs = append(diffs, fmt.Sprintf("%s: in the header, not in python's _FUNCS", name))
		case ok && notInPython[name] != "":
			diffs = append(diffs, fmt.Sprintf("%s: python declares it now: drop it from notInPython", name))
		case ok && len(p.Args) != len(h.Args):
			diffs = append(diffs, fmt.Sprintf("%s: header takes %d arguments %v, python declares %d %v", name, len(h.Args), h, len(p.Args), p))
		case ok && (p.Ret != h.Ret || !slices.Equal(p.Args, h.Args)):
			diffs = append(diffs, fmt.Sprintf("%s: header %v, python %v", name, h, p))
		}
	}
	for name := range python {
		// mcpy_* are the library's internal exports for the Python package alone (segment
		// management: cmd/libmooncake_store/exports_segments.go); Mooncake's C API has no such
		// calls, so the header does not declare them and the Python suite's calls check them.
		if strings.HasPrefix(name, internalPrefix) {
			continue
		}
		if _, ok := header[name]; !ok {
			diffs = append(diffs, fmt.Sprintf("%s: in python's _FUNCS, not in the header", name))
		}
	}
	slices.Sort(diffs)
	return diffs
}

// internalPrefix names the library's exports that only python/mooncake/_lib.py declares.
const internalPrefix = "mcpy_"

// TestCtypesMatchHeader fails when python/mooncake/_lib.py declares a function, an argument
// count or a type the C header does not.
func TestCtypesMatchHeader(t *testing.T) {
	header, libPy := readRepoFile(t, headerPath), readRepoFile(t, pyPkgPath+"/_lib.py")
	h := headerProtos(t, header)
	if len(h) < 30 {
		t.Fatalf("gcc found only %d prototypes in %s", len(h), headerPath)
	}
	for _, d := range compareProtos(h, pythonProtos(t, libPy)) {
		t.Error(d)
	}

	// The check catches a mismatch on either side.
	mutate := func(s, old, new string) string {
		t.Helper()
		if !strings.Contains(s, old) {
			t.Fatalf("mutation target %q not found", old)
		}
		return strings.Replace(s, old, new, 1)
	}
	badHeader := mutate(header, "int mooncake_store_is_exist(mooncake_store_t store, const char *key);",
		"int mooncake_store_is_exist(mooncake_store_t store, const char *key, size_t key_len);")
	badPy := mutate(libPy, `"mooncake_store_get_size": (c_int64,`, `"mooncake_store_get_size": (c_int,`)
	badPy = mutate(badPy, `"mooncake_store_register_buffer": (c_int, [_STORE, c_void_p, c_size_t]),`,
		`"mooncake_store_register_buffer": (c_int, [_STORE, c_void_p, _c_size_p]),`)
	got := compareProtos(headerProtos(t, badHeader), pythonProtos(t, badPy))
	want := []string{"mooncake_store_get_size: header", "mooncake_store_is_exist: header takes 3",
		"mooncake_store_register_buffer: header"}
	if len(got) != len(want) {
		t.Fatalf("mismatches found: %q, want %d", got, len(want))
	}
	for i := range want {
		if !strings.HasPrefix(got[i], want[i]) {
			t.Errorf("mismatch %d = %q, want it to start with %q", i, got[i], want[i])
		}
	}
}
