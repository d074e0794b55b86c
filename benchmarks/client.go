package benchmarks

import (
	"context"
	"errors"

	"github.com/mooncake-go/mooncake/client"
)

// ClientStore runs workloads through a mooncake-go client.
type ClientStore struct {
	C  *client.Client
	RC client.ReplicateConfig
}

// Put stores value with the store's replicate config.
func (s ClientStore) Put(ctx context.Context, key string, value []byte) error {
	return s.C.Put(ctx, key, value, s.RC)
}

// GetInto reads the object into buf.
func (s ClientStore) GetInto(ctx context.Context, key string, buf []byte) (int, error) {
	return s.C.GetInto(ctx, key, buf)
}

// Exists reports whether key is stored.
func (s ClientStore) Exists(ctx context.Context, key string) (bool, error) {
	return s.C.Exists(ctx, key)
}

// BatchPut stores the values in one client BatchPut; the first item's error is returned.
func (s ClientStore) BatchPut(ctx context.Context, keys []string, values [][]byte) error {
	return errors.Join(s.C.BatchPut(ctx, keys, values, s.RC)...)
}
