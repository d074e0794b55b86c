package server

import (
	"errors"
	"testing"

	"github.com/mooncake-go/mooncake/internal/base"
)

func TestMasterConfigDefaults(t *testing.T) {
	c := MasterConfig{DataDir: t.TempDir()}
	c.EnsureDefaults()
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	if c.ID != "m1" || c.ClientTTL != DefaultClientTTL || c.WorkerRestartGrace != DefaultWorkerRestartGrace || c.PutTimeout != DefaultPutTimeout ||
		c.ClientDisconnectGrace != DefaultClientDisconnectGrace ||
		c.RaftAddress != "127.0.0.1:7001" || c.ClusterID != base.DefaultClusterID {
		t.Fatalf("defaults: %+v", c)
	}
	c = MasterConfig{DataDir: "x", RPCAddress: "127.0.0.1:0"}
	c.EnsureDefaults()
	if c.RaftAddress != "127.0.0.1:0" {
		t.Fatalf("raft address with rpc port 0: %q", c.RaftAddress)
	}
	bad := func(mut func(*MasterConfig)) {
		t.Helper()
		c := MasterConfig{DataDir: "x"}
		c.EnsureDefaults()
		mut(&c)
		if err := c.Validate(); !errors.Is(err, base.ErrInvalidParams) {
			t.Fatalf("want ErrInvalidParams, got %v", err)
		}
	}
	bad(func(c *MasterConfig) { c.DataDir = "" })
	bad(func(c *MasterConfig) { c.RPCAddress = "nope" })
	bad(func(c *MasterConfig) { c.EvictionRatio = 1.5 })
	bad(func(c *MasterConfig) { c.EvictionHighWatermarkRatio = -1 })
	bad(func(c *MasterConfig) { c.ClientTTL = -1 })
	bad(func(c *MasterConfig) { c.WorkerRestartGrace = -1 })
	bad(func(c *MasterConfig) { c.ClientDisconnectGrace = -1 })
	bad(func(c *MasterConfig) { c.MetricsAddress = "9003" })
}

func TestWorkerConfigDefaults(t *testing.T) {
	c := WorkerConfig{MasterAddresses: []string{"127.0.0.1:50051"}}
	c.EnsureDefaults()
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	if c.Persistence != base.PersistenceCache || c.GlobalSegmentSize != DefaultGlobalSegmentSize || c.Protocol != "tcp" {
		t.Fatalf("defaults: %+v", c)
	}
	c = WorkerConfig{MasterAddresses: []string{"127.0.0.1:50051"}, RootFSDir: "/x"}
	c.EnsureDefaults()
	if c.Persistence != base.PersistenceSpill {
		t.Fatalf("persistence with root_fs_dir: %v", c.Persistence)
	}
	bad := func(target error, mut func(*WorkerConfig)) {
		t.Helper()
		c := WorkerConfig{MasterAddresses: []string{"127.0.0.1:50051"}}
		c.EnsureDefaults()
		mut(&c)
		if err := c.Validate(); !errors.Is(err, target) {
			t.Fatalf("want %v, got %v", target, err)
		}
	}
	bad(base.ErrInvalidParams, func(c *WorkerConfig) { c.MasterAddresses = nil })
	bad(base.ErrInvalidParams, func(c *WorkerConfig) { c.MasterAddresses = []string{"host"} })
	bad(base.ErrInvalidParams, func(c *WorkerConfig) { c.WorkerID = "a/b" })
	bad(base.ErrInvalidParams, func(c *WorkerConfig) { c.ClusterID = "../x" })
	bad(base.ErrInvalidParams, func(c *WorkerConfig) { c.GlobalSegmentSize = -1 })
	bad(base.ErrInvalidParams, func(c *WorkerConfig) { c.Persistence = base.PersistenceDurable })
	bad(base.ErrNotSupported, func(c *WorkerConfig) { c.Protocol = "rdma" })
}
