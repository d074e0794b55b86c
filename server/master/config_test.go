package master

import (
	"errors"
	"testing"

	"github.com/mooncake-go/mooncake/internal/base"
	"github.com/mooncake-go/mooncake/server/rpcsrv"
)

func TestMasterConfigDefaults(t *testing.T) {
	c := Config{DataDir: t.TempDir()}
	c.EnsureDefaults()
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	if c.ID != "m1" || c.ClientTTL != DefaultClientTTL || c.WorkerRestartGrace != DefaultWorkerRestartGrace || c.PutTimeout != rpcsrv.DefaultPutTimeout ||
		c.ClientDisconnectGrace != DefaultClientDisconnectGrace ||
		c.RaftAddress != "127.0.0.1:7001" || c.ClusterID != base.DefaultClusterID {
		t.Fatalf("defaults: %+v", c)
	}
	c = Config{DataDir: "x", RPCAddress: "127.0.0.1:0"}
	c.EnsureDefaults()
	if c.RaftAddress != "127.0.0.1:0" {
		t.Fatalf("raft address with rpc port 0: %q", c.RaftAddress)
	}
	bad := func(mut func(*Config)) {
		t.Helper()
		c := Config{DataDir: "x"}
		c.EnsureDefaults()
		mut(&c)
		if err := c.Validate(); !errors.Is(err, base.ErrInvalidParams) {
			t.Fatalf("want ErrInvalidParams, got %v", err)
		}
	}
	bad(func(c *Config) { c.DataDir = "" })
	bad(func(c *Config) { c.RPCAddress = "nope" })
	bad(func(c *Config) { c.EvictionRatio = 1.5 })
	bad(func(c *Config) { c.EvictionHighWatermarkRatio = -1 })
	bad(func(c *Config) { c.ClientTTL = -1 })
	bad(func(c *Config) { c.WorkerRestartGrace = -1 })
	bad(func(c *Config) { c.ClientDisconnectGrace = -1 })
	bad(func(c *Config) { c.MetricsAddress = "9003" })
}
