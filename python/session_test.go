package python

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/mooncake-go/mooncake/internal/testutil"
)

// TestPythonSessions runs tests/session_case.py (the layer-wise ranged sessions) against a
// cluster of its own: three masters with a 3 s put timeout (so an abandoned session's
// reservation expires within the test, and a new leader's grace for PutEnds of its
// predecessor's puts passes) and one 32 MiB worker. The case kills the leader, so it cannot
// share the suite's cluster.
func TestPythonSessions(t *testing.T) {
	py, bin, site := prepare(t)
	dir := t.TempDir()
	var masters, metrics, pids []string
	for attempt := 0; ; attempt++ {
		ports := testutil.FreePorts(t, 9)
		var peers, rpcs []string
		masters, metrics, pids = nil, nil, nil
		for i := range 3 {
			peers = append(peers, fmt.Sprintf("m%d=%s", i+1, testutil.HostPort(ports[3*i])))
			masters = append(masters, testutil.HostPort(ports[3*i+1]))
			metrics = append(metrics, testutil.HostPort(ports[3*i+2]))
			rpcs = append(rpcs, fmt.Sprintf("m%d=%s", i+1, masters[i]))
		}
		var ms []*testutil.Proc
		for i := range 3 {
			id := fmt.Sprintf("m%d", i+1)
			ms = append(ms, testutil.StartProc(t, id, bin, "master", "--id", id,
				"--data_dir", filepath.Join(dir, fmt.Sprintf("attempt%d", attempt), id),
				"--rpc_address", masters[i], "--raft_address", testutil.HostPort(ports[3*i]),
				"--metrics_port", strconv.Itoa(ports[3*i+2]), "--put_timeout", "3s",
				"--peers", strings.Join(peers, ","), "--peer_rpc_addresses", strings.Join(rpcs, ",")))
			pids = append(pids, strconv.Itoa(ms[i].Cmd.Process.Pid))
		}
		var err error
		inUse := false
		for _, m := range ms {
			if inUse, err = m.WaitReady(60 * time.Second); err != nil {
				break
			}
		}
		if err == nil {
			break
		}
		for _, m := range ms {
			m.Kill()
		}
		if !inUse || attempt == 3 {
			t.Fatal(err)
		}
	}
	testutil.StartReady(t, "worker", bin, func() []string {
		return []string{"worker", "--master_server_address", strings.Join(masters, ","),
			"--worker_address", testutil.HostPort(testutil.FreePorts(t, 1)[0]), "--worker_id", "ws", "--metrics_port", "0",
			"--global_segment_size", "32MiB"}
	})
	tests, err := filepath.Abs("tests")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, py, "-m", "unittest", "-v", "session_case")
	cmd.Dir = tests
	cmd.Env = append(os.Environ(), "PYTHONPATH="+site, "MOONCAKE_STORE_LIB=", "MOONCAKE_MASTER=", "MOONCAKE_CONFIG_PATH=",
		"MOONCAKE_TEST_STRICT=1", "MOONCAKE_TEST_SESSION_MASTERS="+strings.Join(masters, ","),
		"MOONCAKE_TEST_SESSION_METRICS="+strings.Join(metrics, ","), "MOONCAKE_TEST_SESSION_PIDS="+strings.Join(pids, ","))
	out, err := cmd.CombinedOutput()
	t.Logf("python3 -m unittest session_case:\n%s", out)
	if err != nil {
		t.Fatalf("Python session case failed: %v", err)
	}
}
