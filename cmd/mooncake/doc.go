// Command mooncake is the one binary of mooncake-go: `mooncake master`, `mooncake worker`,
// `mooncake standalone`, and the client commands put, get, rm, ls, status and bench.
//
// It is the only package that parses flags, environment variables and config files; it turns
// them into server.Config and client options, and handles signals.
package main
