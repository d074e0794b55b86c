package repotest

import (
	"fmt"
	"slices"
	"strings"
	"testing"
)

// The arrows inside a room, which the room table of TestDependencyDirection cannot see:
// design.md section 6 says the master and the worker are two packages that do not import
// each other, with what they share below both, and the decision packages (the master's
// lifecycle, the worker's tier policy) do no I/O.

// apart lists packages that must not depend on one another, directly or not (go list's Deps).
var apart = []struct{ from, to string }{
	{"server/master", "server/worker"},
	{"server/worker", "server/master"},
	// What both services share sits below both, and below the composer.
	{"server/internal/admin", "server/master"},
	{"server/internal/admin", "server/worker"},
	{"server/rpcsrv", "server/master"},
	{"server/rpcsrv", "server/worker"},
	{"server/memory", "server/master"},
	{"server/memory", "server/worker"},
	{"server/lifecycle", "server/master"},
	{"server/lifecycle", "server/worker"},
}

// pure lists the decision packages and the module packages each may import directly. They
// may import the standard library except what does I/O (ioPackages); time is allowed for its
// types (they read no clock: now is passed in). NB: server/lifecycle imports raftmeta for
// its command types (the proposals it returns) and nothing that opens a file or a socket.
var pure = map[string][]string{
	"server/lifecycle": {"internal/base", "raftmeta"},
	"tier/policy":      {"internal/base"},
}

// ioPackages are the standard (and x/sys) packages that reach files, sockets, processes or
// the kernel; a package under one of these paths counts too (net/http, os/exec, io/fs).
var ioPackages = []string{"os", "net", "syscall", "io/fs", "io/ioutil", "golang.org/x/sys", "plugin", "unsafe", "runtime/cgo"}

// isIO reports whether path is one of ioPackages or under one.
func isIO(path string) bool {
	for _, p := range ioPackages {
		if path == p || strings.HasPrefix(path, p+"/") {
			return true
		}
	}
	return false
}

// isStd reports whether path is a standard library package (no dot in its first element).
func isStd(path string) bool {
	first, _, _ := strings.Cut(path, "/")
	return !strings.Contains(first, ".")
}

// ruleViolations returns one line per broken rule of apart and pure over pkgs (paths as go
// list gives them). It is pure, so a test can feed it fabricated packages.
func ruleViolations(pkgs []pkg) []string {
	var out []string
	rel := func(path string) string { return strings.TrimPrefix(path, module+"/") }
	for _, p := range pkgs {
		from := rel(p.ImportPath)
		for _, a := range apart {
			if from != a.from {
				continue
			}
			if slices.Contains(p.Deps, module+"/"+a.to) {
				out = append(out, fmt.Sprintf("%s depends on %s: they must stay apart (design.md section 6)", from, a.to))
			}
		}
		allowed, ok := pure[from]
		if !ok {
			continue
		}
		for _, imp := range p.Imports {
			switch {
			case strings.HasPrefix(imp, module+"/"):
				if !slices.Contains(allowed, rel(imp)) {
					out = append(out, fmt.Sprintf("%s imports %s: a decision package imports only %v of the module", from, rel(imp), allowed))
				}
			case !isStd(imp) && !strings.HasPrefix(imp, "golang.org/x/sys"):
				out = append(out, fmt.Sprintf("%s imports %s: a decision package imports no third-party package", from, imp))
			case isIO(imp):
				out = append(out, fmt.Sprintf("%s imports %s: a decision package does no I/O", from, imp))
			}
		}
	}
	return out
}

// TestSubPackageRules fails when server/master and server/worker depend on each other, when
// what they share depends on either, or when server/lifecycle or tier/policy imports a
// package that does I/O.
func TestSubPackageRules(t *testing.T) {
	pkgs := listPackages(t)
	for _, v := range ruleViolations(pkgs) {
		t.Error(v)
	}
	// Every package a rule names exists: a rename must update the rules, not void them.
	var paths []string
	for _, p := range pkgs {
		paths = append(paths, strings.TrimPrefix(p.ImportPath, module+"/"))
	}
	for _, a := range apart {
		for _, name := range []string{a.from, a.to} {
			if !slices.Contains(paths, name) {
				t.Errorf("rule names %s, which go list does not find", name)
			}
		}
	}
	for name := range pure {
		if !slices.Contains(paths, name) {
			t.Errorf("rule names %s, which go list does not find", name)
		}
	}
}

// TestRulesCatchForbiddenImports feeds the rules fabricated packages, one forbidden arrow
// each, and checks each is reported (and that a clean list passes).
func TestRulesCatchForbiddenImports(t *testing.T) {
	m := func(s string) string { return module + "/" + s }
	clean := []pkg{
		{ImportPath: m("server/master"), Deps: []string{m("server/internal/admin"), m("raftmeta"), "os"}},
		{ImportPath: m("server/worker"), Deps: []string{m("server/internal/admin"), m("tier")}},
		{ImportPath: m("server/lifecycle"), Imports: []string{"fmt", "time", "math/rand/v2", m("internal/base"), m("raftmeta")}},
		{ImportPath: m("tier/policy"), Imports: []string{"errors", m("internal/base")}},
	}
	if v := ruleViolations(clean); len(v) != 0 {
		t.Fatalf("clean packages reported: %v", v)
	}
	for _, c := range []struct {
		name string
		p    pkg
		want string
	}{
		{"master imports worker indirectly", pkg{ImportPath: m("server/master"), Deps: []string{m("server/rpcsrv"), m("server/worker")}}, "server/master depends on server/worker"},
		{"worker imports master", pkg{ImportPath: m("server/worker"), Deps: []string{m("server/master")}}, "server/worker depends on server/master"},
		{"shared code imports a service", pkg{ImportPath: m("server/internal/admin"), Deps: []string{m("server/worker")}}, "server/internal/admin depends on server/worker"},
		{"lifecycle opens files", pkg{ImportPath: m("server/lifecycle"), Imports: []string{"os"}}, "server/lifecycle imports os"},
		{"lifecycle serves HTTP", pkg{ImportPath: m("server/lifecycle"), Imports: []string{"net/http"}}, "server/lifecycle imports net/http"},
		{"policy runs a process", pkg{ImportPath: m("tier/policy"), Imports: []string{"os/exec"}}, "tier/policy imports os/exec"},
		{"policy reads a directory", pkg{ImportPath: m("tier/policy"), Imports: []string{"io/fs"}}, "tier/policy imports io/fs"},
		{"policy calls the kernel", pkg{ImportPath: m("tier/policy"), Imports: []string{"syscall"}}, "tier/policy imports syscall"},
		{"policy imports the engine", pkg{ImportPath: m("tier/policy"), Imports: []string{m("tier")}}, "tier/policy imports tier"},
		{"lifecycle imports a third party", pkg{ImportPath: m("server/lifecycle"), Imports: []string{"github.com/hashicorp/raft"}}, "server/lifecycle imports github.com/hashicorp/raft"},
	} {
		v := ruleViolations(append(slices.Clone(clean), c.p))
		if len(v) != 1 || !strings.Contains(v[0], c.want) {
			t.Errorf("%s: reported %q, want one line with %q", c.name, v, c.want)
		}
	}
}
