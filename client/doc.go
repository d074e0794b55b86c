// Package client is the Go API applications use to store and fetch objects: it asks a master
// where an object lives, then moves the bytes straight to and from workers over package
// transfer. It is the one package of this module with a stable public API.
//
// It must never import server, raftmeta, tier, dram, nvme or cmd.
package client
