// Package transfer moves bytes and control messages between clients, masters and workers: one
// framed, versioned binary protocol (docs/protocol.md) over TCP, with pipelining, connection
// pools, striping of large objects, and a Transport interface behind which shared memory, RDMA
// and NVMe-oF will sit.
//
// It must never import dram, nvme, tier, raftmeta, server, client or cmd; only internal/.
package transfer
