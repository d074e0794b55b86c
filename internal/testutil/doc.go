// Package testutil holds helpers for tests only: the leak-checking TestMain every package uses
// (after etcd's testutil.MustTestMainWithLeakDetection) and small shared fixtures: building and
// starting the mooncake binary (proc.go), builds shared by a package's tests (shared.go),
// issue 18's check that clients may come and go, run from Python, C and Go (churn.go), and the
// one deadline-bounded poll for conditions no event reaches a test from, with a paced writer
// for slow-peer tests (wait.go), and a proxy that cuts a connection instead of passing on a
// chosen answer, for tests of resends (cutproxy.go).
//
// Only _test.go files may import it. It must never import a mooncake-go package other than
// internal/base.
package testutil
