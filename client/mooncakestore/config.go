package mooncakestore

// ReplicateConfig controls replica placement for put operations (Mooncake's fields).
type ReplicateConfig struct {
	// ReplicaNum is the number of copies on distinct workers; must be at least 1.
	ReplicaNum int
	// WithSoftPin keeps the object from eviction for 30 minutes (Mooncake's default
	// default_kv_soft_pin_ttl).
	WithSoftPin bool
	// WithHardPin keeps the object from eviction until it is removed.
	WithHardPin bool
	// PreferredSegments names where the first replica should go: a worker's data address
	// (host:port, as /get_all_segments lists them) or id. Only the first is used.
	PreferredSegments []string
}

// DefaultReplicateConfig returns the default configuration (1 replica, no pinning).
func DefaultReplicateConfig() ReplicateConfig {
	return ReplicateConfig{ReplicaNum: 1}
}
