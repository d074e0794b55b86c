package mcconfig

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/mooncake-go/mooncake/internal/base"
)

func TestLoadClient(t *testing.T) {
	dir := t.TempDir()
	f := func(body string) (*ClientFile, error) {
		t.Helper()
		p := filepath.Join(dir, "mooncake.json")
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		return LoadClient(func(k string) string {
			if k == EnvConfigPath {
				return p
			}
			return ""
		})
	}
	// Other keys (Mooncake's, SGLang's) are left alone; a list or a string of masters works.
	cf, err := f(`{"master_server_address": "a:1, b:2", "cluster_id": "c1", "local_hostname": "x", "whatever": [1]}`)
	if err != nil || !slices.Equal(cf.MasterServerAddress, []string{"a:1", "b:2"}) || cf.ClusterID != "c1" || cf.Path == "" {
		t.Fatalf("%+v %v", cf, err)
	}
	if cf, err := f(`{"master_server_address": ["a:1", "b:2,c:3"]}`); err != nil || len(cf.MasterServerAddress) != 3 {
		t.Fatalf("%+v %v", cf, err)
	}
	for _, bad := range []string{`{"master_server_address": "nohost"}`, `{"cluster_id": "a/b"}`, `[1]`, `{`} {
		if _, err := f(bad); !errors.Is(err, base.ErrInvalidParams) {
			t.Errorf("%s: %v", bad, err)
		}
	}
	if _, err := f(`{"master_server_address": "etcd://e:2379"}`); !errors.Is(err, base.ErrNotSupported) {
		t.Errorf("etcd: %v", err)
	}
	if cf, err := LoadClient(func(string) string { return "" }); err != nil || cf.Path != "" || len(cf.MasterServerAddress) != 0 {
		t.Fatalf("unset: %+v %v", cf, err)
	}
	if _, err := LoadClient(func(string) string { return filepath.Join(dir, "missing.json") }); !errors.Is(err, base.ErrInvalidParams) {
		t.Fatalf("missing file: %v", err)
	}
}
