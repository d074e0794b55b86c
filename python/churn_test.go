package python

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/mooncake-go/mooncake/internal/testutil"
)

// TestChurnPython is issue 18's check with Python clients (testutil.Churn): a `mooncake
// master` alone, two long-lived Python processes with segments putting and getting without
// pause, and 20 short-lived ones (a segment, 20 puts, then close(), a plain exit or SIGKILL in
// turn). The interpreter's exit closes a store left open, so a plain exit must unmount as
// close() does. The helper processes run python/tests/churn_client.py.
func TestChurnPython(t *testing.T) {
	py, bin, site := prepare(t)
	master, _ := testutil.StartMaster(t, bin, t.TempDir())
	script, err := filepath.Abs(filepath.Join("tests", "churn_client.py"))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir() // not python/: `import mooncake` must find the installed package
	testutil.Churn{
		Master:       master,
		ExitUnmounts: true,
		Command: func(args ...string) *exec.Cmd {
			cmd := exec.Command(py, append([]string{script}, args...)...)
			cmd.Dir = dir
			cmd.Env = append(os.Environ(), "PYTHONPATH="+site, "MOONCAKE_STORE_LIB=", "MOONCAKE_MASTER=", "MOONCAKE_CONFIG_PATH=")
			return cmd
		},
	}.Run(t)
}
