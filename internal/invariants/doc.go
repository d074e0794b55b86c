// Package invariants switches expensive self-checks and bug assertions on and off with the
// build tag "invariants": `go test -tags invariants` (the default test command) turns them on,
// a release build leaves them off and pays nothing for them.
//
// After pebble's internal/invariants: AssertionFailedf "panics in invariants.Enabled builds. It
// should only be used when it indicates a bug." Use it for double free, refcount underflow,
// bad arena offsets; never for bad input from a caller, which gets a typed error.
//
// It must never import any other mooncake-go package.
package invariants
