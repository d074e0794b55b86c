// Package repotest holds the repository's rules as Go tests, after pebble's TestForbiddenImports
// and tailscale's tstest/deptest and pkgdoc_test.go: the dependency direction of
// design.md section 6, a doc.go with a package comment in every package, and no cgo in the
// default build.
//
// It has no code of its own and must never be imported.
package repotest
