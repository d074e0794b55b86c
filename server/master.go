package server

import (
	"context"
	"fmt"

	"github.com/mooncake-go/mooncake/internal/base"
)

// Master is one master: a raft node holding the metadata and the RPC service over it.
type Master struct{}

// NewMaster starts a master: it opens (or bootstraps) raft under cfg.DataDir, listens on
// cfg.RPCAddress and cfg.MetricsAddress, and serves until Shutdown.
func NewMaster(cfg MasterConfig) (*Master, error) {
	cfg.EnsureDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return nil, fmt.Errorf("%w: server: master not wired yet", base.ErrNotSupported)
}

// Addr returns the bound RPC address.
func (m *Master) Addr() string { return "" }

// MetricsAddr returns the bound metrics address, "" when there is none.
func (m *Master) MetricsAddr() string { return "" }

// Shutdown stops the master.
func (m *Master) Shutdown(ctx context.Context) error { return nil }
