package worker

import (
	"errors"
	"testing"

	"github.com/mooncake-go/mooncake/internal/base"
)

func TestWorkerConfigDefaults(t *testing.T) {
	c := Config{MasterAddresses: []string{"127.0.0.1:50051"}}
	c.EnsureDefaults()
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	if c.Persistence != base.PersistenceCache || c.GlobalSegmentSize != DefaultGlobalSegmentSize || c.Protocol != "tcp" {
		t.Fatalf("defaults: %+v", c)
	}
	c = Config{MasterAddresses: []string{"127.0.0.1:50051"}, RootFSDir: "/x"}
	c.EnsureDefaults()
	if c.Persistence != base.PersistenceSpill {
		t.Fatalf("persistence with root_fs_dir: %v", c.Persistence)
	}
	bad := func(target error, mut func(*Config)) {
		t.Helper()
		c := Config{MasterAddresses: []string{"127.0.0.1:50051"}}
		c.EnsureDefaults()
		mut(&c)
		if err := c.Validate(); !errors.Is(err, target) {
			t.Fatalf("want %v, got %v", target, err)
		}
	}
	bad(base.ErrInvalidParams, func(c *Config) { c.MasterAddresses = nil })
	bad(base.ErrInvalidParams, func(c *Config) { c.MasterAddresses = []string{"host"} })
	bad(base.ErrInvalidParams, func(c *Config) { c.WorkerID = "a/b" })
	bad(base.ErrInvalidParams, func(c *Config) { c.ClusterID = "../x" })
	bad(base.ErrInvalidParams, func(c *Config) { c.GlobalSegmentSize = -1 })
	bad(base.ErrInvalidParams, func(c *Config) { c.Persistence = base.PersistenceDurable })
	bad(base.ErrNotSupported, func(c *Config) { c.Protocol = "rdma" })
}
