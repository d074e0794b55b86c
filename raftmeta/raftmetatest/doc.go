// Package raftmetatest runs raftmeta clusters inside one test process: real nodes with real
// TCP transports on 127.0.0.1 (port 0, read back), data under t.TempDir(), timeouts tuned for
// loopback, and helpers to find the leader, shut a node down, restart it from its data dir,
// and cut links (Partition, Disconnect) by wrapping each node's transport. After hashicorp/raft's
// MakeCluster(3, t, nil) and c.Partition(far).
//
// Only tests import it. It imports raftmeta and internal/ only.
package raftmetatest
