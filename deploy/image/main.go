package main

import (
	"archive/tar"
	"bytes"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"sort"
	"strconv"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// The image's user: 65532 is the "nonroot" id distroless images use, so volume permissions
// written for those fit this one.
const (
	uid     = 65532
	binDir  = "usr/local/bin"
	binName = "mooncake"
	dataDir = "data"
)

func main() {
	binary := flag.String("binary", "", "the static mooncake binary to pack (required)")
	out := flag.String("out", "", "the image tarball to write (required)")
	tag := flag.String("tag", "mooncake-go:latest", "the image's name and tag inside the tarball")
	arch := flag.String("arch", "amd64", "the binary's GOARCH")
	flag.Parse()
	if *binary == "" || *out == "" {
		fmt.Fprintln(os.Stderr, "image: -binary and -out are required")
		flag.Usage()
		os.Exit(2)
	}
	if err := run(*binary, *out, *tag, *arch); err != nil {
		fmt.Fprintln(os.Stderr, "image:", err)
		os.Exit(1)
	}
}

func run(binary, out, tag, arch string) error {
	epoch, err := sourceDateEpoch()
	if err != nil {
		return err
	}
	ref, err := name.NewTag(tag)
	if err != nil {
		return fmt.Errorf("-tag %q: %w", tag, err)
	}
	names, err := linkNames(binary)
	if err != nil {
		return err
	}
	bin, err := os.ReadFile(binary)
	if err != nil {
		return err
	}
	layerTar, err := layer(bin, names, epoch)
	if err != nil {
		return err
	}
	l, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(layerTar)), nil
	}, tarball.WithMediaType(types.OCILayer))
	if err != nil {
		return err
	}
	img, err := mutate.AppendLayers(mutate.MediaType(empty.Image, types.OCIManifestSchema1), l)
	if err != nil {
		return err
	}
	img = mutate.ConfigMediaType(img, types.OCIConfigJSON)
	cf, err := img.ConfigFile()
	if err != nil {
		return err
	}
	cf = cf.DeepCopy()
	cf.Architecture, cf.OS = arch, "linux"
	cf.Created = v1.Time{Time: epoch}
	cf.Author = "mooncake-go"
	cf.Config = v1.Config{
		User:       fmt.Sprintf("%d:%d", uid, uid),
		Entrypoint: []string{"/" + path.Join(binDir, binName)},
		// Without arguments: a standalone store (one master and one worker) keeping its
		// metadata and NVMe tier in the volume.
		Cmd:        []string{"standalone", "--data_dir", "/" + dataDir},
		Env:        []string{"PATH=/" + binDir, "HOME=/" + dataDir},
		WorkingDir: "/" + dataDir,
		Volumes:    map[string]struct{}{"/" + dataDir: {}},
		// The defaults: master RPC, master metrics, worker data.
		ExposedPorts: map[string]struct{}{"50051/tcp": {}, "9003/tcp": {}, "12300/tcp": {}},
		Labels: map[string]string{
			"org.opencontainers.image.title":       "mooncake-go",
			"org.opencontainers.image.description": "A distributed, tiered KVCache store (Mooncake Store's job, in Go)",
			"org.opencontainers.image.version":     ref.TagStr(),
		},
	}
	if img, err = mutate.ConfigFile(img, cf); err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(out), 0o755); err != nil {
		return err
	}
	if err := tarball.WriteToFile(out, ref, img); err != nil {
		return err
	}
	d, _ := img.Digest()
	st, err := os.Stat(out)
	if err != nil {
		return err
	}
	fmt.Printf("%s %s %s (%.1f MiB)\n", out, ref.String(), d, float64(st.Size())/(1<<20))
	return nil
}

// linkNames asks the binary which names it answers to: it makes its links in a scratch
// directory (`mooncake install-links DIR`), so the image never lists them a second time.
func linkNames(binary string) ([]string, error) {
	dir, err := os.MkdirTemp("", "mooncake-image-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	if out, err := exec.Command(binary, "install-links", dir).CombinedOutput(); err != nil {
		return nil, fmt.Errorf("%s install-links: %w: %s", binary, err, out)
	}
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	if len(names) == 0 {
		return nil, fmt.Errorf("%s install-links made no links", binary)
	}
	sort.Strings(names)
	return names, nil
}

// layer is the image's one layer as a tar stream.
func layer(bin []byte, links []string, mtime time.Time) ([]byte, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	hdr := func(h *tar.Header) *tar.Header {
		h.ModTime, h.Format = mtime, tar.FormatPAX
		return h
	}
	dir := func(name string, mode int64, owner int) error {
		return tw.WriteHeader(hdr(&tar.Header{Typeflag: tar.TypeDir, Name: name + "/", Mode: mode, Uid: owner, Gid: owner}))
	}
	file := func(name string, mode int64, body []byte) error {
		if err := tw.WriteHeader(hdr(&tar.Header{Typeflag: tar.TypeReg, Name: name, Mode: mode, Size: int64(len(body))})); err != nil {
			return err
		}
		_, err := tw.Write(body)
		return err
	}
	user := strconv.Itoa(uid)
	steps := []func() error{
		func() error { return dir("etc", 0o755, 0) },
		func() error {
			return file("etc/passwd", 0o644, []byte("root:x:0:0:root:/root:/sbin/nologin\nmooncake:x:"+user+":"+user+":mooncake:/"+dataDir+":/sbin/nologin\n"))
		},
		func() error { return file("etc/group", 0o644, []byte("root:x:0:\nmooncake:x:"+user+":\n")) },
		func() error { return dir("tmp", 0o1777, 0) },
		func() error { return dir(dataDir, 0o755, uid) },
		func() error { return dir("usr", 0o755, 0) },
		func() error { return dir("usr/local", 0o755, 0) },
		func() error { return dir(binDir, 0o755, 0) },
		func() error { return file(path.Join(binDir, binName), 0o755, bin) },
	}
	for _, n := range links {
		steps = append(steps, func() error {
			return tw.WriteHeader(hdr(&tar.Header{Typeflag: tar.TypeSymlink, Name: path.Join(binDir, n), Linkname: binName, Mode: 0o777}))
		})
	}
	for _, s := range steps {
		if err := s(); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// sourceDateEpoch is $SOURCE_DATE_EPOCH (reproducible builds' convention), else the Unix epoch.
func sourceDateEpoch() (time.Time, error) {
	s := os.Getenv("SOURCE_DATE_EPOCH")
	if s == "" {
		return time.Unix(0, 0).UTC(), nil
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return time.Time{}, fmt.Errorf("SOURCE_DATE_EPOCH %q: %w", s, err)
	}
	return time.Unix(n, 0).UTC(), nil
}
