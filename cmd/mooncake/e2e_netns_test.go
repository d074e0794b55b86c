package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/mooncake-go/mooncake/client"
	"github.com/mooncake-go/mooncake/internal/testutil"
)

// The cluster-across-hosts test (issue 24, item 5) runs every process in a network namespace
// of its own, so each is a host with its own address, and cuts hosts off by taking their
// switch port down.
//
// The network: one "switch" namespace holding a bridge, and one namespace per host, joined to
// the bridge by a veth pair (eth0 in the host, p<i> in the switch). Everything lives inside
// those namespaces: the host's own network is never touched, and the test subnet is only ever
// addressed from inside them (the test process itself talks to nothing but `ip`).
const (
	// netnsPrefix starts the name of every namespace this test creates, followed by the pid
	// of the test process: leftovers of a crashed run are those whose pid is gone.
	netnsPrefix = "mcgoe2e-"
	// netnsSubnet is a private /24 that exists only inside the test's namespaces.
	netnsSubnet = "10.251.24."
)

// netns is the test network: the switch namespace and the hosts' namespaces.
type netns struct {
	t      *testing.T
	sw     string
	hosts  []string
	cutSet map[int]bool
}

// requireNetns skips the test where network namespaces cannot be made: not root, no `ip`
// (iproute2; .ci/run installs it), or a kernel or container that refuses them.
func requireNetns(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root to create network namespaces (CI runs as root); skipped")
	}
	if _, err := exec.LookPath("ip"); err != nil {
		t.Skip("needs iproute2's ip (apt-get install iproute2; .ci/run installs it); skipped")
	}
	probe := fmt.Sprintf("%s%d-probe", netnsPrefix, os.Getpid())
	if out, err := exec.Command("ip", "netns", "add", probe).CombinedOutput(); err != nil {
		t.Skipf("ip netns add refused (no CAP_SYS_ADMIN in this container?): %v: %s; skipped", err, out)
	}
	_ = exec.Command("ip", "netns", "del", probe).Run()
}

// ipCmd runs ip with args and fails the test on error.
func ipCmd(t *testing.T, args ...string) {
	t.Helper()
	if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
		t.Fatalf("ip %s: %v: %s", strings.Join(args, " "), err, out)
	}
}

// cleanNetnsLeftovers removes the namespaces of earlier runs whose test process is gone,
// killing what still runs in them (a crashed run's servers, which only it started).
func cleanNetnsLeftovers(t *testing.T) {
	t.Helper()
	out, err := exec.Command("ip", "netns", "list").Output()
	if err != nil {
		t.Fatalf("ip netns list: %v", err)
	}
	for _, line := range strings.Split(string(out), "\n") {
		name, _, _ := strings.Cut(strings.TrimSpace(line), " ")
		rest, ok := strings.CutPrefix(name, netnsPrefix)
		if !ok {
			continue
		}
		pidStr, _, _ := strings.Cut(rest, "-")
		pid, err := strconv.Atoi(pidStr)
		if err != nil || syscall.Kill(pid, 0) == nil {
			continue // not ours, or its run is alive
		}
		t.Logf("removing namespace %s, left by a run (pid %d) that is gone", name, pid)
		removeNetns(name)
	}
}

// removeNetns kills the processes in namespace name and deletes it (its veths go with it).
func removeNetns(name string) {
	if pids, err := exec.Command("ip", "netns", "pids", name).Output(); err == nil {
		for _, f := range strings.Fields(string(pids)) {
			if pid, err := strconv.Atoi(f); err == nil {
				_ = syscall.Kill(pid, syscall.SIGKILL)
			}
		}
	}
	_ = exec.Command("ip", "netns", "del", name).Run()
}

// newNetns builds a switch and n hosts, host i (from 0) at netnsSubnet + (i+1), and removes
// them all when the test ends.
func newNetns(t *testing.T, n int) *netns {
	t.Helper()
	cleanNetnsLeftovers(t)
	base := fmt.Sprintf("%s%d-", netnsPrefix, os.Getpid())
	nw := &netns{t: t, sw: base + "sw", cutSet: map[int]bool{}}
	t.Cleanup(func() {
		for _, h := range nw.hosts {
			removeNetns(h)
		}
		removeNetns(nw.sw)
	})
	ipCmd(t, "netns", "add", nw.sw)
	ipCmd(t, "-n", nw.sw, "link", "set", "lo", "up")
	ipCmd(t, "-n", nw.sw, "link", "add", "br0", "type", "bridge")
	ipCmd(t, "-n", nw.sw, "link", "set", "br0", "up")
	for i := range n {
		h := base + "h" + strconv.Itoa(i+1)
		port := "p" + strconv.Itoa(i+1)
		ipCmd(t, "netns", "add", h)
		nw.hosts = append(nw.hosts, h)
		ipCmd(t, "-n", h, "link", "set", "lo", "up")
		ipCmd(t, "link", "add", "eth0", "netns", h, "type", "veth", "peer", "name", port, "netns", nw.sw)
		ipCmd(t, "-n", nw.sw, "link", "set", port, "master", "br0", "up")
		ipCmd(t, "-n", h, "addr", "add", nw.addr(i)+"/24", "dev", "eth0")
		ipCmd(t, "-n", h, "link", "set", "eth0", "up")
	}
	return nw
}

func (nw *netns) addr(i int) string { return netnsSubnet + strconv.Itoa(i+1) }

// cut takes host i's switch port down: nothing reaches it and it reaches nothing.
func (nw *netns) cut(i int) {
	nw.t.Helper()
	nw.t.Logf("cutting host %d (%s) off", i+1, nw.addr(i))
	ipCmd(nw.t, "-n", nw.sw, "link", "set", "p"+strconv.Itoa(i+1), "down")
}

// heal brings host i's switch port back up.
func (nw *netns) heal(i int) {
	nw.t.Helper()
	nw.t.Logf("bringing host %d (%s) back", i+1, nw.addr(i))
	ipCmd(nw.t, "-n", nw.sw, "link", "set", "p"+strconv.Itoa(i+1), "up")
}

// start runs the binary on host i as a server and waits for its ready line.
func (nw *netns) start(i int, name, bin string, args ...string) *proc {
	nw.t.Helper()
	p := startProc(nw.t, name, "ip", append([]string{"netns", "exec", nw.hosts[i], bin}, args...)...)
	p.mustReady()
	return p
}

// TestClusterAcrossHosts is issue 24's item 5: three masters, two workers and a client, each on
// a host of its own (a network namespace), with the built binary. Objects are put with two
// replicas; the leader's host is cut off (the client finds the new leader, puts and gets go
// on), then a worker's host long enough to be declared dead (its objects are read from the
// other), and each comes back: no acknowledged object is lost, and the returned worker holds
// its objects again (read from it alone with the other worker cut off).
func TestClusterAcrossHosts(t *testing.T) {
	requireNetns(t)
	bin := buildBinary(t)
	dir := t.TempDir()
	nw := newNetns(t, 6)
	const clientHost = 5
	var peers, rpcs, masterRPC []string
	for i := range 3 {
		peers = append(peers, fmt.Sprintf("m%d=%s:7000", i+1, nw.addr(i)))
		rpcs = append(rpcs, fmt.Sprintf("m%d=%s:50051", i+1, nw.addr(i)))
		masterRPC = append(masterRPC, nw.addr(i)+":50051")
	}
	for i := range 3 {
		id := fmt.Sprintf("m%d", i+1)
		nw.start(i, id, bin, "master", "--id", id, "--data_dir", filepath.Join(dir, id),
			"--rpc_address", nw.addr(i)+":50051", "--raft_address", nw.addr(i)+":7000", "--metrics_port", "9003",
			"--peers", strings.Join(peers, ","), "--peer_rpc_addresses", strings.Join(rpcs, ","),
			// The default client_ttl. NB: not shorter: a worker whose leader's host vanishes
			// (no RST) waits out its heartbeat timeout (5 heartbeat intervals, 5 s) before it
			// tries another master, so under a client_ttl of 3 s the new leader counted both
			// workers dead after every failover, and puts failed with "only 1 workers alive".
			"--client_ttl", "10s")
	}
	for w := range 2 {
		id := fmt.Sprintf("w%d", w+1)
		nw.start(3+w, id, bin, "worker", "--master_server_address", strings.Join(masterRPC, ","),
			"--worker_address", nw.addr(3+w)+":12300", "--worker_id", id, "--metrics_port", "9300",
			"--global_segment_size", "64MiB", "--root_fs_dir", filepath.Join(dir, id),
			// Bytes cross the network: no same-host shared-memory reads between namespaces.
			"--shared_memory=false")
	}
	env := []string{envMaster + "=" + strings.Join(masterRPC, ",")}
	cli := func(stdin []byte, args ...string) cliResult {
		t.Helper()
		// A short dial timeout, as on a LAN: a cut-off master costs each command 300ms, not
		// the default 2s, before the client moves on to the next.
		args = append([]string{"netns", "exec", nw.hosts[clientHost], bin, args[0], "--dial_timeout", "300ms"}, args[1:]...)
		return runBin(t, "ip", env, bytes.NewReader(stdin), args...)
	}
	status := func() (client.Status, error) {
		var st client.Status
		r := cli(nil, "status", "--json")
		if r.code != 0 {
			return st, fmt.Errorf("status: exit %d: %s", r.code, r.stderr)
		}
		return st, json.Unmarshal([]byte(r.stdout), &st)
	}
	worker := func(st client.Status, id string) client.WorkerStatus {
		for _, w := range st.Workers {
			if w.ID == id {
				return w
			}
		}
		return client.WorkerStatus{}
	}
	values := map[string][]byte{}
	put := func(from, to int) {
		t.Helper()
		for i := from; i < to; i++ {
			k := fmt.Sprintf("obj/%03d", i)
			v := objectValue(24, i, logUniformSize(i, 1<<10, 1<<20))
			if r := cli(v, "put", "--replicas", "2", k, "-"); r.code != 0 {
				t.Fatalf("put %s: exit %d: %s", k, r.code, r.stderr)
			}
			values[k] = v
		}
	}
	getAll := func(when string) {
		t.Helper()
		for k, v := range values {
			r := cli(nil, "get", k)
			if r.code != 0 || r.stdout != string(v) {
				t.Fatalf("%s: get %s: exit %d, %d bytes (want %d): %s", when, k, r.code, len(r.stdout), len(v), r.stderr)
			}
		}
	}
	waitStatus := func(what string, cond func(client.Status) error) {
		t.Helper()
		testutil.WaitFor(t, what, 90*time.Second, func() error {
			st, err := status()
			if err != nil {
				return err
			}
			return cond(st)
		})
	}
	bothActive := func(n int64) func(client.Status) error {
		return func(st client.Status) error {
			for _, id := range []string{"w1", "w2"} {
				if w := worker(st, id); w.State != "active" || w.Objects != n {
					return fmt.Errorf("%s: %s with %d objects, want active with %d", id, w.State, w.Objects, n)
				}
			}
			return nil
		}
	}

	start := time.Now()
	// A worker's ready line means it serves, not that the leader has it yet.
	waitStatus("both workers registered", bothActive(0))
	put(0, 10)
	getAll("before any cut")
	waitStatus("both workers holding every object", bothActive(10))

	// The leader's host goes away: a new leader is elected among the other two, and the
	// client (which lists all three masters) finds it.
	st, err := status()
	if err != nil {
		t.Fatal(err)
	}
	old := st.Leader
	oldIdx, _ := strconv.Atoi(strings.TrimPrefix(old, "m"))
	nw.cut(oldIdx - 1)
	cutAt := time.Now()
	waitStatus("a new leader", func(st client.Status) error {
		if st.Leader == "" || st.Leader == old {
			return fmt.Errorf("leader %q (the old one was %s)", st.Leader, old)
		}
		return nil
	})
	t.Logf("new leader after %v", time.Since(cutAt).Round(time.Millisecond))
	// The workers were heartbeating to the old leader; until they reach the new one, their
	// objects may be invisible to reads (not lost: re-adopted when they register). Wait for
	// that, and say how long it took.
	waitStatus("every object visible under the new leader", func(st client.Status) error {
		if err := bothActive(10)(st); err != nil {
			return err
		}
		if st.InvisibleObjects != 0 || st.Keys != 10 {
			return fmt.Errorf("%d keys, %d invisible", st.Keys, st.InvisibleObjects)
		}
		return nil
	})
	t.Logf("every object visible again %v after the cut", time.Since(cutAt).Round(time.Millisecond))
	put(10, 20)
	getAll("leader's host cut off")
	nw.heal(oldIdx - 1)
	waitStatus("both workers holding every object after the leader's host came back", bothActive(20))

	// A worker's host goes away long enough to be declared dead; every object is still read
	// from the other worker; the worker comes back holding its objects.
	cutWorker := func(w int, when string) {
		t.Helper()
		id := fmt.Sprintf("w%d", w+1)
		nw.cut(3 + w)
		waitStatus(id+" declared dead", func(st client.Status) error {
			if ws := worker(st, id); ws.State != "dead" {
				return fmt.Errorf("%s is %s", id, ws.State)
			}
			return nil
		})
		getAll(when)
		nw.heal(3 + w)
		waitStatus(id+" back, holding its objects", bothActive(20))
	}
	cutWorker(0, "w1 cut off")
	// w1's objects came back: with w2 cut off, every object is read from w1 alone.
	cutWorker(1, "w2 cut off, w1 serving alone")
	if st, err = status(); err != nil || st.Keys != int64(len(values)) {
		t.Fatalf("status after every cut: %d keys, want %d (%v)", st.Keys, len(values), err)
	}
	t.Logf("20 objects, 2 replicas, 3 cuts across 6 hosts: nothing lost, in %v", time.Since(start).Round(time.Millisecond))
}
