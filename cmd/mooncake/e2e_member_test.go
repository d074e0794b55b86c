package main

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mooncake-go/mooncake/client"
	"github.com/mooncake-go/mooncake/internal/testutil"
)

// TestReplaceDeadMaster is docs/operations.md "Replacing a master", as processes: three
// masters and a worker; SIGKILL m3; `mooncake master remove --id m3`; start m4 with --join;
// `mooncake master add --id m4 ...`; puts still succeed, m4 catches up, `mooncake status` and
// `mooncake master list` show m4 and not m3. Bad input gets one line and a non-zero exit.
// Last, the leader is removed (it hands leadership over first) and puts go on.
func TestReplaceDeadMaster(t *testing.T) {
	bin := buildBinary(t)
	c := startCluster(t, bin, nil, 1, "--global_segment_size", "64MiB")
	cl := connectClient(t, c.masterRPC...)
	waitWorkers(t, cl, 1)
	sizeOf := func(int) int64 { return 4 << 10 }
	rc := client.ReplicateConfig{Replicas: 1}
	sums := putObjects(t, cl, "before/", 1, 50, sizeOf, rc)

	masters := "--master_server_address=" + strings.Join(c.masterRPC[:2], ",")
	cli := func(wantCode int, args ...string) string {
		t.Helper()
		r := runBin(t, bin, nil, nil, append(args, masters)...)
		if r.code != wantCode {
			t.Fatalf("mooncake %s: exit %d, want %d\nstdout: %s\nstderr: %s", strings.Join(args, " "), r.code, wantCode, r.stdout, r.stderr)
		}
		if wantCode != 0 && (strings.Count(r.stderr, "\n") != 1 || !strings.HasPrefix(r.stderr, "mooncake: ")) {
			t.Fatalf("mooncake %s: stderr %q, want one line", strings.Join(args, " "), r.stderr)
		}
		return r.stdout + r.stderr
	}

	// m3 dies with its disk.
	c.masters[2].kill()
	cli(0, "master", "remove", "--id", "m3")
	if out := cli(exitError, "master", "remove", "--id", "m3"); !strings.Contains(out, "not a member") {
		t.Fatalf("removing m3 twice: %s", out)
	}

	// m4 starts empty with --join and is added.
	var m4 *proc
	var raft4, rpc4 string
	for attempt := 0; ; attempt++ {
		ports := freePorts(t, 2)
		raft4, rpc4 = hostPort(ports[0]), hostPort(ports[1])
		m4 = startProc(t, "m4", bin, "master", "--id", "m4", "--data_dir", filepath.Join(c.dir, fmt.Sprintf("m4-attempt%d", attempt)),
			"--rpc_address", rpc4, "--raft_address", raft4, "--metrics_port", "0", "--join")
		inUse, err := m4.waitReady(60 * time.Second)
		if err == nil {
			break
		}
		m4.kill()
		if !inUse || attempt == 3 {
			t.Fatal(err)
		}
	}
	if out := cli(exitUsage, "master", "add", "--id", "m9", "--raft_address", raft4, "--rpc_address", rpc4); !strings.Contains(out, `is "m4", not "m9"`) {
		t.Fatalf("adding m4's process under another id: %s", out)
	}
	cli(0, "master", "add", "--id", "m4", "--raft_address", raft4, "--rpc_address", rpc4)
	cli(0, "master", "add", "--id", "m4", "--raft_address", raft4) // repeating it changes nothing

	// Puts still succeed; m4 catches up with the leader.
	for k, v := range putObjects(t, cl, "after/", 2, 50, sizeOf, rc) {
		sums[k] = v
	}
	checkObjects(t, cl, sums)
	testutil.WaitFor(t, "m4 to catch up", 60*time.Second, func() error {
		lst, err := cl.Status(context.Background())
		if err != nil {
			return err
		}
		st, err := cl.MasterStatus(context.Background(), rpc4)
		if err != nil {
			return err
		}
		if st.Keys != lst.Keys || st.AppliedIndex < lst.AppliedIndex || st.Leader == "" {
			return fmt.Errorf("m4 has %d keys at index %d, leader %s has %d at %d", st.Keys, st.AppliedIndex, lst.Leader, lst.Keys, lst.AppliedIndex)
		}
		return nil
	})

	status := cli(0, "status")
	list := cli(0, "master", "list")
	for name, out := range map[string]string{"status": status, "master list": list} {
		if !strings.Contains(out, "m4  ") || !strings.Contains(out, raft4) || !strings.Contains(out, rpc4) || strings.Contains(out, "m3  ") {
			t.Fatalf("mooncake %s does not show m4 (and only without m3):\n%s", name, out)
		}
	}
	t.Logf("mooncake master list:\n%s", list)

	// Bad input: a raft address nothing listens on, an unknown id, a bad address.
	if out := cli(exitUsage, "master", "add", "--id", "m9", "--raft_address", hostPort(freePort(t))); !strings.Contains(out, "--join first") {
		t.Fatalf("adding a master that is not running: %s", out)
	}
	if out := cli(exitError, "master", "remove", "--id", "m9"); !strings.Contains(out, "not a member") {
		t.Fatalf("removing an unknown master: %s", out)
	}
	cli(exitUsage, "master", "add", "--id", "m9", "--raft_address", "nohost")
	if out := cli(exitError, "master", "add", "--id", "m4", "--raft_address", c.masterRPC[0]); !strings.Contains(out, "already a member") {
		t.Fatalf("adding m4 at another address: %s", out)
	}

	// Retiring the leader: it hands leadership over, the CLI follows the redirect, and the new
	// leader removes it.
	st, err := cl.Status(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	cli(0, "master", "remove", "--id", st.Leader)
	if list := cli(0, "master", "list"); strings.Contains(list, st.Leader+"  ") || strings.Count(list, "\n") != 3 {
		t.Fatalf("after removing the leader %s:\n%s", st.Leader, list)
	}
	putObjects(t, cl, "after-leader/", 3, 5, sizeOf, rc)
}
