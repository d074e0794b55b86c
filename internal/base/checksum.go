package base

import (
	"hash"

	"github.com/minio/highwayhash"
)

// checksumKey is the fixed HighwayHash key of every checksum in the system. The checksum
// guards against corruption, not tampering, so the key is public and the same everywhere:
// a client, a worker and the nvme tier all compute the same value for the same bytes.
var checksumKey = []byte("mooncake-go:highwayhash:v1:key!!")

// Checksum returns the HighwayHash-64 of p: the checksum stored with every object, sent in
// PutEnd, verified by workers on write and by clients and the nvme tier on read.
func Checksum(p []byte) uint64 { return highwayhash.Sum64(p, checksumKey) }

// NewChecksum returns a streaming hash whose Sum64 equals Checksum of everything written to
// it, for data that arrives in pieces (striped transfers, extent reads).
func NewChecksum() hash.Hash64 {
	h, err := highwayhash.New64(checksumKey)
	if err != nil {
		// Only a key of the wrong length fails, and checksumKey is a constant of 32 bytes.
		panic("base: bad highwayhash key: " + err.Error())
	}
	return h
}
