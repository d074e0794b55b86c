package benchmarks

import (
	"context"
	"fmt"
	"sync"

	"github.com/mooncake-go/mooncake/internal/base"
)

// MemStore is an in-process map Store: the "no network, no store" reference a workload can run
// against to see the harness's own cost, and the backend of this package's tests.
type MemStore struct {
	mu sync.Mutex // protects m
	m  map[string][]byte
}

// NewMemStore returns an empty MemStore.
func NewMemStore() *MemStore { return &MemStore{m: make(map[string][]byte)} }

// Put copies value into the map.
func (s *MemStore) Put(_ context.Context, key string, value []byte) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.m[key]; ok {
		return fmt.Errorf("%w: %q", base.ErrObjectAlreadyExists, key)
	}
	s.m[key] = append([]byte(nil), value...)
	return nil
}

// Exists reports whether key is in the map.
func (s *MemStore) Exists(_ context.Context, key string) (bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, ok := s.m[key]
	return ok, nil
}

// GetInto copies the value into buf.
func (s *MemStore) GetInto(_ context.Context, key string, buf []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	v, ok := s.m[key]
	if !ok {
		return 0, fmt.Errorf("%w: %q", base.ErrObjectNotFound, key)
	}
	if len(buf) < len(v) {
		return 0, fmt.Errorf("%w: buffer of %d bytes for %d", base.ErrInvalidParams, len(buf), len(v))
	}
	return copy(buf, v), nil
}

// BatchPut puts each value in turn; the first error stops it.
func (s *MemStore) BatchPut(ctx context.Context, keys []string, values [][]byte) error {
	for i, k := range keys {
		if err := s.Put(ctx, k, values[i]); err != nil {
			return err
		}
	}
	return nil
}
