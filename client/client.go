package client

import (
	"context"
	"fmt"
	"io"

	"github.com/mooncake-go/mooncake/internal/base"
)

// Client talks to a mooncake-go cluster. It is safe for concurrent use; Close releases its
// connections.
type Client struct {
	cfg Config
}

// Connect checks the configuration and finds the leading master. It fails with an error
// wrapping base.ErrUnavailable when no master answers within cfg.DialTimeout.
func Connect(ctx context.Context, cfg Config) (*Client, error) {
	cfg.EnsureDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return nil, fmt.Errorf("%w: the client arrives with the transfer layer", base.ErrNotSupported)
}

// Close releases the client's connections.
func (c *Client) Close() error { return nil }

// Put stores value under key.
func (c *Client) Put(ctx context.Context, key string, value []byte, rc ReplicateConfig) error {
	return base.ErrNotSupported
}

// PutFrom stores size bytes read from r under key.
func (c *Client) PutFrom(ctx context.Context, key string, r io.Reader, size int64, rc ReplicateConfig) error {
	return base.ErrNotSupported
}

// Get returns the object's bytes.
func (c *Client) Get(ctx context.Context, key string) ([]byte, error) {
	return nil, base.ErrNotSupported
}

// GetInto reads the object into buf.
func (c *Client) GetInto(ctx context.Context, key string, buf []byte) (int, error) {
	return 0, base.ErrNotSupported
}

// Remove removes one object.
func (c *Client) Remove(ctx context.Context, key string) error { return base.ErrNotSupported }

// RemoveByRegex removes every object whose key matches re.
func (c *Client) RemoveByRegex(ctx context.Context, re string) (int64, error) {
	return 0, base.ErrNotSupported
}

// RemoveAll removes every object.
func (c *Client) RemoveAll(ctx context.Context) (int64, error) { return 0, base.ErrNotSupported }

// KeyInfo is one entry of List.
type KeyInfo struct {
	Key  string
	Size int64
}

// List returns the keys with the prefix.
func (c *Client) List(ctx context.Context, prefix string) ([]KeyInfo, error) {
	return nil, base.ErrNotSupported
}

// Status returns the cluster status.
func (c *Client) Status(ctx context.Context) (Status, error) { return Status{}, base.ErrNotSupported }
