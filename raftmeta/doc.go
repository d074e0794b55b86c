// Package raftmeta is the masters' replicated metadata: a state machine of objects, replicas,
// workers (segments) and master addresses, replicated by hashicorp/raft with raft-boltdb
// storage, file snapshots and a TCP transport, plus membership changes.
//
// It must never import dram, nvme, tier, transfer, server, client or cmd; only internal/.
package raftmeta
