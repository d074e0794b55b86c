// Package repotest holds the repository's rules as Go tests, after pebble's TestForbiddenImports
// and tailscale's tstest/deptest and pkgdoc_test.go: the dependency direction of
// design.md section 6 (rooms, and the arrows inside server/: master and worker apart, the
// decision packages without I/O: rules_test.go), a doc.go with a package comment in every package, no cgo in the
// default build, and one error table: the C header's codes, Python's ErrorCode and the code
// tables in docs/ agree with internal/base's; Python's ctypes declarations agree with the C
// header's prototypes (as gcc reads them); and the room sizes of style.md, no non-test file past
// 800 lines and no function past 100 (size_test.go).
//
// It has no code of its own and must never be imported.
package repotest
