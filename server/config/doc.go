// Package config is the one declaration of every setting a mooncake process takes: each
// flag of `mooncake master`, `worker` and `standalone`, each flag of Mooncake's
// mooncake_master and mooncake_client (with glog's), and the defaults of the Go API
// (server.MasterConfig, server.WorkerConfig) that no flag sets. A Setting (table.go) names
// the flag, the process kinds that take it, its Mooncake spellings (Mooncake's flag with its
// gflags type and default, the mooncake.json key, the MOONCAKE_* variables), its unit, its
// default, its check and its help, and either the field of Master or Worker it fills or why
// it has no effect here.
//
// Everything else is derived from the table: the pflag registration of each command
// (Register), the defaults of the server's configs (MasterDefaults, WorkerDefaults), the
// checks of flag, file, environment and Go API values (Check, Validate), the "accepted, no
// effect here" notices, and docs/config.md's generated tables (Docs). Adding a setting is
// one Setting plus the field that receives it.
//
// It owns no I/O: callers read files and the environment and hand it bytes and strings.
// It must never import server (server imports it), client or cmd.
package config
