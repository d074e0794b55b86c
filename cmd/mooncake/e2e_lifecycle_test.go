package main

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mooncake-go/mooncake/client"
	"github.com/mooncake-go/mooncake/internal/base"
	"github.com/mooncake-go/mooncake/internal/testutil"
)

// waitWorkerState waits until the leader reports worker id in state.
func waitWorkerState(t *testing.T, cl *client.Client, id, state string, timeout time.Duration) {
	t.Helper()
	testutil.WaitFor(t, fmt.Sprintf("worker %s %s", id, state), timeout, func() error {
		st, err := cl.Status(context.Background())
		if err != nil {
			return err
		}
		for _, w := range st.Workers {
			if w.ID == id && w.State == state {
				return nil
			}
		}
		return fmt.Errorf("workers %+v", st.Workers)
	})
}

// TestWorkerReturnsAfterDeath is issue 11's first check: a worker holding durable objects is
// stopped for longer than the master waits (SIGKILL and three client_ttl; SIGTERM and past
// its restart grace), then restarted: every object reads back byte-exact, while a key removed
// and a key overwritten during the outage stay removed and new.
func TestWorkerReturnsAfterDeath(t *testing.T) {
	bin := buildBinary(t)
	const ttl = 2 * time.Second
	for _, stop := range []string{"sigkill", "sigterm"} {
		t.Run(stop, func(t *testing.T) {
			dir := t.TempDir()
			c := startCluster(t, bin, []string{"--client_ttl", ttl.String(), "--worker_restart_grace", "3s"}, 2,
				"--global_segment_size", "128MiB", "--root_fs_dir", filepath.Join(dir, "nvme"))
			cl := connectClient(t, c.masterRPC...)
			waitWorkers(t, cl, 2)
			rc := client.ReplicateConfig{Persistence: base.PersistenceDurable, PreferredWorker: "w1"}
			sums := putObjects(t, cl, "d/", 11, 60, func(i int) int64 { return logUniformSize(i, 4<<10, 512<<10) }, rc)
			for _, k := range []string{"x/removed", "x/overwritten"} {
				if err := cl.Put(context.Background(), k, []byte("old "+k), rc); err != nil {
					t.Fatal(err)
				}
			}

			away := time.Now()
			if stop == "sigkill" {
				c.workers[0].kill()
			} else if err := c.workers[0].term(30 * time.Second); err != nil {
				t.Fatal(err)
			}
			waitWorkerState(t, cl, "w1", "dead", 30*time.Second)
			// During the outage: one key removed, one overwritten (on w2, the only live worker).
			if err := cl.Remove(context.Background(), "x/removed"); err != nil && !errors.Is(err, base.ErrObjectNotFound) {
				t.Fatalf("remove during the outage: %v", err)
			}
			newVal := []byte("new value written while w1 was away")
			if err := cl.Put(context.Background(), "x/overwritten", newVal, client.ReplicateConfig{Upsert: true}); err != nil {
				t.Fatalf("overwrite during the outage: %v", err)
			}
			// The outage the check asks for lasts three client_ttl (a wall-clock condition).
			testutil.WaitFor(t, "an outage of three client_ttl", 3*ttl+30*time.Second, func() error {
				if away := time.Since(away); away < 3*ttl {
					return fmt.Errorf("w1 away for %v", away)
				}
				return nil
			})

			c.workers[0].restart()
			c.workers[0].mustReady()
			waitWorkers(t, cl, 2)
			// The segment is active once RegisterWorker commits; the re-adoption of its
			// inventory commits a moment later, when the registration's reconciliation ends.
			// Status shows it: no object is invisible any more.
			testutil.WaitFor(t, "w1's objects re-adopted", 30*time.Second, func() error {
				st, err := cl.Status(context.Background())
				if err == nil && st.InvisibleObjects != 0 {
					err = fmt.Errorf("%d objects invisible, %d lost replicas", st.InvisibleObjects, st.LostReplicas)
				}
				return err
			})
			checkObjects(t, cl, sums)
			if _, err := cl.Get(context.Background(), "x/removed"); !errors.Is(err, base.ErrObjectNotFound) {
				t.Fatalf("a key removed during the outage: %v, want not found", err)
			}
			got, err := cl.Get(context.Background(), "x/overwritten")
			if err != nil || string(got) != string(newVal) {
				t.Fatalf("a key overwritten during the outage reads %q, %v; want the new value", got, err)
			}
			t.Logf("%s: all %d durable objects read back after an outage of %v (client_ttl %v)",
				stop, len(sums), time.Since(away).Round(time.Second), ttl)
		})
	}
}

// readerLoop reads random objects of sums (which the caller may grow through add) until
// stop is called; stop returns how many reads returned wrong bytes (never allowed), how many
// failed, and how many succeeded.
type readerLoop struct {
	mu   sync.Mutex // protects sums, keys
	sums map[string]uint64
	keys []string

	done                 chan struct{}
	wg                   sync.WaitGroup
	wrong, failed, reads atomic.Int64
	firstWrong           atomic.Value // string
}

func startReaderLoop(t *testing.T, cl *client.Client, sums map[string]uint64, readers int) *readerLoop {
	t.Helper()
	r := &readerLoop{sums: map[string]uint64{}, done: make(chan struct{})}
	for k, v := range sums {
		r.add(k, v)
	}
	for g := range readers {
		r.wg.Add(1)
		go func() {
			defer r.wg.Done()
			rng := rand.New(rand.NewPCG(uint64(g), 7))
			for {
				select {
				case <-r.done:
					return
				default:
				}
				r.mu.Lock()
				if len(r.keys) == 0 {
					r.mu.Unlock()
					continue
				}
				k := r.keys[rng.IntN(len(r.keys))]
				want := r.sums[k]
				r.mu.Unlock()
				v, err := cl.Get(context.Background(), k)
				switch {
				case err != nil:
					r.failed.Add(1)
				case base.Checksum(v) != want:
					r.wrong.Add(1)
					r.firstWrong.CompareAndSwap(nil, k)
				default:
					r.reads.Add(1)
				}
			}
		}()
	}
	t.Cleanup(r.stop)
	return r
}

func (r *readerLoop) add(k string, sum uint64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, ok := r.sums[k]; !ok {
		r.keys = append(r.keys, k)
	}
	r.sums[k] = sum
}

func (r *readerLoop) stop() {
	select {
	case <-r.done:
	default:
		close(r.done)
	}
	r.wg.Wait()
}

// check stops the loop and fails the test if any read returned wrong bytes.
func (r *readerLoop) check(t *testing.T) {
	t.Helper()
	r.stop()
	t.Logf("reader loop: %d reads right, %d failed (a worker going away mid-read), %d wrong",
		r.reads.Load(), r.failed.Load(), r.wrong.Load())
	if r.wrong.Load() > 0 {
		t.Fatalf("%d reads returned wrong bytes (first: %v)", r.wrong.Load(), r.firstWrong.Load())
	}
}

// replicaCounts returns the replicas the leader's metadata places on active workers (the
// sum of their Objects), and per worker.
func replicaCounts(t *testing.T, cl *client.Client) (int64, map[string]int64, client.Status) {
	t.Helper()
	st, err := cl.Status(context.Background())
	if err != nil {
		return -1, nil, st
	}
	per := map[string]int64{}
	var sum int64
	for _, w := range st.Workers {
		if w.State == "active" {
			sum += w.Objects
			per[w.ID] = w.Objects
		}
	}
	return sum, per, st
}

// TestRepairAfterWorkerDeath is issue 11's repair check: replica_num=2 on three workers;
// SIGKILL one: every object is back to two replicas on the survivors (the time is logged);
// the worker returns: its surplus copies are trimmed, two replicas each; a reader loop never
// reads wrong bytes meanwhile.
func TestRepairAfterWorkerDeath(t *testing.T) {
	bin := buildBinary(t)
	dir := t.TempDir()
	c := startCluster(t, bin, []string{"--client_ttl", "2s"}, 3,
		"--global_segment_size", "128MiB", "--root_fs_dir", filepath.Join(dir, "nvme"))
	cl := connectClient(t, c.masterRPC...)
	waitWorkers(t, cl, 3)
	const n = 90
	sums := putObjects(t, cl, "r/", 13, n, func(i int) int64 { return logUniformSize(i, 16<<10, 1<<20) },
		client.ReplicateConfig{Replicas: 2, Persistence: base.PersistenceDurable})
	rl := startReaderLoop(t, cl, sums, 4)
	if sum, _, _ := replicaCounts(t, cl); sum != 2*n {
		t.Fatalf("%d replicas before the kill, want %d", sum, 2*n)
	}

	killed := time.Now()
	c.workers[0].kill()
	waitWorkerState(t, cl, "w1", "dead", 30*time.Second)
	dead := time.Now()
	testutil.WaitFor(t, "every object back to two replicas on w2 and w3", 2*time.Minute, func() error {
		sum, per, st := replicaCounts(t, cl)
		if sum != 2*n || per["w2"] != n || per["w3"] != n {
			return fmt.Errorf("%d replicas %v, repair %+v", sum, per, st.Repair)
		}
		return nil
	})
	_, _, st := replicaCounts(t, cl)
	t.Logf("repair: %d objects back to 2 replicas %v after w1 was declared dead (%v after the SIGKILL); repair %+v",
		n, time.Since(dead).Round(10*time.Millisecond), time.Since(killed).Round(10*time.Millisecond), st.Repair)
	checkObjects(t, cl, sums)

	c.workers[0].restart()
	c.workers[0].mustReady()
	waitWorkers(t, cl, 3)
	testutil.WaitFor(t, "w1's surplus copies trimmed", time.Minute, func() error {
		sum, per, _ := replicaCounts(t, cl)
		if sum != 2*n {
			return fmt.Errorf("%d replicas %v, want %d", sum, per, 2*n)
		}
		return nil
	})
	checkObjects(t, cl, sums)
	rl.check(t)
}

// TestDrainUnderLoad is issue 11's drain check: drain a worker (the CLI) under a writer and a
// reader loop, wait until it holds nothing, stop it: every acknowledged object reads.
func TestDrainUnderLoad(t *testing.T) {
	bin := buildBinary(t)
	dir := t.TempDir()
	c := startCluster(t, bin, []string{"--client_ttl", "3s", "--worker_restart_grace", "1s"}, 3,
		"--global_segment_size", "128MiB", "--root_fs_dir", filepath.Join(dir, "nvme"))
	cl := connectClient(t, c.masterRPC...)
	waitWorkers(t, cl, 3)
	sums := putObjects(t, cl, "a/", 17, 60, func(i int) int64 { return logUniformSize(i, 16<<10, 512<<10) },
		client.ReplicateConfig{Persistence: base.PersistenceDurable, PreferredWorker: "w1"})
	rl := startReaderLoop(t, cl, sums, 3)

	// The writer loop: every acknowledged put joins the reader loop's keys.
	var wg sync.WaitGroup
	stopWriter := make(chan struct{})
	var acked atomic.Int64
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; ; i++ {
			select {
			case <-stopWriter:
				return
			default:
			}
			k := fmt.Sprintf("b/%05d", i)
			v := objectValue(19, i, logUniformSize(i, 4<<10, 256<<10))
			if err := cl.Put(context.Background(), k, v, client.ReplicateConfig{Persistence: base.PersistenceDurable}); err == nil {
				rl.add(k, base.Checksum(v))
				acked.Add(1)
			}
		}
	}()

	env := []string{"MOONCAKE_MASTER=" + strings.Join(c.masterRPC, ",")}
	r := runBin(t, bin, env, nil, "worker", "drain", "--worker_id", "w1")
	if r.code != 0 {
		t.Fatalf("worker drain: exit %d: %s %s", r.code, r.stdout, r.stderr)
	}
	t.Logf("%s", strings.TrimSpace(r.stdout))
	start := time.Now()
	testutil.WaitFor(t, "w1 drained", 2*time.Minute, func() error {
		_, per, st := replicaCounts(t, cl)
		if per["w1"] != 0 {
			return fmt.Errorf("w1 holds %d objects; repair %+v", per["w1"], st.Repair)
		}
		return nil
	})
	t.Logf("w1 drained in %v", time.Since(start).Round(10*time.Millisecond))
	st := runBin(t, bin, env, nil, "status")
	t.Logf("status while drained:\n%s", st.stdout)
	if !strings.Contains(st.stdout, "draining") || !strings.Contains(st.stdout, "repair") {
		t.Fatalf("status does not show the drain:\n%s", st.stdout)
	}
	if err := c.workers[0].term(30 * time.Second); err != nil {
		t.Fatal(err)
	}
	close(stopWriter)
	wg.Wait()
	rl.stop()
	rl.mu.Lock()
	all := maps.Clone(rl.sums)
	rl.mu.Unlock()
	checkObjects(t, cl, all)
	rl.check(t)
	t.Logf("%d objects (%d written during the drain) all read back with w1 stopped", len(all), acked.Load())

	// --cancel on a stopped worker still clears the flag (it takes puts once it returns).
	if r := runBin(t, bin, env, nil, "worker", "drain", "--worker_id", "w1", "--cancel"); r.code != 0 {
		t.Fatalf("worker drain --cancel: exit %d: %s %s", r.code, r.stdout, r.stderr)
	}
	// Retire: refused for a live worker; the stopped one, once dead, is forgotten.
	if r := runBin(t, bin, env, nil, "worker", "retire", "--worker_id", "w2"); r.code == 0 || !strings.Contains(r.stderr, "only a dead worker") {
		t.Fatalf("worker retire of a live worker: exit %d: %s", r.code, r.stderr)
	}
	waitWorkerState(t, cl, "w1", "dead", 30*time.Second)
	if r := runBin(t, bin, env, nil, "worker", "retire", "--worker_id", "w1"); r.code != 0 {
		t.Fatalf("worker retire: exit %d: %s %s", r.code, r.stdout, r.stderr)
	}
	st2, err := cl.Status(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range st2.Workers {
		if w.ID == "w1" {
			t.Fatalf("w1 still listed after retire: %+v", w)
		}
	}
	checkObjects(t, cl, all)
}
