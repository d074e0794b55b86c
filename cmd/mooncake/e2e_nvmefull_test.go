package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mooncake-go/mooncake/client"
	"github.com/mooncake-go/mooncake/internal/base"
	"github.com/mooncake-go/mooncake/internal/testutil"
)

// TestNVMeFullRecovers is issue 11's disk-full check with the binary: a standalone worker
// whose NVMe tier is full takes durable puts again within 5 s of removing objects, and no
// acknowledged object is lost (every one reads back byte-exact, also after a SIGKILL and a
// restart).
//
//   - "64MiB disk": root_fs_dir on a 64 MiB tmpfs mounted for the test, default capacity;
//     durable puts of 1 MiB until one is refused, then half the objects removed. Without the
//     right to mount (not root) the tier is bounded with --ssd_capacity 64MiB instead, and the
//     test logs it.
//   - "ssd_capacity 16MiB": the tier bounded to 16 MiB (less than one default extent), then
//     `mooncake rm --all`.
func TestNVMeFullRecovers(t *testing.T) {
	bin := buildBinary(t)
	t.Run("64MiB disk", func(t *testing.T) {
		dir := t.TempDir()
		nvmeDir, flags := filepath.Join(dir, "nvme"), []string(nil)
		if mnt, err := mountTmpfs(t, "64m"); err == nil {
			nvmeDir = mnt
		} else {
			t.Logf("no tmpfs (%v): the tier is bounded with --ssd_capacity 64MiB instead of a full disk", err)
			flags = []string{"--ssd_capacity", "64MiB"}
		}
		fillRemoveRefill(t, bin, dir, nvmeDir, flags, func(t *testing.T, cl *client.Client, master string, sums map[string]uint64) {
			i := 0
			for k := range sums {
				if i++; i%2 == 0 {
					continue
				}
				if err := cl.Remove(context.Background(), k); err != nil {
					t.Fatalf("remove %s: %v", k, err)
				}
				delete(sums, k)
			}
		})
	})
	t.Run("ssd_capacity 16MiB", func(t *testing.T) {
		dir := t.TempDir()
		fillRemoveRefill(t, bin, dir, filepath.Join(dir, "nvme"), []string{"--ssd_capacity", "16MiB"},
			func(t *testing.T, cl *client.Client, master string, sums map[string]uint64) {
				if r := runBin(t, bin, []string{envMaster + "=" + master}, nil, "rm", "--all"); r.code != 0 {
					t.Fatalf("rm --all: %s", r.stderr)
				}
				clear(sums)
			})
	})
}

// fillRemoveRefill runs a standalone with its NVMe tier in nvmeDir, fills it with durable
// objects of 1 MiB, calls remove (which deletes from sums what it removes), then puts new
// durable objects until they take the room freed (80% of it), the first within 5 s of the
// removal; then every acknowledged object must read back, before and after SIGKILL and a
// restart.
func fillRemoveRefill(t *testing.T, bin, dir, nvmeDir string, flags []string,
	remove func(t *testing.T, cl *client.Client, master string, sums map[string]uint64)) {
	const size = 1 << 20
	flags = append([]string{"--global_segment_size", "256MiB", "--root_fs_dir", nvmeDir, "--persistence", "durable"}, flags...)
	sa, master := startStandalone(t, bin, filepath.Join(dir, "data"), flags...)
	cl := connectClient(t, master)
	rc := client.ReplicateConfig{Persistence: base.PersistenceDurable}
	ctx := context.Background()
	sums := map[string]uint64{}
	var full error
	for i := 0; full == nil; i++ {
		if i == 1000 {
			t.Fatal("1000 durable objects of 1 MiB fit: the tier never filled")
		}
		key, v := fmt.Sprintf("fill/%04d", i), objectValue(11, i, size)
		switch err := cl.Put(ctx, key, v, rc); {
		case err == nil:
			sums[key] = base.Checksum(v)
		case errors.Is(err, base.ErrNoSpace):
			full = err
		default:
			t.Fatalf("durable put %d: %v", i, err)
		}
	}
	filled := len(sums)
	t.Logf("the tier is full after %d durable objects of 1 MiB: %v", filled, full)

	remove(t, cl, master, sums)
	removed := filled - len(sums)
	removedAt := time.Now()
	want := removed * 8 / 10
	var firstOK time.Duration
	i := 0
	putNext := func() error {
		key, v := fmt.Sprintf("again/%04d", i), objectValue(12, i, size)
		err := cl.Put(ctx, key, v, rc)
		if err == nil {
			if i == 0 {
				firstOK = time.Since(removedAt)
			}
			sums[key] = base.Checksum(v)
			i++
			return nil
		}
		if !errors.Is(err, base.ErrNoSpace) {
			t.Fatalf("durable put %d after the removal: %v", i, err)
		}
		return err
	}
	if want > 0 {
		testutil.WaitFor(t, fmt.Sprintf("a durable put after removing %d objects", removed), 5*time.Second-time.Since(removedAt), putNext)
	}
	testutil.WaitFor(t, fmt.Sprintf("%d durable puts after removing %d objects", want, removed), 30*time.Second-time.Since(removedAt), func() error {
		for i < want {
			if err := putNext(); err != nil {
				return fmt.Errorf("%d of %d fit: %w", i, want, err)
			}
		}
		return nil
	})
	t.Logf("removed %d objects; the first durable put succeeded %v later, and %d fit (machine loaded)",
		removed, firstOK.Round(time.Millisecond), want)
	checkObjects(t, cl, sums)

	cl.Close()
	sa.kill()
	sa.restart()
	sa.mustReady()
	cl = connectClient(t, master)
	testutil.WaitFor(t, "the restored keys", 60*time.Second, func() error {
		st, err := cl.Status(ctx)
		if err != nil {
			return err
		}
		if st.Keys != int64(len(sums)) {
			return fmt.Errorf("%d keys, want %d", st.Keys, len(sums))
		}
		return nil
	})
	checkObjects(t, cl, sums)
	t.Logf("all %d acknowledged durable objects read back after SIGKILL and restart", len(sums))
}

// mountTmpfs mounts a tmpfs of size (mount's syntax, "64m") on a temporary directory and
// unmounts it at cleanup (after the processes using it are killed: cleanups run last first).
// It fails when the test may not mount (not root).
func mountTmpfs(t *testing.T, size string) (string, error) {
	t.Helper()
	if os.Geteuid() != 0 {
		return "", errors.New("mounting needs root")
	}
	mnt := t.TempDir()
	var out bytes.Buffer
	cmd := exec.Command("mount", "-t", "tmpfs", "-o", "size="+size, "tmpfs", mnt)
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("mount: %v: %s", err, strings.TrimSpace(out.String()))
	}
	t.Cleanup(func() {
		if out, err := exec.Command("umount", mnt).CombinedOutput(); err != nil {
			t.Errorf("umount %s: %v: %s", mnt, err, out)
		}
	})
	return mnt, nil
}
