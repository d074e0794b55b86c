// Command mooncake is the one binary of mooncake-go: `mooncake master`, `mooncake worker`,
// `mooncake standalone`, and the client commands put, get, rm, ls, status, bench and
// `mooncake master add|remove|list` (membership of the masters' raft group).
//
// It is the only package that parses flags, environment variables and config files: it reads
// them, and the config table (server/config) declares, registers and checks every setting;
// it composes them into master.Config / worker.Config (built through server.Start) and client.Config (what needs
// no composing passes by name, config.Pass), and handles signals
// (SIGTERM and SIGINT cancel the command's context: servers shut down gracefully, a worker
// spilling its DRAM objects to NVMe first).
//
// Files: main.go (root command, error printing, exit codes), config.go (mooncake.json from
// MOONCAKE_CONFIG_PATH), serve.go (composing the server settings from the table's flags),
// compat.go and compat_flags.go (Mooncake's binary names and flag mappings),
// serverconfig.go (connection limits and KV events into the server's types), run_servers.go (starting
// and stopping the servers), clientcmds.go (put, get, rm, ls, status), members.go (master add,
// remove, list), bench.go (the objects workload of bench), bench_kvcache.go and
// bench_kvcache_cmd.go (its kvcache workload: a model's KV-cache chunks for prompts with
// shared prefixes). The end-to-end tests (e2e_*_test.go) build this binary and run clusters of it as processes.
//
// Precedence: a flag given on the command line, then (client commands) $MOONCAKE_MASTER, then
// the config file, then the default. Every error is printed as one line, `mooncake: <error>`,
// with exit status 2 for bad flags, arguments or configuration and 1 for failures at run time.
// docs/operations.md lists every flag.
package main
