// Package tier is the worker-local storage engine the worker server calls: put, get, remove,
// pin and list objects held in the DRAM arena (package dram) and, below it, the NVMe tier
// (package nvme). It decides nothing itself: the placement, eviction, spill and promotion
// decisions live in the pure package tier/policy; tier executes them.
//
// tier declares the interfaces it needs from the tiers below; server wires implementations in.
//
// It must never import raftmeta, transfer, server, client or cmd.
package tier
