package base

import (
	"fmt"
	"strconv"
)

// MaxKeyLen is the longest object key in bytes, on the wire and in every store. Mooncake
// leaves keys unbounded; we bound them so every decoder can check a length before allocating.
const MaxKeyLen = 4096

// ValidateKey reports whether key can name an object: 1 to MaxKeyLen bytes. Keys are opaque
// bytes otherwise (they may hold any byte, including NUL), so they survive as map keys and in
// the nvme index unchanged.
//
// Use errors.Is(err, ErrInvalidKey) to check for the error it returns.
func ValidateKey(key string) error {
	switch {
	case len(key) == 0:
		return fmt.Errorf("%w: key is empty", ErrInvalidKey)
	case len(key) > MaxKeyLen:
		return fmt.Errorf("%w: key is %d bytes, the limit is %d", ErrInvalidKey, len(key), MaxKeyLen)
	}
	return nil
}

// Version identifies one incarnation of an object. The master hands out a fresh version at
// PutStart; an upsert gets a new one, so a reader holding an old lookup can only miss, never
// read the new bytes as the old object. Zero means "no version" (or "any version" in a Get).
type Version uint64

// String returns the version in decimal.
func (v Version) String() string { return strconv.FormatUint(uint64(v), 10) }

// WorkerID names a worker (a segment, in Mooncake's words) for its whole life, across restarts:
// the nvme tier lives under root_fs_dir/<cluster_id>/<worker_id>/.
type WorkerID string

// MaxWorkerIDLen bounds worker ids on the wire and in the raft log.
const MaxWorkerIDLen = 255

// ValidateWorkerID reports whether id can name a worker: 1 to MaxWorkerIDLen bytes of
// [A-Za-z0-9._-], so it is safe as a directory name.
func ValidateWorkerID(id WorkerID) error {
	if len(id) == 0 || len(id) > MaxWorkerIDLen {
		return fmt.Errorf("%w: worker id must be 1 to %d bytes, got %d", ErrInvalidParams, MaxWorkerIDLen, len(id))
	}
	if id == "." || id == ".." {
		return fmt.Errorf("%w: worker id %q is not a usable directory name", ErrInvalidParams, string(id))
	}
	for i := 0; i < len(id); i++ {
		c := id[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-') {
			return fmt.Errorf("%w: worker id %q: only letters, digits, '.', '_' and '-' are allowed", ErrInvalidParams, string(id))
		}
	}
	return nil
}

// DefaultClusterID is Mooncake's default cluster id, used when none is configured.
const DefaultClusterID = "mooncake_cluster"
