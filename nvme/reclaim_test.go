package nvme

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/mooncake-go/mooncake/internal/base"
	"github.com/mooncake-go/mooncake/internal/testutil"
)

// fillUntilFull puts durable objects of size bytes under prefix until the store refuses one
// with ErrNoSpace, and returns the keys stored with their bytes.
func fillUntilFull(t *testing.T, s *Store, prefix string, size int) map[string][]byte {
	t.Helper()
	stored := map[string][]byte{}
	for i := 0; i < 100000; i++ {
		key := fmt.Sprint(prefix, i)
		data := payload(uint64(i)+uint64(len(prefix))<<32, size, false)
		err := s.Put(key, 1, data, true)
		if errors.Is(err, base.ErrNoSpace) {
			if len(stored) == 0 {
				t.Fatalf("nothing fit: %v", err)
			}
			return stored
		}
		if err != nil {
			t.Fatalf("Put(%q): %v", key, err)
		}
		stored[key] = data
	}
	t.Fatal("the store never filled")
	return nil
}

// deleteHalf deletes every other key of stored (in key order of insertion numbers) and
// returns the bytes deleted.
func deleteHalf(t *testing.T, s *Store, stored map[string][]byte) int64 {
	t.Helper()
	var n int64
	i := 0
	for key, data := range stored {
		if i++; i%2 == 0 {
			continue
		}
		if err := s.Delete(key, 0); err != nil {
			t.Fatal(err)
		}
		n += int64(len(data))
		delete(stored, key)
	}
	return n
}

// allocated is the disk space (st_blocks) of the files under dir: holes do not count.
func allocated(t *testing.T, dir string) int64 {
	t.Helper()
	var n int64
	err := filepath.Walk(dir, func(_ string, fi os.FileInfo, err error) error {
		if err == nil && !fi.IsDir() {
			n += fi.Sys().(*syscall.Stat_t).Blocks * 512
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// TestDeleteFreesRoomAtOnce: in a full store, deleting objects makes room for the very next
// durable Put (no GC call, no waiting): the deleted records are punched out of their
// extents, the active one included, and the disk space is really returned.
func TestDeleteFreesRoomAtOnce(t *testing.T) {
	dir := t.TempDir()
	o := testOptions(dir)
	o.Capacity = 8 << 20
	o.DisableLZ4 = true
	o.ExtentSize = 0 // sized from the capacity (1 MiB here)
	s := mustOpen(t, o)
	if !s.Metrics().HolePunch {
		s.Close()
		t.Skipf("the filesystem of %s cannot punch holes; TestSmallCapacityRecovers covers GC by copying", dir)
	}
	stored := fillUntilFull(t, s, "a", 300<<10)
	diskBefore := allocated(t, filepath.Join(dir, "extents"))
	freed := deleteHalf(t, s, stored)
	// Half the room is back for new objects, at once.
	more := 0
	for ; int64(more+1)*(300<<10) < freed*8/10; more++ {
		key := fmt.Sprint("b", more)
		data := payload(uint64(1000+more), 300<<10, false)
		if err := s.Put(key, 1, data, true); err != nil {
			t.Fatalf("Put %d after deleting %s: %v (metrics %+v)", more, base.Bytes(freed), err, s.Metrics())
		}
		stored[key] = data
	}
	if _, err := s.reclaim(); err != nil { // what the background loop has not punched yet
		t.Fatal(err)
	}
	m := s.Metrics()
	t.Logf("deleted %s, then %d more objects fit; punched %s; disk %s -> %s", base.Bytes(freed), more,
		base.Bytes(m.PunchedBytes), base.Bytes(diskBefore), base.Bytes(allocated(t, filepath.Join(dir, "extents"))))
	// Punched out, or deleted with their extent by GC once it held nothing live.
	if m.PunchedBytes+m.GCBytesReclaimed < freed*8/10 {
		t.Fatalf("punched %d bytes (and GC reclaimed %d) after deleting %d", m.PunchedBytes, m.GCBytesReclaimed, freed)
	}
	if m.BytesUsed > m.Capacity {
		t.Fatalf("BytesUsed %d over capacity %d", m.BytesUsed, m.Capacity)
	}
	if got := allocated(t, filepath.Join(dir, "extents")); got > m.BytesUsed+1<<20 {
		t.Fatalf("extents hold %d bytes on disk, the store counts %d", got, m.BytesUsed)
	}
	for k, v := range stored {
		mustRead(t, s, k, 1, v)
	}
	checkAccounting(t, s)
	used := m.BytesUsed
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	// Reopen: the holes are counted as free again (the gaps are found from the index).
	s = mustOpen(t, o)
	defer s.Close()
	if m := s.Metrics(); m.DroppedOnOpen != 0 || m.Objects != int64(len(stored)) || m.BytesUsed > used+blockSize*int64(m.Extents) {
		t.Fatalf("after reopen: %+v; %d objects and %d bytes used before", m, len(stored), used)
	}
	for k, v := range stored {
		mustRead(t, s, k, 1, v)
	}
	checkAccounting(t, s)
}

// backgroundPasses makes the store opened with o signal each pass of its background loop on
// the returned channel (a pass that finds the channel full is folded into the one there).
func backgroundPasses(o *Options) <-chan struct{} {
	passes := make(chan struct{}, 1)
	o.testHookBackgroundPass = func() {
		select {
		case passes <- struct{}{}:
		default:
		}
	}
	return passes
}

// putWhenRoom puts key durably, retrying after each background pass while the store is full
// (a refused Put kicks a pass, whose reclaim, GC or restored ballast makes room), until
// deadline fires; it returns the last error.
func putWhenRoom(s *Store, passes <-chan struct{}, deadline <-chan time.Time, key string, data []byte) error {
	for {
		err := s.Put(key, 1, data, true)
		if !errors.Is(err, base.ErrNoSpace) {
			return err
		}
		select {
		case <-passes:
		case <-deadline:
			return err
		}
	}
}

// TestSmallCapacityRecovers is the issue's --ssd_capacity 16MiB case, with and without hole
// punching: fill, delete everything, and durable Puts work again within seconds (without
// punching, the background GC deletes the emptied extents, the mostly dead active one
// included, once a full Put kicks it).
func TestSmallCapacityRecovers(t *testing.T) {
	for _, punch := range []bool{true, false} {
		t.Run(fmt.Sprintf("punch=%v", punch), func(t *testing.T) {
			dir := t.TempDir()
			o := Options{Dir: dir, Logger: quietLogger, Capacity: 16 << 20, DisableLZ4: true, DisableHolePunch: !punch}
			passes := backgroundPasses(&o)
			s := mustOpen(t, o)
			defer s.Close()
			stored := fillUntilFull(t, s, "k", 1<<20)
			for k := range stored {
				if err := s.Delete(k, 0); err != nil {
					t.Fatal(err)
				}
			}
			data := payload(42, 1<<20, false)
			start := time.Now()
			deadline := time.After(5 * time.Second)
			for n := range len(stored) {
				if err := putWhenRoom(s, passes, deadline, fmt.Sprint("again", n), data); err != nil {
					t.Fatalf("Put %d after deleting everything: %v (metrics %+v)", n, err, s.Metrics())
				}
			}
			t.Logf("%d objects of 1 MiB fit again %v after deleting all; metrics %+v", len(stored), time.Since(start), s.Metrics())
			checkAccounting(t, s)
		})
	}
}

// TestGCDiskFullStopsCopying: without hole punching, a GC pass on a full disk gives up at the
// first copy that fails, with one log line, and does not spend extent ids retrying; once
// the disk has room, GC moves the records and deletes the extents.
func TestGCDiskFullStopsCopying(t *testing.T) {
	dir := t.TempDir()
	fs := newFaultFS()
	var logs testutil.SyncBuffer
	o := copyGCOptions(dir)
	o.FS = fs
	o.DisableLZ4 = true
	o.Logger = slog.New(slog.NewTextHandler(&logs, nil))
	s := mustOpen(t, o)
	defer s.Close()
	want := map[string][]byte{}
	for i := 0; i < 40; i++ {
		key := fmt.Sprint("k", i)
		data := payload(uint64(i), 100<<10, false)
		if err := s.Put(key, 1, data, true); err != nil {
			t.Fatal(err)
		}
		if i%4 == 0 {
			want[key] = data
		} else if err := s.Delete(key, 0); err != nil {
			t.Fatal(err)
		}
	}
	fs.diskFull.Store(true)
	s.mu.Lock()
	id0 := s.mu.nextID
	s.mu.Unlock()
	const passes = 5
	for range passes {
		if _, err := s.GC(); err != nil {
			t.Fatalf("GC on a full disk: %v", err)
		}
	}
	s.mu.Lock()
	spent := s.mu.nextID - id0
	s.mu.Unlock()
	lines := strings.Count(logs.String(), "cannot move live records")
	if spent > passes || lines > passes {
		t.Fatalf("%d GC passes on a full disk spent %d extent ids and logged %d lines", passes, spent, lines)
	}
	fs.diskFull.Store(false)
	st, err := s.GC()
	if err != nil || st.ExtentsRemoved == 0 || st.RecordsMoved == 0 {
		t.Fatalf("GC with room again: %+v, %v", st, err)
	}
	for k, v := range want {
		mustRead(t, s, k, 1, v)
	}
	checkAccounting(t, s)
}

// TestFullTmpfs runs the store on a real 32 MiB filesystem (a tmpfs mounted for the test;
// root only). With the default capacity the store fills up to its capacity, leaving room to
// the index; with a capacity larger than the disk, the disk itself fills (ENOSPC). Either
// way, deleting half the objects lets durable Puts succeed again, and nothing is lost.
func TestFullTmpfs(t *testing.T) {
	for _, c := range []struct {
		name     string
		capacity int64
	}{{"default capacity", 0}, {"capacity over the disk", 1 << 30}} {
		t.Run(c.name, func(t *testing.T) {
			dir := filepath.Join(mountTmpfs(t, "32m"), "store")
			o := Options{Dir: dir, Logger: quietLogger, Capacity: c.capacity, DisableLZ4: true}
			passes := backgroundPasses(&o)
			s := mustOpen(t, o)
			stored := fillUntilFull(t, s, "k", 512<<10)
			m := s.Metrics()
			t.Logf("full: %d objects, %+v", len(stored), m)
			if c.capacity == 0 && m.BytesUsed > m.Capacity {
				t.Fatalf("default capacity exceeded: %+v", m)
			}
			freed := deleteHalf(t, s, stored)
			deadline := time.After(5 * time.Second)
			for n := 0; int64(n+1)*(512<<10) <= freed*7/10; n++ {
				key := fmt.Sprint("again", n)
				data := payload(uint64(5000+n), 512<<10, false)
				if err := putWhenRoom(s, passes, deadline, key, data); err != nil {
					t.Fatalf("Put %d after deleting %s: %v (metrics %+v)", n, base.Bytes(freed), err, s.Metrics())
				}
				stored[key] = data
			}
			for k, v := range stored {
				mustRead(t, s, k, 1, v)
			}
			checkAccounting(t, s)
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			s = mustOpen(t, o)
			defer s.Close()
			if m := s.Metrics(); m.Objects != int64(len(stored)) || m.DroppedOnOpen != 0 {
				t.Fatalf("after reopen: %+v, want %d objects", m, len(stored))
			}
			for k, v := range stored {
				mustRead(t, s, k, 1, v)
			}
		})
	}
}

// mountTmpfs mounts a tmpfs of size under a temporary directory and unmounts it at cleanup.
// Without the right to mount (not root), the test is skipped: TestSmallCapacityRecovers and
// TestDeleteFreesRoomAtOnce cover the same paths through Options.Capacity.
func mountTmpfs(t *testing.T, size string) string {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("mounting a tmpfs needs root; the capacity tests cover the same paths")
	}
	mnt := t.TempDir()
	var out bytes.Buffer
	cmd := exec.Command("mount", "-t", "tmpfs", "-o", "size="+size, "tmpfs", mnt)
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		t.Skipf("cannot mount a tmpfs (%v: %s); the capacity tests cover the same paths", err, out.String())
	}
	t.Cleanup(func() {
		if out, err := exec.Command("umount", mnt).CombinedOutput(); err != nil {
			t.Errorf("umount %s: %v: %s", mnt, err, out)
		}
	})
	return mnt
}

// TestIndexDiskFull: when something else fills the disk (here a file written next to the
// store on a 24 MiB tmpfs), the index takes its reserve (the ballast) instead of failing a
// WAL write, which pebble cannot survive: puts are refused with ErrNoSpace, reads and deletes
// go on, and once the disk has room again puts are admitted; nothing acknowledged is lost.
func TestIndexDiskFull(t *testing.T) {
	mnt := mountTmpfs(t, "24m")
	o := Options{Dir: filepath.Join(mnt, "store"), Logger: quietLogger, DisableLZ4: true}
	passes := backgroundPasses(&o)
	s := mustOpen(t, o)
	defer func() { s.Close() }()
	hog := filepath.Join(mnt, "hog")
	f, err := os.Create(hog)
	if err != nil {
		t.Fatal(err)
	}
	chunk := make([]byte, 1<<20)
	for {
		if _, err := f.Write(chunk); err != nil {
			if !errors.Is(err, syscall.ENOSPC) {
				t.Fatal(err)
			}
			break
		}
	}
	f.Close()
	// Inline values (index only) until the store refuses one because its reserve is spent.
	stored := map[string][]byte{}
	var refused error
	for i := 0; i < 400 && refused == nil; i++ {
		key, data := fmt.Sprint("i", i), payload(uint64(i), 48<<10, false)
		switch err := s.Put(key, 1, data, true); {
		case err == nil:
			stored[key] = data
		case errors.Is(err, base.ErrNoSpace) && s.ballastGone.Load():
			refused = err
		case errors.Is(err, base.ErrNoSpace):
		default:
			t.Fatalf("Put %d on a full disk: %v", i, err)
		}
	}
	if refused == nil {
		t.Fatalf("400 inline puts on a full disk, and the index never needed its reserve (%d stored)", len(stored))
	}
	t.Logf("%d inline objects stored after the disk filled, then: %v", len(stored), refused)
	for k, v := range stored {
		mustRead(t, s, k, 1, v)
	}
	for k := range stored {
		if err := s.Delete(k, 0); err != nil {
			t.Fatalf("Delete on a full disk: %v", err)
		}
		delete(stored, k)
		break
	}
	// Room again: the reserve comes back and puts are admitted.
	if err := os.Remove(hog); err != nil {
		t.Fatal(err)
	}
	if err := putWhenRoom(s, passes, time.After(5*time.Second), "after", payload(9, 300<<10, false)); err != nil {
		t.Fatalf("Put once the disk has room: %v", err)
	}
	stored["after"] = payload(9, 300<<10, false)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = mustOpen(t, o)
	for k, v := range stored {
		mustRead(t, s, k, 1, v)
	}
}
