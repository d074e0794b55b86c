package main

import (
	"errors"
	"strings"
	"testing"

	"github.com/mooncake-go/mooncake/internal/base"
)

// FuzzFileConfig feeds arbitrary bytes to the mooncake.json decoder: it never panics, every
// error is typed, and what it accepts satisfies the checks it promises. Seeds are in
// testdata/fuzz/FuzzFileConfig (and below) and run in the normal suite.
func FuzzFileConfig(f *testing.F) {
	for _, s := range []string{
		`{}`,
		`{"global_segment_size": "4GiB", "master_server_address": "a:1,b:2"}`,
		`{"master_server_address": ["a:1", "b:2"], "metadata_server": {"x": 1}}`,
		`{"local_buffer_size": 0, "protocol": "rdma", "device_name": "mlx5_0", "root_fs_dir": "/x", "cluster_id": "c"}`,
		`{"global_segment_size": -1}`,
		`[1, 2]`,
		``,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		fc, err := parseFileConfig(strings.NewReader(string(data)))
		if err != nil {
			if !errors.Is(err, base.ErrInvalidParams) && !errors.Is(err, base.ErrNotSupported) {
				t.Fatalf("untyped error %v for %q", err, data)
			}
			return
		}
		if fc.GlobalSegmentSize != nil && *fc.GlobalSegmentSize <= 0 {
			t.Fatalf("accepted global_segment_size %d", *fc.GlobalSegmentSize)
		}
		if fc.LocalBufferSize != nil && *fc.LocalBufferSize < 0 {
			t.Fatalf("accepted local_buffer_size %d", *fc.LocalBufferSize)
		}
		for _, a := range fc.MasterServerAddress {
			if err := checkHostPort(a, true); err != nil {
				t.Fatalf("accepted master address %q: %v", a, err)
			}
		}
		if fc.ClusterID != "" {
			if err := validateClusterID(fc.ClusterID); err != nil {
				t.Fatalf("accepted cluster id %q", fc.ClusterID)
			}
		}
	})
}

// FuzzPeers: --peers parsing never panics and what it accepts lists this master once.
func FuzzPeers(f *testing.F) {
	f.Add("m1=127.0.0.1:7001,m2=127.0.0.1:7002,m3=127.0.0.1:7003", "m1", "127.0.0.1:7001")
	f.Add("", "m1", "h:1")
	f.Add("m1=h:1,m1=h:1", "m1", "h:1")
	f.Add("=,", "m", "h:0")
	f.Fuzz(func(t *testing.T, s, self, raft string) {
		peers, err := parsePeers(s, self, raft)
		if err != nil {
			return
		}
		n := 0
		seen := map[string]bool{}
		for _, p := range peers {
			if seen[p.ID] {
				t.Fatalf("duplicate %q accepted", p.ID)
			}
			seen[p.ID] = true
			if p.ID == self {
				n++
				if p.RaftAddr != raft {
					t.Fatalf("self with another address accepted")
				}
			}
		}
		if n != 1 {
			t.Fatalf("%q: self listed %d times", s, n)
		}
	})
}
