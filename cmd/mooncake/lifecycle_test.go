package main

import (
	"strings"
	"testing"
)

// TestWorkerCmdsBadInput: `worker drain` and `worker retire` refuse bad input with one line
// and the usage exit code, before anything is sent.
func TestWorkerCmdsBadInput(t *testing.T) {
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
	f("--worker_id is required", "worker", "drain")
	f("--worker_id is required", "worker", "drain", "--cancel")
	f(`--worker_id "w 1"`, "worker", "drain", "--worker_id", "w 1")
	f("want no arguments", "worker", "drain", "--worker_id", "w1", "extra")
	f("unknown flag: --global_segment_size", "worker", "drain", "--worker_id", "w1", "--global_segment_size", "1GiB")
	f("--worker_id is required", "worker", "retire")
	f(`--worker_id "../w"`, "worker", "retire", "--worker_id", "../w")
}
