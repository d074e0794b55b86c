package python

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/mooncake-go/mooncake/internal/testutil"
)

// TestPythonPrefetch runs tests/prefetch_case.py (is_exist with prefetch_to_memory) against
// a master and one worker of its own: a 4 MiB DRAM arena over an NVMe tier, so a few puts
// spill objects, and a private arena, so every get goes over TCP and the worker's DRAM and
// NVMe hit counters see it. The case is not in the shared suite (its name does not match
// test*.py): it needs this worker, which would spill the suite's objects.
func TestPythonPrefetch(t *testing.T) {
	py, bin, site := prepare(t)
	dir := t.TempDir()
	master, _ := testutil.StartMaster(t, bin, filepath.Join(dir, "master"))
	var metrics string
	testutil.StartReady(t, "worker", bin, func() []string {
		ports := testutil.FreePorts(t, 2)
		metrics = testutil.HostPort(ports[1])
		return []string{"worker", "--master_server_address", master, "--worker_address", testutil.HostPort(ports[0]),
			"--worker_id", "wp", "--metrics_port", strconv.Itoa(ports[1]), "--global_segment_size", "4MiB",
			"--root_fs_dir", filepath.Join(dir, "nvme"), "--shared_memory=false"}
	})
	tests, err := filepath.Abs("tests")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, py, "-m", "unittest", "-v", "prefetch_case")
	cmd.Dir = tests
	cmd.Env = append(os.Environ(), "PYTHONPATH="+site, "MOONCAKE_STORE_LIB=", "MOONCAKE_MASTER=", "MOONCAKE_CONFIG_PATH=",
		"MOONCAKE_TEST_STRICT=1", "MOONCAKE_TEST_PREFETCH_MASTER="+master, "MOONCAKE_TEST_PREFETCH_METRICS="+metrics)
	out, err := cmd.CombinedOutput()
	t.Logf("python3 -m unittest prefetch_case:\n%s", out)
	if err != nil {
		t.Fatalf("Python prefetch case failed: %v", err)
	}
}
