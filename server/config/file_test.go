package config

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/mooncake-go/mooncake/internal/base"
)

// TestParseFile: keys from the table, checked by it; unknown keys refused for the CLI and
// left alone for the C library; the keys without effect listed with why.
func TestParseFile(t *testing.T) {
	f, err := ParseFile([]byte(`{"global_segment_size": "4GB", "Master_Server_Address": ["a:1", "b:2"], "tenant_id": "t",
		"mode": "x"}`), KindFile)
	if err != nil {
		t.Fatal(err)
	}
	if *f.GlobalSegmentSize != 4<<30 || !slices.Equal(f.MasterServerAddress, AddressList{"a:1", "b:2"}) {
		t.Fatalf("%+v", f)
	}
	if got := f.NoEffect(); len(got) != 2 || got[0][0] != "tenant_id" || got[1][0] != "mode" || got[1][1] == "" {
		t.Fatalf("no effect: %q", got)
	}
	bad := func(data, want string) {
		t.Helper()
		_, err := ParseFile([]byte(data), KindFile)
		if err == nil || !strings.Contains(err.Error(), want) || !errors.Is(err, base.ErrInvalidParams) {
			t.Fatalf("%s: %v, want %q", data, err, want)
		}
	}
	bad(`{"global_segment_size": 0}`, "global_segment_size must be positive")
	bad(`{"colour": 1}`, `unknown field "colour"`)
	bad(`{"protocol": 5}`, `key "protocol": want string, got a JSON number`)
	bad(`{"cluster_id": "a/b"}`, "cluster id")
	bad(`{} {}`, "data after")
	bad(`[1]`, "JSON object")
	// The C library reads its keys only, and leaves SGLang's and typos alone.
	f, err = ParseFile([]byte(`{"cluster_id": "c1", "colour": 1, "global_segment_size": "lots"}`), KindEmbedded)
	if err != nil || f.ClusterID != "c1" || f.GlobalSegmentSize != nil {
		t.Fatalf("%+v %v", f, err)
	}
}

// TestApplyEnv: variables fill what the file leaves unset, each parsed by its type and
// checked by its setting's check; those without effect are returned by name.
func TestApplyEnv(t *testing.T) {
	env := map[string]string{"MOONCAKE_GLOBAL_SEGMENT_SIZE": "2GB", "MOONCAKE_LOCAL_HOSTNAME": "h:7", "MOONCAKE_PROTOCOL": "rdma",
		"MOONCAKE_OSS_ACCESS_KEY_SECRET": "s", "MOONCAKE_OFFLOAD_ENABLED": "yes", "MOONCAKE_MASTER": "a:1,b:2", "MOONCAKE_LOCAL_BUFFER_SIZE": "x"}
	f, err := ParseFile([]byte(`{"protocol": "tcp"}`), KindFile)
	if err != nil {
		t.Fatal(err)
	}
	ne, err := ApplyEnv(f, func(k string) string { return env[k] })
	if err != nil {
		t.Fatal(err)
	}
	if *f.GlobalSegmentSize != 2<<30 || f.LocalHostname != "h" || f.Protocol != "tcp" || !*f.EnableSSDOffload || len(f.EnvMasters) != 2 ||
		f.LocalBufferSize != nil {
		t.Fatalf("%+v", f)
	}
	if len(ne) != 1 || ne[0][0] != "MOONCAKE_OSS_ACCESS_KEY_SECRET" {
		t.Fatalf("no effect: %q", ne)
	}
	for k, want := range map[string]string{"MOONCAKE_GLOBAL_SEGMENT_SIZE": "must be positive", "MOONCAKE_OFFLOAD_ENABLED": "want true or false",
		"MOONCAKE_MASTER": "$MOONCAKE_MASTER", "MOONCAKE_LOCAL_HOSTNAME": "is not a host name"} {
		v := map[string]string{"MOONCAKE_GLOBAL_SEGMENT_SIZE": "0", "MOONCAKE_OFFLOAD_ENABLED": "maybe", "MOONCAKE_MASTER": "nocolon",
			"MOONCAKE_LOCAL_HOSTNAME": "a b"}[k]
		_, err := ApplyEnv(&File{}, func(n string) string {
			if n == k {
				return v
			}
			return ""
		})
		if err == nil || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), k) {
			t.Errorf("$%s=%q: %v, want %q", k, v, err, want)
		}
	}
}

// FuzzFile feeds arbitrary bytes to the table's mooncake.json parser and one arbitrary
// variable to ApplyEnv: they never panic, every error is typed, and what they accept passes
// the table's checks.
func FuzzFile(f *testing.F) {
	f.Add([]byte(`{"global_segment_size": "4GiB", "master_server_address": "a:1,b:2"}`), "MOONCAKE_LOCAL_HOSTNAME", "h:1")
	f.Add([]byte(`{"local_buffer_size": 0, "protocol": "rdma", "device_name": "mlx5_0", "cluster_id": "c"}`), "MOONCAKE_GLOBAL_SEGMENT_SIZE", "-1")
	f.Add([]byte(`{"metadata_server": {"x": 1}, "enable_ssd_offload": true}`), "MOONCAKE_OFFLOAD_ENABLED", "on")
	f.Add([]byte(`{"global_segment_size": -1}`), "MOONCAKE_MASTER", "etcd://x")
	f.Add([]byte(`[`), "", "")
	f.Fuzz(func(t *testing.T, data []byte, name, value string) {
		for _, kind := range []Kind{KindFile, KindEmbedded} {
			file, err := ParseFile(data, kind)
			if err == nil {
				_, err = ApplyEnv(file, func(k string) string {
					if k == name {
						return value
					}
					return ""
				})
			}
			if err != nil {
				if !errors.Is(err, base.ErrInvalidParams) && !errors.Is(err, base.ErrNotSupported) {
					t.Fatalf("untyped error %v", err)
				}
				continue
			}
			if b := file.GlobalSegmentSize; b != nil && *b <= 0 {
				t.Fatalf("accepted global_segment_size %d", *b)
			}
			if b := file.LocalBufferSize; b != nil && *b < 0 {
				t.Fatalf("accepted local_buffer_size %d", *b)
			}
			for _, a := range append(file.MasterServerAddress, file.EnvMasters...) {
				if CheckHostPort(a, true) != nil {
					t.Fatalf("accepted master address %q", a)
				}
			}
			if file.ClusterID != "" && ValidateClusterID(file.ClusterID) != nil {
				t.Fatalf("accepted cluster id %q", file.ClusterID)
			}
			if strings.ContainsAny(file.LocalHostname, "/ ") {
				t.Fatalf("accepted local_hostname %q", file.LocalHostname)
			}
		}
	})
}
