package main

import (
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"

	"github.com/mooncake-go/mooncake/internal/testutil"
)

// TestChurnC is issue 18's check with C clients over the library (testutil.Churn): a
// `mooncake master` alone, two long-lived testdata/churn.c processes with segments putting
// and getting without pause, and 20 short-lived ones (a segment, 20 puts, then
// mooncake_store_close, exit without closing, or SIGKILL in turn). A C program that exits
// without closing is a process the leader loses, as a killed one.
func TestChurnC(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the library and runs the binary; skipped with -short")
	}
	dir, _, bin := buildShared(t)
	prog := compileC(t, testutil.LookTool(t, "gcc"), dir, "testdata/churn.c")
	master, _ := testutil.StartMaster(t, bin, t.TempDir())
	env := slices.DeleteFunc(os.Environ(), func(e string) bool { return strings.HasPrefix(e, "MOONCAKE_") })
	testutil.Churn{
		Master: master,
		Command: func(args ...string) *exec.Cmd {
			cmd := exec.Command(prog, args...)
			cmd.Env = env
			return cmd
		},
	}.Run(t)
}
