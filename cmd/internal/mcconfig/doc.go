// Package mcconfig reads what a Mooncake deployment configures outside the command line: the
// mooncake.json file MOONCAKE_CONFIG_PATH names (Mooncake's keys, unknown keys refused) and
// master address lists ("host:port,host:port", $MOONCAKE_MASTER). The mooncake binary and the
// C library (cmd/libmooncake_store) share it, so both resolve a configuration the same way.
//
// It must never import server, client or anything outside internal/.
package mcconfig
