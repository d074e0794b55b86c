// Package benchmarks holds workloads that run on any backend (after hashicorp raft's
// bench/bench.go) and the harness that measures mooncake-go beside physical baselines
// (loopback TCP, memcpy, sequential disk I/O) in the same run.
//
// It must never import cmd.
package benchmarks
