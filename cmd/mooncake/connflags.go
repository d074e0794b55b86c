package main

import (
	"fmt"
	"time"

	"github.com/spf13/pflag"

	"github.com/mooncake-go/mooncake/internal/base"
	"github.com/mooncake-go/mooncake/server/rpcsrv"
	"github.com/mooncake-go/mooncake/transfer"
)

// connFlags are the connection limits of a server's RPC port (--conn_idle_timeout,
// --conn_frame_timeout, --max_conns_per_peer): one set of flags for the master and the worker,
// registered once per command (standalone's two servers share the worker's).
type connFlags struct {
	idle, frame time.Duration
	perPeer     int
}

func (f *connFlags) register(fs *pflag.FlagSet) {
	fs.DurationVar(&f.idle, "conn_idle_timeout", transfer.DefaultIdleTimeout, "close a client connection with no request for this long (at least 100ms; negative: never)")
	fs.DurationVar(&f.frame, "conn_frame_timeout", transfer.DefaultFrameTimeout, "close a client connection whose request stops arriving: each 64 KiB of it must arrive within this long (negative: never)")
	fs.IntVar(&f.perPeer, "max_conns_per_peer", transfer.DefaultMaxConnsPerPeer, "most client connections open from one IP address (negative: no limit)")
}

// resolve validates the flags; 0 is refused because it would read as "the default" below
// (negative turns a limit off).
func (f *connFlags) resolve() (rpcsrv.ConnLimits, error) {
	l := rpcsrv.ConnLimits{IdleTimeout: f.idle, FrameTimeout: f.frame, MaxConnsPerPeer: f.perPeer}
	if l.IdleTimeout == 0 || l.FrameTimeout == 0 || l.MaxConnsPerPeer == 0 {
		return l, fmt.Errorf("%w: --conn_idle_timeout, --conn_frame_timeout and --max_conns_per_peer must not be 0 (negative: no limit)", base.ErrInvalidParams)
	}
	if err := l.Validate(); err != nil {
		return l, fmt.Errorf("--conn_idle_timeout: %w", err)
	}
	return l, nil
}
