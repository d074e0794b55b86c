// Package testutil holds helpers for tests only: the leak-checking TestMain every package uses
// (after etcd's testutil.MustTestMainWithLeakDetection) and small shared fixtures.
//
// Only _test.go files may import it. It must never import a mooncake-go package other than
// internal/base.
package testutil
