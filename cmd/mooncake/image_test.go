package main

import (
	"archive/tar"
	"compress/gzip"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestImage is issue 24's item 1: the builder `make image` runs (deploy/image, a module of its
// own) packs the built binary into an image tarball; the test reads it as `docker load` does
// (manifest.json, the config, the layers), checks the config (non-root, the entrypoint, PATH)
// and the layer (the binary, a link for each name it answers to, the data directory owned by
// the image's user), then runs the unpacked binary under those names.
func TestImage(t *testing.T) {
	bin := buildBinary(t)
	dir := t.TempDir()
	out := filepath.Join(dir, "image.tar")
	start := time.Now()
	cmd := exec.Command("go", "run", ".", "-binary", bin, "-out", out, "-tag", "mooncake-go:test")
	cmd.Dir = filepath.Join("..", "..", "deploy", "image")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("deploy/image: %v\n%s", err, b)
	} else {
		t.Logf("built in %v: %s", time.Since(start).Round(time.Millisecond), strings.TrimSpace(string(b)))
	}
	files := readTar(t, out)
	var manifest []struct {
		Config   string
		RepoTags []string
		Layers   []string
	}
	if err := json.Unmarshal(files["manifest.json"], &manifest); err != nil || len(manifest) != 1 {
		t.Fatalf("manifest.json: %v: %s", err, files["manifest.json"])
	}
	m := manifest[0]
	if !slices.Equal(m.RepoTags, []string{"mooncake-go:test"}) || len(m.Layers) != 1 {
		t.Fatalf("manifest: tags %q, %d layers; want [mooncake-go:test] and one layer", m.RepoTags, len(m.Layers))
	}
	var cfg struct {
		Architecture, OS string
		Config           struct {
			User, WorkingDir string
			Entrypoint, Cmd  []string
			Env              []string
			Volumes          map[string]struct{}
		}
		RootFS struct {
			DiffIDs []string `json:"diff_ids"`
		} `json:"rootfs"`
	}
	if err := json.Unmarshal(files[m.Config], &cfg); err != nil {
		t.Fatalf("config %s: %v", m.Config, err)
	}
	c := cfg.Config
	switch {
	case cfg.OS != "linux" || cfg.Architecture == "":
		t.Fatalf("platform %s/%s", cfg.OS, cfg.Architecture)
	case c.User == "" || c.User == "0" || strings.HasPrefix(c.User, "0:") || strings.HasPrefix(c.User, "root"):
		t.Fatalf("user %q: the image must not run as root", c.User)
	case !slices.Equal(c.Entrypoint, []string{"/usr/local/bin/mooncake"}):
		t.Fatalf("entrypoint %q", c.Entrypoint)
	case !slices.Contains(c.Env, "PATH=/usr/local/bin"):
		t.Fatalf("env %q: PATH must hold the links (command: [mooncake_master])", c.Env)
	case len(c.Cmd) == 0 || c.Cmd[0] != "standalone":
		t.Fatalf("cmd %q: want a standalone by default", c.Cmd)
	case len(cfg.RootFS.DiffIDs) != 1:
		t.Fatalf("rootfs: %d diff ids", len(cfg.RootFS.DiffIDs))
	}
	if _, ok := c.Volumes["/data"]; !ok {
		t.Fatalf("volumes %v: want /data", c.Volumes)
	}

	// The layer, unpacked as a container runtime would.
	root := filepath.Join(dir, "root")
	layer := unpackLayer(t, files[m.Layers[0]], root)
	self := layer["usr/local/bin/mooncake"]
	if self == nil || self.Mode&0o111 == 0 || self.Size < 1<<20 {
		t.Fatalf("usr/local/bin/mooncake: %+v", self)
	}
	if d := layer["data/"]; d == nil || c.User != "65532:65532" || d.Uid != 65532 {
		t.Fatalf("data/: %+v, user %q: want the directory owned by the image's user", d, c.User)
	}
	for _, n := range mooncakeNames {
		h := layer["usr/local/bin/"+n]
		if h == nil || h.Typeflag != tar.TypeSymlink || h.Linkname != "mooncake" {
			t.Fatalf("usr/local/bin/%s: %+v, want a link to mooncake", n, h)
		}
	}
	// The binary answers to each name, and to its own name given twice (docker run IMAGE
	// mooncake ...).
	for _, args := range [][]string{{nameMaster, "--help"}, {nameClient, "--help"}, {"mooncake", "mooncake", "--help"}} {
		run := exec.Command(filepath.Join(root, "usr/local/bin", args[0]), args[1:]...)
		if b, err := run.CombinedOutput(); err != nil {
			t.Fatalf("%v in the unpacked image: %v\n%s", args, err, b)
		}
	}
}

// readTar reads a (small) tar file into memory, name -> contents.
func readTar(t *testing.T, path string) map[string][]byte {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	files := map[string][]byte{}
	tr := tar.NewReader(f)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return files
		}
		if err != nil {
			t.Fatal(err)
		}
		if files[h.Name], err = io.ReadAll(tr); err != nil {
			t.Fatal(err)
		}
	}
}

// unpackLayer extracts a gzipped layer's regular files and links under root and returns its
// headers by name.
func unpackLayer(t *testing.T, gz []byte, root string) map[string]*tar.Header {
	t.Helper()
	zr, err := gzip.NewReader(strings.NewReader(string(gz)))
	if err != nil {
		t.Fatalf("layer: %v", err)
	}
	headers := map[string]*tar.Header{}
	tr := tar.NewReader(zr)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return headers
		}
		if err != nil {
			t.Fatal(err)
		}
		headers[h.Name] = h
		p := filepath.Join(root, filepath.FromSlash(h.Name))
		switch h.Typeflag {
		case tar.TypeDir:
			err = os.MkdirAll(p, 0o755)
		case tar.TypeReg:
			var b []byte
			if b, err = io.ReadAll(tr); err == nil {
				err = os.WriteFile(p, b, os.FileMode(h.Mode)&0o777)
			}
		case tar.TypeSymlink:
			err = os.Symlink(h.Linkname, p)
		}
		if err != nil {
			t.Fatalf("unpack %s: %v", h.Name, err)
		}
	}
}
