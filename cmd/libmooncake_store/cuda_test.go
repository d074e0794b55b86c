package main

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mooncake-go/mooncake/internal/testutil"
)

// TestGPUMemoryFakeDriver runs testdata/gpucheck.c against a real `mooncake standalone`, with
// testdata/fakecuda.c built as libcuda.so.1: a driver whose "device memory" faults when the
// host touches it. It checks the detection and staging paths of every call that takes a
// caller's address (put_from, upsert_from, their batches, the multi-buffer forms, get_into,
// batch_get_into, get_into_ranges, register_buffer), the errors for a range crossing its
// allocation and for memory with no context, and that a process that never loads the driver
// gets none from the library. It does not claim the GPU path: benchmarks/gpu does, on a GPU.
func TestGPUMemoryFakeDriver(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the library and runs the binary; skipped with -short")
	}
	dir, _, bin := buildShared(t)
	gcc := testutil.LookTool(t, "gcc")
	drv := t.TempDir()
	cc := exec.Command(gcc, "-std=c11", "-O2", "-Wall", "-Wextra", "-Werror", "-shared", "-fPIC",
		"-Wl,-soname,libcuda.so.1", "-o", filepath.Join(drv, "libcuda.so.1"), "testdata/fakecuda.c", "-lpthread")
	if out, err := cc.CombinedOutput(); err != nil {
		t.Fatalf("gcc: %v\n%s", err, out)
	}
	prog := compileC(t, gcc, dir, "testdata/gpucheck.c")
	master, _ := testutil.StartStandalone(t, bin, filepath.Join(t.TempDir(), "data"), "256MiB")
	base := slices.DeleteFunc(os.Environ(), func(e string) bool {
		return strings.HasPrefix(e, "MOONCAKE_") || strings.HasPrefix(e, "LD_LIBRARY_PATH=")
	})
	for _, tc := range []struct{ mode, env string }{
		{"nodriver", "LD_LIBRARY_PATH=" + drv},
		{"preload", "LD_LIBRARY_PATH=" + drv},
		{"override", "MOONCAKE_CUDA_DRIVER_PATH=" + filepath.Join(drv, "libcuda.so.1")},
	} {
		t.Run(tc.mode, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			run := exec.CommandContext(ctx, prog, master, tc.mode)
			run.Env = append(slices.Clone(base), tc.env)
			out, err := run.CombinedOutput()
			if err != nil || !strings.Contains(string(out), "ok all") {
				t.Fatalf("gpucheck %s: %v\n%s", tc.mode, err, out)
			}
		})
	}
}
