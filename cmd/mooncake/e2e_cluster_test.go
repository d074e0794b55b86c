package main

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mooncake-go/mooncake/client"
	"github.com/mooncake-go/mooncake/internal/base"
	"github.com/mooncake-go/mooncake/internal/testutil"
)

// testCluster is three masters and some workers, each its own process.
type testCluster struct {
	t           *testing.T
	bin, dir    string
	masterFlags []string
	masterDir   string // the masters' data directories are masterDir/<id>
	masters     []*proc
	masterRPC   []string
	workers     []*proc
	workerAddr  []string
}

// startCluster starts three masters and nWorkers workers with the extra worker flags. Ports
// are picked free; a start that loses a port race is retried on new ports.
func startCluster(t *testing.T, bin string, masterFlags []string, nWorkers int, workerFlags ...string) *testCluster {
	t.Helper()
	c := &testCluster{t: t, bin: bin, dir: t.TempDir(), masterFlags: masterFlags}
	for attempt := 0; ; attempt++ {
		err, retry := c.startMasters(attempt)
		if err == nil {
			break
		}
		for _, m := range c.masters {
			m.kill()
		}
		if !retry || attempt == 3 {
			t.Fatal(err)
		}
		t.Logf("retrying the masters on other ports: %v", err)
	}
	for i := range nWorkers {
		c.startWorker(i, workerFlags...)
	}
	return c
}

// startMasters starts the three masters of one attempt. Each attempt has data directories of
// its own: masters of a failed attempt may have bootstrapped raft state naming that attempt's
// addresses, and a node that kept such state would follow a new leader while its own
// configuration still names the old peers (it could never elect after a failover).
func (c *testCluster) startMasters(attempt int) (err error, portInUse bool) {
	c.masters, c.masterRPC = nil, nil
	var peers, rpcs []string
	raft := make([]string, 3)
	ports := freePorts(c.t, 6)
	for i := range 3 {
		raft[i] = hostPort(ports[2*i])
		peers = append(peers, fmt.Sprintf("m%d=%s", i+1, raft[i]))
		c.masterRPC = append(c.masterRPC, hostPort(ports[2*i+1]))
		rpcs = append(rpcs, fmt.Sprintf("m%d=%s", i+1, c.masterRPC[i]))
	}
	c.masterDir = filepath.Join(c.dir, fmt.Sprintf("attempt%d", attempt))
	for i := range 3 {
		id := fmt.Sprintf("m%d", i+1)
		args := append([]string{"master", "--id", id,
			"--data_dir", filepath.Join(c.masterDir, id), "--rpc_address", c.masterRPC[i], "--raft_address", raft[i],
			"--metrics_port", "0", "--peers", strings.Join(peers, ","), "--peer_rpc_addresses", strings.Join(rpcs, ",")}, c.masterFlags...)
		c.masters = append(c.masters, startProc(c.t, id, c.bin, args...))
	}
	for _, m := range c.masters {
		if inUse, err := m.waitReady(60 * time.Second); err != nil {
			return err, inUse
		}
	}
	return nil, false
}

func (c *testCluster) startWorker(i int, flags ...string) {
	c.t.Helper()
	id := fmt.Sprintf("w%d", i+1)
	for attempt := 0; ; attempt++ {
		addr := hostPort(freePort(c.t))
		args := append([]string{"worker", "--master_server_address", strings.Join(c.masterRPC, ","),
			"--worker_address", addr, "--worker_id", id, "--metrics_port", "0"}, flags...)
		p := startProc(c.t, id, c.bin, args...)
		inUse, err := p.waitReady(60 * time.Second)
		if err == nil {
			if i < len(c.workers) {
				c.workers[i], c.workerAddr[i] = p, addr
			} else {
				c.workers, c.workerAddr = append(c.workers, p), append(c.workerAddr, addr)
			}
			return
		}
		p.kill()
		if !inUse || attempt == 3 {
			c.t.Fatal(err)
		}
	}
}

// leader returns the index of the leading master, asking the leader through the client.
func (c *testCluster) leader(cl *client.Client) int {
	c.t.Helper()
	var idx int
	testutil.WaitFor(c.t, "a leader", 30*time.Second, func() error {
		st, err := cl.Status(context.Background())
		if err != nil {
			return err
		}
		for i := range c.masters {
			if st.Leader == fmt.Sprintf("m%d", i+1) {
				idx = i
				return nil
			}
		}
		return fmt.Errorf("leader %q", st.Leader)
	})
	return idx
}

// waitWorkers waits until the leader reports n active workers.
func waitWorkers(t *testing.T, cl *client.Client, n int) {
	t.Helper()
	testutil.WaitFor(t, fmt.Sprintf("%d active workers", n), 60*time.Second, func() error {
		st, err := cl.Status(context.Background())
		if err != nil {
			return err
		}
		active := 0
		for _, w := range st.Workers {
			if w.State == "active" {
				active++
			}
		}
		if active != n {
			return fmt.Errorf("%d active workers: %+v", active, st.Workers)
		}
		return nil
	})
}

// putObjects puts n objects named prefix<i> of sizes from sizeOf through cl, concurrency 8,
// and returns the checksum of each acknowledged one.
func putObjects(t *testing.T, cl *client.Client, prefix string, seed uint64, n int, sizeOf func(i int) int64,
	rc client.ReplicateConfig) map[string]uint64 {
	t.Helper()
	var (
		mu    sync.Mutex // protects sums, first
		sums  = map[string]uint64{}
		first error
		wg    sync.WaitGroup
		next  = make(chan int)
	)
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				key := fmt.Sprintf("%s%04d", prefix, i)
				v := objectValue(seed, i, sizeOf(i))
				err := cl.Put(context.Background(), key, v, rc)
				mu.Lock()
				if err == nil {
					sums[key] = base.Checksum(v)
				} else if first == nil {
					first = err
				}
				mu.Unlock()
			}
		}()
	}
	for i := range n {
		next <- i
	}
	close(next)
	wg.Wait()
	if first != nil {
		t.Fatalf("put: %v", first)
	}
	return sums
}

// checkObjects reads every object back (concurrency 8) and compares its checksum.
func checkObjects(t *testing.T, cl *client.Client, sums map[string]uint64) {
	t.Helper()
	keys := make(chan string)
	var (
		mu   sync.Mutex // protects errs
		errs []error
		wg   sync.WaitGroup
	)
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for k := range keys {
				v, err := cl.Get(context.Background(), k)
				if err == nil && base.Checksum(v) != sums[k] {
					err = fmt.Errorf("%s: %w: checksum differs", k, base.ErrCorruption)
				}
				if err != nil {
					mu.Lock()
					errs = append(errs, err)
					mu.Unlock()
				}
			}
		}()
	}
	for k := range sums {
		keys <- k
	}
	close(keys)
	wg.Wait()
	if len(errs) > 0 {
		t.Fatalf("%d of %d objects did not read back; first: %v", len(errs), len(sums), errors.Join(errs[:min(3, len(errs))]...))
	}
}

// TestClusterFailover is issue 5's check: three masters and two workers as processes; 500
// objects of 64 KiB-4 MiB with 2 replicas; SIGKILL the leader, puts work again; every object
// reads back; SIGKILL a worker, every object still reads from its other replica; the killed
// master restarts and catches up.
func TestClusterFailover(t *testing.T) {
	bin := buildBinary(t)
	c := startCluster(t, bin, []string{"--client_ttl", "5s"}, 2, "--global_segment_size", "768MiB")
	cl := connectClient(t, c.masterRPC...)
	waitWorkers(t, cl, 2)
	testutil.WaitFor(t, "three masters in the status", 30*time.Second, func() error {
		st, err := cl.Status(context.Background())
		if err != nil || len(st.Masters) != 3 {
			return fmt.Errorf("%v %+v", err, st.Masters)
		}
		return nil
	})

	sizeOf := func(i int) int64 { return logUniformSize(i, 64<<10, 4<<20) }
	rc := client.ReplicateConfig{Replicas: 2}
	start := time.Now()
	sums := putObjects(t, cl, "obj/", 1, 500, sizeOf, rc)
	var total int64
	for i := range 500 {
		total += sizeOf(i)
	}
	t.Logf("put 500 objects, %s, 2 replicas, in %v", base.Bytes(total), time.Since(start).Round(time.Millisecond))

	// SIGKILL the leader; puts succeed again once a new leader is elected. This is a
	// correctness check with a generous bound: a put must eventually succeed. How fast is
	// measured by server.BenchmarkFailover (docs/benchmarks.md, "Failover"), not asserted here;
	// the gap is logged. The put is one call, as an application makes it: the client retries
	// inside it (within its Timeout) until a new leader answers; it is called again only if it
	// gives up.
	old := c.leader(cl)
	c.masters[old].kill()
	killed := time.Now()
	for i := 0; ; i++ {
		ctx, cancel := context.WithDeadline(context.Background(), killed.Add(60*time.Second))
		key := fmt.Sprintf("after-failover/%d", i)
		v := objectValue(2, i, 64<<10)
		err := cl.Put(ctx, key, v, rc)
		cancel()
		if err == nil {
			sums[key] = base.Checksum(v)
			break
		}
		if time.Since(killed) > 60*time.Second {
			t.Fatalf("no put succeeded within 60s of killing the leader: %v", err)
		}
		t.Logf("put %d after the SIGKILL failed, retrying: %v", i, err)
	}
	t.Logf("failover: first put after leader SIGKILL succeeded after %.3f s (issue target 5 s); killed m%d",
		time.Since(killed).Seconds(), old+1)
	newLeader := c.leader(cl)
	if newLeader == old {
		t.Fatalf("m%d still leads after SIGKILL", old+1)
	}
	checkObjects(t, cl, sums)

	// SIGKILL a worker: every object still reads from its other replica.
	c.workers[0].kill()
	checkObjects(t, cl, sums)
	t.Logf("all %d objects read back after SIGKILL of worker w1", len(sums))

	// Restart the killed master: it catches up with the leader.
	c.masters[old].restart()
	c.masters[old].mustReady()
	testutil.WaitFor(t, "the restarted master to catch up", 60*time.Second, func() error {
		lst, err := cl.Status(context.Background())
		if err != nil {
			return err
		}
		st, err := cl.MasterStatus(context.Background(), c.masterRPC[old])
		if err != nil {
			return err
		}
		if st.Keys != lst.Keys || st.AppliedIndex < lst.AppliedIndex || st.Leader == "" {
			return fmt.Errorf("m%d has %d keys at index %d, leader %s has %d at %d", old+1, st.Keys, st.AppliedIndex, lst.Leader, lst.Keys, lst.AppliedIndex)
		}
		return nil
	})
	t.Logf("m%d restarted and caught up", old+1)
}
