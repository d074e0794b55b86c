package base

import "fmt"

// Tier identifies where a worker holds an object's bytes.
type Tier uint8

const (
	// TierNone means the object is not held (or the tier is unknown).
	TierNone Tier = iota
	// TierDRAM is the worker's off-heap DRAM arena.
	TierDRAM
	// TierNVMe is the worker's NVMe tier under root_fs_dir.
	TierNVMe
)

// String returns "dram", "nvme" or "none".
func (t Tier) String() string {
	switch t {
	case TierDRAM:
		return "dram"
	case TierNVMe:
		return "nvme"
	default:
		return "none"
	}
}

// Persistence says what happens to an object when DRAM needs its room, and when a put is
// acknowledged. It is a worker default (--persistence) with a per-put override.
type Persistence uint8

const (
	// PersistenceDefault means "use the worker's default"; it is never a worker's own mode.
	PersistenceDefault Persistence = iota
	// PersistenceCache drops evicted objects: DRAM is a cache and nothing survives a restart.
	PersistenceCache
	// PersistenceSpill moves evicted objects to NVMe (the default worker mode).
	PersistenceSpill
	// PersistenceDurable acknowledges a put only once its bytes are durable on NVMe.
	PersistenceDurable
)

// String returns the mode's flag spelling ("cache", "spill", "durable", or "default").
func (p Persistence) String() string {
	switch p {
	case PersistenceCache:
		return "cache"
	case PersistenceSpill:
		return "spill"
	case PersistenceDurable:
		return "durable"
	default:
		return "default"
	}
}

// ParsePersistence parses a mode as spelled by String. The empty string and "default" give
// PersistenceDefault.
func ParsePersistence(s string) (Persistence, error) {
	switch s {
	case "", "default":
		return PersistenceDefault, nil
	case "cache":
		return PersistenceCache, nil
	case "spill":
		return PersistenceSpill, nil
	case "durable":
		return PersistenceDurable, nil
	}
	return 0, fmt.Errorf("%w: unknown persistence mode %q (want cache, spill or durable)", ErrInvalidParams, s)
}
