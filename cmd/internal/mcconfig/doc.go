// Package mcconfig is what the mooncake binary and the C library (cmd/libmooncake_store)
// both read from a Mooncake deployment's configuration outside the command line: the client
// keys of the mooncake.json MOONCAKE_CONFIG_PATH names (LoadClient), and the master address
// lists of $MOONCAKE_MASTER. The keys, variables, their parsing and their checks are the
// config table's (server/config); this package reads the file and keeps the C library's
// leniency (keys other than the client's are left alone).
//
// It must never import server (other than server/config), client or anything outside
// internal/.
package mcconfig
