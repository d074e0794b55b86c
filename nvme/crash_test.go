package nvme

import (
	"bufio"
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/mooncake-go/mooncake/internal/base"
)

// The crash test: a child process (this test binary, re-executed) writes durable objects and
// prints each acknowledged one; the parent SIGKILLs it at random points, reopens the store and
// checks that every acknowledged object reads back byte-exact and that every object the store
// reports is complete and valid.

const (
	crashDirEnv = "NVME_CRASH_CHILD_DIR"
	crashRunEnv = "NVME_CRASH_CHILD_RUN"
)

// crashObject derives an object's bytes from its key and version, so the parent can check
// whatever it finds without being told.
func crashObject(key string, v base.Version) []byte {
	h := fnv.New64a()
	fmt.Fprintf(h, "%s/%d", key, v)
	seed := h.Sum64()
	sizes := []int{100, 3000, 20 << 10, 70 << 10, 150 << 10, 300 << 10}
	return payload(seed, sizes[seed%uint64(len(sizes))], seed%3 == 0)
}

// TestCrashChild is the child's body; it does nothing unless the parent started it.
func TestCrashChild(t *testing.T) {
	dir := os.Getenv(crashDirEnv)
	if dir == "" {
		return // not a child: nothing to do (the parent is TestCrash)
	}
	run, _ := strconv.Atoi(os.Getenv(crashRunEnv))
	o := testOptions(dir)
	o.GCInterval = 0 // default: the background loop runs too
	o.GCLiveRatio = 0.9
	s, err := Open(o)
	if err != nil {
		fmt.Printf("OPENFAIL %v\n", err)
		os.Exit(3)
	}
	r := rand.New(rand.NewPCG(uint64(run), 1))
	versions := map[string]base.Version{}
	var keys []string
	for i := 0; ; i++ {
		key := fmt.Sprintf("r%02d-%04d", run, i)
		if len(keys) > 0 && r.IntN(4) == 0 {
			key = keys[r.IntN(len(keys))] // overwrite with a newer version
		} else {
			keys = append(keys, key)
		}
		versions[key]++
		v := versions[key]
		if err := s.Put(key, v, crashObject(key, v), true); err != nil {
			fmt.Printf("PUTFAIL %s %v\n", key, err)
			os.Exit(4)
		}
		fmt.Printf("ACK %s %d\n", key, v)
	}
}

func TestCrash(t *testing.T) {
	if os.Getenv(crashDirEnv) != "" {
		t.Skip("running as the crash child")
	}
	runs := 50
	if testing.Short() {
		runs = 10
	}
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	r := rand.New(rand.NewPCG(seed, 2))
	dir := t.TempDir()
	acked := map[string]base.Version{} // newest acknowledged version per key
	totalAcks := 0
	defer func() { t.Logf("%d runs, %d acknowledged puts, %d keys", runs, totalAcks, len(acked)) }()
	for run := 0; run < runs; run++ {
		cmd := exec.Command(os.Args[0], "-test.run=^TestCrashChild$", "-test.count=1")
		cmd.Env = append(os.Environ(), crashDirEnv+"="+dir, crashRunEnv+"="+strconv.Itoa(run))
		out, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		cmd.Stderr = os.Stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		killAfter := 1 + r.IntN(8)
		sc := bufio.NewScanner(out)
		n := 0
		for sc.Scan() {
			line := sc.Text()
			if f := strings.Fields(line); len(f) == 3 && f[0] == "ACK" {
				v, _ := strconv.ParseUint(f[2], 10, 64)
				acked[f[1]] = base.Version(v)
				n++
				if n == killAfter {
					// A random point: now, or after the child got some way into the next put
					// (its acks are read on meanwhile).
					time.AfterFunc(time.Duration(r.IntN(3000))*time.Microsecond, func() { _ = cmd.Process.Kill() })
				}
				continue
			}
			if strings.HasPrefix(line, "OPENFAIL") || strings.HasPrefix(line, "PUTFAIL") {
				_ = cmd.Process.Kill()
				_ = cmd.Wait()
				t.Fatalf("run %d (seed %d): child: %s", run, seed, line)
			}
		}
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		verifyCrashStore(t, dir, acked, run, seed, run == runs-1)
		totalAcks += n
	}
}

func verifyCrashStore(t *testing.T, dir string, acked map[string]base.Version, run int, seed uint64, full bool) {
	t.Helper()
	s, err := Open(testOptions(dir))
	if err != nil {
		t.Fatalf("run %d (seed %d): reopen: %v", run, seed, err)
	}
	defer s.Close()
	// Objects of this run are read in full every time, older ones one in eight (each is read in
	// full after the run that wrote it, and all of them after the last run).
	prefix := fmt.Sprintf("r%02d-", run)
	seen := map[string]base.Version{}
	err = s.Scan(func(m base.ObjectMeta) error {
		seen[m.Key] = m.Version
		if !full && !strings.HasPrefix(m.Key, prefix) && rand.IntN(8) != 0 {
			return nil
		}
		want := crashObject(m.Key, m.Version)
		got := make([]byte, m.Size)
		if m.Size != int64(len(want)) {
			return fmt.Errorf("%q v%d: size %d, want %d", m.Key, m.Version, m.Size, len(want))
		}
		if err := s.ReadInto(m.Key, m.Version, got); err != nil {
			return fmt.Errorf("%q v%d: %w", m.Key, m.Version, err)
		}
		if string(got) != string(want) {
			return fmt.Errorf("%q v%d: bytes differ", m.Key, m.Version)
		}
		return nil
	})
	if err != nil {
		t.Fatalf("run %d (seed %d): an object the store reports is not complete and valid: %v", run, seed, err)
	}
	for k, v := range acked {
		if got, ok := seen[k]; !ok || got < v {
			t.Fatalf("run %d (seed %d): acknowledged %q v%d lost (store has v%d, present %v)", run, seed, k, v, got, ok)
		}
	}
	if m := s.Metrics(); m.Corruptions != 0 {
		t.Fatalf("run %d (seed %d): %d corruptions", run, seed, m.Corruptions)
	}
}
