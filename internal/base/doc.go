// Package base defines the vocabulary shared by every mooncake-go package: object keys and
// their limits, object versions, worker ids, the object record (object.go: Object, the one Go
// type of an object's metadata from the client's call through the wire codec to the raft
// command and back; ObjectMeta, its part a worker knows; Placement, a replica's location;
// PutConfig, a put's configuration; KeyVersion), tier and persistence identifiers, human-unit
// byte sizes, copy and move task ids and states (task.go), and the sentinel errors (with
// their wire codes) that callers test with errors.Is, in the one error table (errtable.go)
// that also gives each Mooncake's ErrorCode number.
//
// It plays the role pebble's internal/base plays there: fundamental types used everywhere.
// It owns no state and starts no goroutines.
//
// It must never import any other mooncake-go package: everything else imports it.
package base
