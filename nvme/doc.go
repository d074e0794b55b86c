// Package nvme is the worker's persistent tier under root_fs_dir/<cluster_id>/<worker_id>/: a
// Pebble DB as the index (and for small values), large values in append-only extent files, lz4
// where it pays, a HighwayHash checksum on every stored byte, recovery on open and garbage
// collection of extents.
//
// It must never import dram, tier, raftmeta, transfer, server, client or cmd; only internal/.
package nvme
