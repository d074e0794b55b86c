package raftmeta

// Test-only exports: compiled into this package for its tests (package raftmeta_test in this
// directory), never into the production binary.

// DefaultConfig returns a Config with every tunable at its default (ID, addresses, DataDir and
// Peers left empty). The defaults build on raft.DefaultConfig(); each change has its reason on
// the field.
func DefaultConfig() Config {
	var c Config
	c.EnsureDefaults()
	return c
}
