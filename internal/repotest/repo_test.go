package repotest

import (
	"encoding/json"
	"go/parser"
	"go/token"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

const module = "github.com/mooncake-go/mooncake"

type pkg struct {
	ImportPath     string
	Dir            string
	Imports        []string
	Deps           []string
	GoFiles        []string
	CgoFiles       []string
	IgnoredGoFiles []string // other platforms' files and build-tagged ones
}

// listPackages runs `go list -deps`-style listing of every package of the module.
func listPackages(t *testing.T) []pkg {
	t.Helper()
	cmd := exec.Command("go", "list", "-json=ImportPath,Dir,Imports,Deps,GoFiles,CgoFiles,IgnoredGoFiles", module+"/...")
	cmd.Dir = repoRoot(t)
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	var pkgs []pkg
	dec := json.NewDecoder(strings.NewReader(string(out)))
	for dec.More() {
		var p pkg
		if err := dec.Decode(&p); err != nil {
			t.Fatalf("decode go list: %v", err)
		}
		pkgs = append(pkgs, p)
	}
	if len(pkgs) < 5 {
		t.Fatalf("go list found only %d packages", len(pkgs))
	}
	return pkgs
}

func repoRoot(t *testing.T) string {
	t.Helper()
	dir, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "go.mod")); err != nil {
		t.Fatalf("repo root not found from %s", dir)
	}
	return dir
}

// room returns the top-level room of a package path inside the module ("dram", "tier",
// "internal", "cmd", ...), or "" for packages outside the module.
func room(path string) string {
	if !strings.HasPrefix(path, module+"/") {
		return ""
	}
	rest := strings.TrimPrefix(path, module+"/")
	if i := strings.IndexByte(rest, '/'); i >= 0 {
		return rest[:i]
	}
	return rest
}

// allowed lists, per room, the other rooms it may import (design.md section 6). "internal" is
// the shared vocabulary every room may use; a room may always import itself.
var allowed = map[string][]string{
	"internal":   {},
	"dram":       {"internal"},
	"nvme":       {"internal"},
	"transfer":   {"internal"},
	"raftmeta":   {"internal"},
	"tier":       {"internal", "dram", "nvme"},
	"client":     {"internal", "transfer"},
	"server":     {"internal", "raftmeta", "tier", "transfer", "dram", "nvme"},
	"benchmarks": {"internal", "client", "transfer", "server", "tier", "dram", "nvme", "raftmeta"},
	"cmd":        {"internal", "client", "server", "benchmarks", "transfer", "tier", "dram", "nvme", "raftmeta"},
	"python":     {"internal"}, // Go tests only: the Python package reaches the store through the C library
}

// TestDependencyDirection fails when a package imports (directly or not) a room that
// design.md section 6 forbids it, e.g. dram importing tier, or client importing server.
func TestDependencyDirection(t *testing.T) {
	for _, p := range listPackages(t) {
		r := room(p.ImportPath)
		ok, known := allowed[r]
		if !known {
			t.Errorf("%s: room %q is not in design.md section 6; add it to the allowed table", p.ImportPath, r)
			continue
		}
		for _, d := range p.Deps {
			dr := room(d)
			if dr == "" || dr == r || slices.Contains(ok, dr) {
				continue
			}
			t.Errorf("%s imports %s: %s must not depend on %s (design.md section 6)", p.ImportPath, d, r, dr)
		}
	}
}

// TestPackageDocs fails when a package has no doc.go with a package comment.
func TestPackageDocs(t *testing.T) {
	for _, p := range listPackages(t) {
		fn := filepath.Join(p.Dir, "doc.go")
		f, err := parser.ParseFile(token.NewFileSet(), fn, nil, parser.PackageClauseOnly|parser.ParseComments)
		if err != nil {
			t.Errorf("no package doc in %s: %v", p.ImportPath, err)
			continue
		}
		if f.Doc == nil || len(strings.TrimSpace(f.Doc.Text())) < 40 {
			t.Errorf("no package doc in %s: doc.go needs a comment saying what the package is", p.ImportPath)
		}
	}
}

// cgoAllowed lists the packages that may use cgo: the C library (a separate build target,
// with a !cgo stub so `CGO_ENABLED=0 go build ./...` still works).
var cgoAllowed = []string{module + "/cmd/libmooncake_store"}

// TestNoCgo fails when a package of the module needs cgo: one static binary is a goal.
func TestNoCgo(t *testing.T) {
	for _, p := range listPackages(t) {
		if len(p.CgoFiles) > 0 && !slices.Contains(cgoAllowed, p.ImportPath) {
			t.Errorf("%s uses cgo (%v)", p.ImportPath, p.CgoFiles)
		}
	}
}

// TestNoCgoBuild fails when the module does not build without cgo (the mooncake binary is
// built with CGO_ENABLED=0; the C library's package must fall back to its stub).
func TestNoCgoBuild(t *testing.T) {
	cmd := exec.Command("go", "build", "./...")
	cmd.Dir = repoRoot(t)
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("CGO_ENABLED=0 go build ./...: %v\n%s", err, out)
	}
}
