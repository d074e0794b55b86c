package python

import (
	"archive/zip"
	"bytes"
	"context"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/mooncake-go/mooncake/internal/testutil"
)

// wheelName is what `make wheel` writes: the distribution mooncake-go, any Python 3, no ABI,
// a manylinux tag from the library's glibc needs.
var wheelName = regexp.MustCompile(`^mooncake_go-[0-9][0-9.]*-py3-none-manylinux_2_[0-9]+_[a-z0-9_]+\.whl$`)

// TestWheelWithoutGo is issue 24's item 4: the wheel `make wheel` builds (here from the library
// built once for the package's tests) installs with pip into a venv whose PATH holds neither Go nor gcc,
// from a directory outside the sources, and its store puts and gets against a standalone.
func TestWheelWithoutGo(t *testing.T) {
	py, bin, lib := prepareBuilt(t)
	dir := t.TempDir()
	master, _ := testutil.StartStandalone(t, bin, filepath.Join(dir, "standalone"), "64MiB")

	// The Makefile's command, packing the library built above instead of compiling it again.
	dist := filepath.Join(dir, "dist")
	out := runPy(t, append(os.Environ(), "MOONCAKE_BUILD_LIB="+lib), "", py, filepath.Join("buildtools", "mooncake_build.py"), dist)
	whl := strings.TrimSpace(out)
	if !wheelName.MatchString(filepath.Base(whl)) {
		t.Fatalf("wheel %q: want a name like mooncake_go-0.1.0-py3-none-manylinux_2_34_x86_64.whl", whl)
	}
	checkWheel(t, whl)
	if st, err := os.Stat(whl); err == nil {
		t.Logf("%s: %.1f MiB", filepath.Base(whl), float64(st.Size())/(1<<20))
	}

	// A venv (pip from Python's ensurepip, no network) whose PATH is its own bin/ only.
	if out, err := exec.Command("sh", filepath.Join("..", ".ci", "ensure-pip.sh"), py).CombinedOutput(); err != nil {
		t.Fatalf(".ci/ensure-pip.sh: %v\n%s", err, out)
	}
	venv := filepath.Join(dir, "venv")
	runPy(t, nil, "", py, "-m", "venv", venv)
	vbin := filepath.Join(venv, "bin")
	for _, tool := range []string{"go", "gcc", "cc"} {
		if _, err := os.Stat(filepath.Join(vbin, tool)); err == nil {
			t.Fatalf("the venv's bin/ has %s: the install would not prove it needs none", tool)
		}
	}
	env := []string{"PATH=" + vbin, "HOME=" + dir, "PIP_DISABLE_PIP_VERSION_CHECK=1", "PIP_NO_INPUT=1"}
	vpy := filepath.Join(vbin, "python")
	runPy(t, env, dir, vpy, "-m", "pip", "install", "--no-index", "--no-cache-dir", whl)

	script := `
import sys, mooncake, mooncake.store as ms
assert "site-packages" in mooncake.__file__, mooncake.__file__
s = ms.MooncakeDistributedStore()
rc = s.setup("127.0.0.1", "P2PHANDSHAKE", 0, 16 << 20, "tcp", "", sys.argv[1])
assert rc == 0, ("setup", rc)
value = bytes(range(256)) * 4096
assert s.put("wheel/k", value) == 0
assert s.get("wheel/k") == value
assert s.is_exist("wheel/k") == 1
s.close()
print("ok", mooncake.__file__)
`
	out = runPy(t, append(env, "MOONCAKE_STORE_LIB=", "MOONCAKE_CONFIG_PATH="), dir, vpy, "-c", script, master)
	t.Logf("installed wheel: %s", strings.TrimSpace(out))
}

// runPy runs a command in dir ("": the test's) with the environment env (nil: the test's),
// fails the test on a non-zero exit and returns its standard output.
func runPy(t *testing.T, env []string, dir string, name string, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = dir
	cmd.Env = env
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("%s %s: %v\n%s%s", name, strings.Join(args, " "), err, stdout.String(), stderr.String())
	}
	return stdout.String()
}

// checkWheel opens the wheel as pip would read it: the library and the package inside, the
// metadata naming mooncake-go, and a RECORD line for every file.
func checkWheel(t *testing.T, path string) {
	t.Helper()
	z, err := zip.OpenReader(path)
	if err != nil {
		t.Fatal(err)
	}
	defer z.Close()
	files := map[string]string{}
	for _, f := range z.File {
		rc, err := f.Open()
		if err != nil {
			t.Fatal(err)
		}
		b, err := io.ReadAll(rc)
		rc.Close()
		if err != nil {
			t.Fatal(err)
		}
		files[f.Name] = string(b)
	}
	var metadata, record string
	for name, body := range files {
		switch {
		case strings.HasSuffix(name, ".dist-info/METADATA"):
			metadata = body
		case strings.HasSuffix(name, ".dist-info/RECORD"):
			record = body
		}
	}
	if !strings.Contains(metadata, "Name: mooncake-go\n") {
		t.Fatalf("METADATA does not name mooncake-go:\n%s", metadata)
	}
	for _, want := range []string{"mooncake/libmooncake_store.so", "mooncake/store.py", "mooncake/__init__.py"} {
		if _, ok := files[want]; !ok {
			t.Fatalf("the wheel has no %s", want)
		}
	}
	for name := range files {
		if !strings.Contains(record, name+",") {
			t.Fatalf("RECORD does not list %s", name)
		}
	}
}
