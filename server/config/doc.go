// Package config is the one declaration of every setting a mooncake process takes: each
// flag of `mooncake master`, `worker` and `standalone`, each flag of Mooncake's
// mooncake_master, mooncake_client (with glog's) and mooncake_http_metadata_server, each
// mooncake.json key and MOONCAKE_* variable, and the defaults of the Go API
// (master.Config, worker.Config) that no flag sets. A Setting (setting.go; the
// table is table.go) names the flag, the process kinds that take it, its Mooncake spellings
// (Mooncake's flag with its gflags type and default, the mooncake.json key, the MOONCAKE_*
// variables), its unit, its default, its check and its help, and either the field of Master,
// Worker or File it fills or why it has no effect here. For example:
//
//	{Name: "client_ttl", Kinds: masterAll, Unit: "s", Default: 10 * time.Second, Check: positive,
//		Help:     "a worker silent this long is marked dead and its replicas dropped; ...",
//		Mooncake: mm("int64", "10", "", "seconds a silent worker stays alive ..."),
//		Master:   func(m *Master) any { return &m.ClientTTL }},
//
// Everything else is derived from the table:
//
//  1. the flags of each command, their --help and defaults: Register; the checks: Validate
//     and Check (the one place each rule is written; the server's Validate, the file, the
//     variables and the C library call the same); the "accepted, no effect here" lines of
//     Mooncake's flags: NoEffect;
//  2. mooncake.json and the MOONCAKE_* variables: ParseFile (all keys for the CLI, the C
//     library's only for it) and ApplyEnv; File.NoEffect;
//  3. the defaults of the server's configs: MasterDefaults, WorkerDefaults (server's
//     EnsureDefaults reads them; no other package keeps a default of its own for these);
//  4. the hand-over from flags to master.Config / WorkerConfig by field name (Pass) and
//     the effective-config log line (LogAttrs);
//  5. docs/config.md's generated tables: SettingsDocs, MooncakeFlagDocs, EnvDocs, FileDocs.
//
// Adding a setting is one Setting plus the field that receives it.
//
// It does no I/O: callers read files and the environment and hand it bytes and a getenv.
// It must never import server (server imports it), client or cmd.
package config
