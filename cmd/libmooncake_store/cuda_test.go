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
	"unsafe"

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

// TestGPUScriptDryRun runs benchmarks/gpu/check.py --cpu-dry-run over a bundle of this
// build (the binary, the library, the Python package, as `make gpu-bundle` lays them out):
// master and worker from the binary, two client processes, the round trips, the vLLM-style
// KV blocks and the bandwidth line, with host memory. It keeps the prepared GPU check from
// rotting between GPU sessions; it proves nothing of the GPU path.
func TestGPUScriptDryRun(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the library and runs the binary; skipped with -short")
	}
	dir, _, bin := buildShared(t)
	py := testutil.LookTool(t, "python3")
	root := testutil.RepoRoot(t)
	bundle := t.TempDir()
	for name, target := range map[string]string{
		"mooncake":             bin,
		"libmooncake_store.so": filepath.Join(dir, "libmooncake_store.so"),
		"python":               filepath.Join(root, "python"),
	} {
		if err := os.Symlink(target, filepath.Join(bundle, name)); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	run := exec.CommandContext(ctx, py, filepath.Join(root, "benchmarks/gpu/check.py"), "--bundle", bundle, "--cpu-dry-run")
	run.Env = slices.DeleteFunc(os.Environ(), func(e string) bool { return strings.HasPrefix(e, "MOONCAKE_") })
	out, err := run.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "ok all") {
		t.Fatalf("check.py --cpu-dry-run: %v\n%s", err, testutil.Tail(string(out), 6000))
	}
	for _, want := range []string{"ok put", "ok get", "vLLM-style load: every block byte-exact", "bandwidth host"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("no %q in the output:\n%s", want, out)
		}
	}
}

// BenchmarkClassifyHost is what classifying a host buffer costs each call that takes one,
// in a process without a CUDA driver: the check of the loader's object count
// (docs/clib.md "GPU memory"). Compare BenchmarkGoClient's C/ sub-benchmarks before and after.
//
//	go test -run '^$' -bench ClassifyHost ./cmd/libmooncake_store
func BenchmarkClassifyHost(b *testing.B) {
	buf := make([]byte, 4096)
	for b.Loop() {
		if dev, err := isDevice("buf", uintptr(unsafe.Pointer(&buf[0])), uint64(len(buf))); dev || err != nil {
			b.Fatal(dev, err)
		}
	}
}
