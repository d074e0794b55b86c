// Package mcconfig holds what the mooncake binary and the C library (cmd/libmooncake_store)
// both read from a Mooncake deployment's configuration outside the command line: master
// address lists ("host:port,host:port", $MOONCAKE_MASTER, the master_server_address key),
// cluster ids, and the client keys of the mooncake.json MOONCAKE_CONFIG_PATH names
// (LoadClient). The CLI's full reading of that file (every Mooncake key, unknown keys
// refused, notices) stays in cmd/mooncake.
//
// It must never import server, client or anything outside internal/.
package mcconfig
