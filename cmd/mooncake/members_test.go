package main

import (
	"io"
	"strings"
	"testing"

	"github.com/spf13/pflag"
)

// TestMasterCmdsBadInput: the membership commands refuse bad input with one line on stderr and
// exit code 2 before they connect to anything.
func TestMasterCmdsBadInput(t *testing.T) {
	dir := t.TempDir()
	f := func(wantSub string, args ...string) {
		t.Helper()
		code, stdout, stderr := runCLI(t, nil, "", args...)
		if code != exitUsage {
			t.Fatalf("%v: exit %d, want %d (stdout %q, stderr %q)", args, code, exitUsage, stdout, stderr)
		}
		if strings.Count(stderr, "\n") != 1 || !strings.HasPrefix(stderr, "mooncake: ") || !strings.Contains(stderr, wantSub) {
			t.Fatalf("%v: stderr %q, want one line containing %q", args, stderr, wantSub)
		}
	}
	f("--id is required", "master", "add", "--raft_address", "127.0.0.1:7004")
	f(`--id "m 4"`, "master", "add", "--id", "m 4", "--raft_address", "127.0.0.1:7004")
	f("--raft_address is required", "master", "add", "--id", "m4")
	f("want host:port", "master", "add", "--id", "m4", "--raft_address", "nocolon")
	f("bad port", "master", "add", "--id", "m4", "--raft_address", "127.0.0.1:0")
	f("--rpc_address", "master", "add", "--id", "m4", "--raft_address", "127.0.0.1:7004", "--rpc_address", "h:99999")
	f("--id is required", "master", "remove")
	f(`--id "../m3"`, "master", "remove", "--id", "../m3")
	f("want no arguments", "master", "list", "extra")
	f("unknown flag: --raft_address", "master", "list", "--raft_address", "127.0.0.1:7004")
	// The master itself: --join excludes --peers and --peer_rpc_addresses.
	f("exclude each other", "master", "--id", "m4", "--data_dir", dir, "--raft_address", "127.0.0.1:7004", "--join",
		"--peers", "m4=127.0.0.1:7004")
	f("exclude each other", "master", "--id", "m4", "--data_dir", dir, "--raft_address", "127.0.0.1:7004", "--join",
		"--peer_rpc_addresses", "m4=127.0.0.1:50054")
	f("--data_dir is required", "master", "--id", "m4", "--join")
}

// TestJoinSettings: --join gives a master config with Join and no peers (nothing to
// bootstrap); without it a master alone bootstraps itself (no peers, no Join).
func TestJoinSettings(t *testing.T) {
	e := env{stderr: io.Discard, logLevel: "info"}
	resolve := func(args ...string) masterSettings {
		t.Helper()
		var f masterFlags
		fs := pflag.NewFlagSet("master", pflag.ContinueOnError)
		f.register(fs, false)
		if err := fs.Parse(args); err != nil {
			t.Fatal(err)
		}
		s, err := f.resolve(fs, &fileConfig{}, false)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	base := []string{"--id", "m4", "--data_dir", "/d", "--rpc_address", "127.0.0.1:50054", "--raft_address", "127.0.0.1:7004"}
	s := resolve(append(base, "--join")...)
	if cfg := e.masterConfig(s); !s.Join || !cfg.Join || len(cfg.Peers) != 0 || cfg.ID != "m4" || cfg.RaftAddress != "127.0.0.1:7004" {
		t.Fatalf("--join: settings %+v, config Join=%v Peers=%v", s, cfg.Join, cfg.Peers)
	}
	s = resolve(base...)
	if cfg := e.masterConfig(s); s.Join || cfg.Join || len(cfg.Peers) != 0 {
		t.Fatalf("no --join: settings %+v, config Join=%v Peers=%v", s, cfg.Join, cfg.Peers)
	}
}
