package main

import (
	"fmt"

	"github.com/mooncake-go/mooncake/server/config"
	"github.com/mooncake-go/mooncake/server/master"
	"github.com/mooncake-go/mooncake/server/rpcsrv"
)

// connLimits turns the table's connection limits (--conn_idle_timeout, --conn_frame_timeout,
// --max_conns_per_peer, each already checked not to be 0) into the server's, which checks
// what the transfer server would refuse.
func connLimits(c config.Conns) (rpcsrv.ConnLimits, error) {
	l := rpcsrv.ConnLimits{IdleTimeout: c.IdleTimeout, FrameTimeout: c.FrameTimeout, MaxConnsPerPeer: c.MaxConnsPerPeer}
	if err := l.Validate(); err != nil {
		return l, fmt.Errorf("--conn_idle_timeout: %w", err)
	}
	return l, nil
}

// kvEventsConfig turns the table's kv_events_* settings into the server's publisher config
// and checks them together (--enable_kv_events needs an endpoint and a backend id).
func kvEventsConfig(k config.KVEvents) (master.KVEventsConfig, error) {
	c := master.KVEventsConfig{Enabled: k.Enabled, BindEndpoint: k.BindEndpoint, BackendID: k.BackendID, ModelName: k.ModelName,
		BlockSize: k.BlockSize, LoraName: k.LoraName, AdditionalSalt: k.AdditionalSalt, DPRank: k.DPRank,
		EmitObjectKey: k.EmitObjectKey, EmitLegacyCompat: k.EmitLegacyCompat}
	if err := c.Validate(); err != nil {
		return c, usagef("%v", err)
	}
	return c, nil
}
