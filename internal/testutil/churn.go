package testutil

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// Churn is issue 18's check that clients may come and go: a master alone, two long-lived
// clients with segments putting and getting without pause, and cycles of a short-lived client
// with a segment that puts 20 objects and then, in turn, closes its store, exits without
// closing it, or is SIGKILLed. It fails when
//
//   - a long-lived client's put fails (any put, at any time of the run);
//   - an acknowledged object does not read back byte-exact, unless its only replica was on a
//     short-lived client that had left by then (Mooncake drops such objects too) and the read
//     found nothing (never wrong bytes); after a close (or an exit that unmounts) such a key
//     must also be gone from is_exist;
//   - right after close() returns (and after an exit, when Churn.ExitUnmounts) a long-lived
//     client still sees one of the departed client's objects (is_exist != 0 or get != b"");
//   - a put is placed on a departed client more than DepartSlack after it left.
//
// Placement is observed, not inferred: once a short-lived process is gone, a tombstone
// listener takes over its worker's address and records every Write, ShmPutOpen and
// ShmPutWrite frame that arrives (docs/protocol.md: a client writes there only because the
// leader placed a replica there), then resets the connection, as a dead worker's host would.
//
// Each language provides the client processes through Command, which speak this line
// protocol (python/tests/churn_client.py is the reference; the C and Go helpers copy it):
//
//	args: long|short MASTER NAME OBJECT_SIZE SEGMENT_BYTES
//	long, stdout:  "ready" after setup, then per put "ack KEY ADDR NS" (ADDR: the replica's
//	               worker, from the replica descriptor) or "putfail KEY NS RC MESSAGE...",
//	               and "getfail KEY NS IS_EXIST LEN wrong|empty" for a read that did not
//	               return the put's bytes (each put is read back at once and again before the
//	               client removes it; it keeps a window of recent objects);
//	long, stdin:   "exist K1 K2 ..." -> "exist E/S E/S ..." (E: is_exist, S: ok|empty|wrong
//	               for a get of the key, whose value any helper of the language recomputes);
//	               "stop" -> reads back its window, prints "done PUTS GETS", then closes its
//	               store and exits 0 at EOF of stdin (the driver closes every long-lived
//	               client's stdin only once all have read back: one closing first would unmount
//	               the other's objects placed on its segment before they were read back).
//	short, stdout: "ready ADDR K1,K2,..." after 20 puts placed on its own worker (ADDR), with
//	               "putfail ..." lines for puts that failed;
//	short, stdin:  "close" -> closes its store, prints "closed RC", exits at EOF of stdin;
//	               "exit" -> exits 0 without closing its store; killed: the driver SIGKILLs.
//
// NS are Unix times in nanoseconds (same host, same clock as the driver's).
type Churn struct {
	// Master is the client RPC address of the master (StartMaster).
	Master string
	// Command returns the unstarted helper process for args (the protocol above).
	Command func(args ...string) *exec.Cmd
	// Cycles of the short-lived client: close, exit, kill, close, ... Default 20.
	Cycles int
	// ExitUnmounts: a process that exits without closing its store unmounts it (Python's
	// interpreter exit closes every store). Otherwise an exit counts as a kill.
	ExitUnmounts bool
	// ObjectSize of every put. Default 16 KiB.
	ObjectSize int
	// Segment is each client's global_segment_size in bytes. Default 32 MiB.
	Segment int64
}

// DepartSlack is how long after a client left (close() returned, the process exited or was
// killed) a placement on its worker is still tolerated: the leader must stop placing on a
// killed worker within 1 s (issue 18); a put placed just before a close may still write
// just after it.
const DepartSlack = time.Second

// departure is one short-lived client that left.
type departure struct {
	cycle int
	how   string // close, exit, kill
	addr  string
	// began is when the driver started the departure (sent close or exit, or the SIGKILL):
	// from then on a read of an object held there may fail. at is when it was done (close()
	// returned, the process was reaped): the unmount checks and DepartSlack count from it.
	began, at time.Time
	// unmounts: its objects must be gone at once (close, or an exit when ExitUnmounts).
	unmounts bool
	tomb     *tombstone // nil when its address could not be taken over
}

// ack is one acknowledged put of a long-lived client.
type ack struct {
	addr string
	at   time.Time
}

// churnEvent is a put failure or a bad read of a long-lived client, kept as reported.
type churnEvent struct {
	client, line string
	key          string
	at           time.Time
}

// longClient is one long-lived client process and what it reported.
type longClient struct {
	name  string
	cmd   *exec.Cmd
	stdin io.WriteCloser
	ready chan struct{}
	exist chan string // replies to "exist"
	done  chan string // the "done" line
	exit  chan error  // Wait's result

	mu       sync.Mutex // protects the fields below
	acks     map[string]ack
	lastAck  time.Time // the latest ack's time
	putFails []churnEvent
	getFails []churnEvent
	other    []string // lines it should not have printed
}

// Run runs the scenario and fails t with every violation found, then returns.
func (c Churn) Run(t *testing.T) {
	t.Helper()
	if problems := c.run(t); len(problems) > 0 {
		t.Errorf("churn: %d violation(s) of issue 18:\n%s", len(problems), strings.Join(problems, "\n"))
	}
}

// run runs the scenario and returns the violations; it fails t only when it cannot go on.
func (c Churn) run(t *testing.T) []string {
	t.Helper()
	if c.Cycles == 0 {
		c.Cycles = 20
	}
	if c.ObjectSize == 0 {
		c.ObjectSize = 16 << 10
	}
	if c.Segment == 0 {
		c.Segment = 32 << 20
	}
	start := time.Now()
	var longs []*longClient
	for i := range 2 {
		longs = append(longs, c.startLong(t, fmt.Sprintf("long%d", i)))
	}
	for _, l := range longs {
		select {
		case <-l.ready:
		case err := <-l.exit:
			t.Fatalf("%s exited before it was ready: %v", l.name, err)
		case <-time.After(60 * time.Second):
			t.Fatalf("%s not ready after 60 s", l.name)
		}
	}
	t.Logf("churn: long-lived clients ready after %v", time.Since(start).Round(time.Millisecond))

	var deps []*departure
	var problems []string
	hows := []string{"close", "exit", "kill"}
	for i := range c.Cycles {
		d, p := c.cycle(t, i, hows[i%len(hows)], longs[i%2])
		deps = append(deps, d)
		problems = append(problems, p...)
	}
	// Let the long-lived clients run past the last departure's slack, so a placement on it
	// after the slack has time to show: each acks a put made 1.5 s after the slack ended.
	if len(deps) > 0 {
		past := deps[len(deps)-1].at.Add(DepartSlack + 1500*time.Millisecond)
		for _, l := range longs {
			if err := Poll(time.Until(past)+60*time.Second, func() error {
				if at := l.lastAckAt(); at.Before(past) {
					return fmt.Errorf("its last ack at %v", at.Format(time.RFC3339Nano))
				}
				return nil
			}); err != nil {
				problems = append(problems, fmt.Sprintf("%s acked no put made after %v: %v", l.name, past.Format(time.RFC3339Nano), err))
			}
		}
	}
	for _, l := range longs {
		io.WriteString(l.stdin, "stop\n")
	}
	var summary []string
	for _, l := range longs {
		select {
		case s := <-l.done:
			summary = append(summary, l.name+": "+s)
		case err := <-l.exit:
			// Its lines were all recorded before Wait returned: a "done" is there if printed.
			select {
			case s := <-l.done:
				summary = append(summary, l.name+": "+s)
			default:
				problems = append(problems, fmt.Sprintf("%s exited before its final read-back: %v", l.name, err))
			}
		case <-time.After(60 * time.Second):
			problems = append(problems, l.name+": no final read-back within 60 s")
		}
	}
	for _, l := range longs {
		l.stdin.Close() // every one has read back: now they may close (and unmount)
	}
	for _, d := range deps {
		if d.tomb != nil {
			d.tomb.close()
		}
	}
	problems = append(problems, c.judge(longs, deps)...)
	t.Logf("churn: %d cycles in %v; %s", c.Cycles, time.Since(start).Round(time.Millisecond), strings.Join(summary, "; "))
	return problems
}

// cycle runs one short-lived client to its end (how) and checks what must hold at once.
func (c Churn) cycle(t *testing.T, i int, how string, asker *longClient) (*departure, []string) {
	t.Helper()
	name := fmt.Sprintf("short%02d", i)
	cmd := c.Command("short", c.Master, name, strconv.Itoa(c.ObjectSize), strconv.FormatInt(c.Segment, 10))
	stderr := &SyncBuffer{}
	cmd.Stderr = stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", name, err)
	}
	exited := make(chan error, 1)
	lines := make(chan string, 64)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
		exited <- cmd.Wait()
	}()
	t.Cleanup(func() { cmd.Process.Kill() })
	var problems []string
	fail := func(format string, args ...any) {
		cmd.Process.Kill()
		t.Fatalf("%s (%s): %s\nstderr: %s", name, how, fmt.Sprintf(format, args...), Tail(stderr.String(), 3000))
	}
	next := func(prefix string) []string {
		timer := time.NewTimer(60 * time.Second)
		defer timer.Stop()
		for {
			select {
			case l, ok := <-lines:
				if !ok {
					fail("exited before %q", prefix)
				}
				f := strings.Fields(l)
				if len(f) > 0 && f[0] == prefix {
					return f
				}
				if len(f) > 0 && f[0] == "putfail" {
					problems = append(problems, fmt.Sprintf("cycle %d: a put to its own worker failed: %s", i, l))
					continue
				}
				fail("unexpected line %q", l)
			case <-timer.C:
				fail("no %q line within 60 s", prefix)
			}
		}
	}
	f := next("ready")
	if len(f) != 3 {
		fail("bad ready line %q", strings.Join(f, " "))
	}
	d := &departure{cycle: i, how: how, addr: f[1], unmounts: how == "close" || how == "exit" && c.ExitUnmounts}
	keys := strings.Split(f[2], ",")
	switch how {
	case "close":
		d.began = time.Now()
		io.WriteString(stdin, "close\n")
		f = next("closed")
		d.at = time.Now()
		if len(f) != 2 || f[1] != "0" {
			problems = append(problems, fmt.Sprintf("cycle %d: close() = %v", i, f[1:]))
		}
		problems = append(problems, c.checkGone(i, how, asker, keys)...)
		stdin.Close()
		if err := <-exited; err != nil {
			problems = append(problems, fmt.Sprintf("cycle %d: %s exited with %v after close", i, name, err))
		}
	case "exit":
		d.began = time.Now()
		io.WriteString(stdin, "exit\n")
		if err := <-exited; err != nil {
			problems = append(problems, fmt.Sprintf("cycle %d: %s exited with %v", i, name, err))
		}
		d.at = time.Now()
		if d.unmounts {
			problems = append(problems, c.checkGone(i, how, asker, keys)...)
		}
	case "kill":
		d.began, d.at = time.Now(), time.Now()
		cmd.Process.Signal(syscall.SIGKILL)
		<-exited
	}
	d.tomb, err = newTombstone(d.addr)
	if err != nil {
		problems = append(problems, fmt.Sprintf("cycle %d: cannot watch the departed worker's address %s: %v", i, d.addr, err))
	}
	return d, problems
}

// checkGone asks a long-lived client whether the departed client's keys are gone.
func (c Churn) checkGone(i int, how string, asker *longClient, keys []string) []string {
	io.WriteString(asker.stdin, "exist "+strings.Join(keys, " ")+"\n")
	var reply string
	select {
	case reply = <-asker.exist:
	case <-time.After(30 * time.Second):
		return []string{fmt.Sprintf("cycle %d (%s): %s did not answer is_exist within 30 s", i, how, asker.name)}
	}
	got := strings.Fields(reply)[1:]
	if len(got) != len(keys) {
		return []string{fmt.Sprintf("cycle %d (%s): is_exist reply %q for %d keys", i, how, reply, len(keys))}
	}
	var still []string
	for j, g := range got {
		if g != "0/empty" {
			still = append(still, keys[j]+"="+g)
		}
	}
	if len(still) == 0 {
		return nil
	}
	return []string{fmt.Sprintf("cycle %d: right after %s, %d of the departed client's %d objects are still there (is_exist/get): %s",
		i, how, len(still), len(keys), sample(still, 5))}
}

// departingAround reports whether a departure was under way around t: begun no later than a
// second after t (the replica descriptor is read just after the ack's timestamp) and done no
// earlier than a second before it.
func departingAround(deps []*departure, t time.Time) bool {
	for _, d := range deps {
		if d.began.Before(t.Add(time.Second)) && d.at.After(t.Add(-time.Second)) {
			return true
		}
	}
	return false
}

// judge checks the long-lived clients' records against the departures.
func (c Churn) judge(longs []*longClient, deps []*departure) []string {
	var problems []string
	byAddr := map[string]*departure{}
	for _, d := range deps {
		byAddr[d.addr] = d
	}
	// when describes t against the departures, for messages.
	when := func(t time.Time) string {
		var last *departure
		for _, d := range deps {
			if !d.at.After(t) {
				last = d
			}
		}
		if last == nil {
			return "before the first departure"
		}
		return fmt.Sprintf("%.2fs after cycle %d's %s of %s", t.Sub(last.at).Seconds(), last.cycle, last.how, last.addr)
	}
	for _, l := range longs {
		l.mu.Lock()
		var pf []string
		for _, e := range l.putFails {
			pf = append(pf, fmt.Sprintf("%s [%s]", e.line, when(e.at)))
		}
		if len(pf) > 0 {
			problems = append(problems, fmt.Sprintf("%s: %d of %d puts failed: %s", l.name, len(pf), len(l.acks)+len(l.putFails), sample(pf, 6)))
		}
		var bad []string
		for _, e := range l.getFails {
			f := strings.Fields(e.line) // getfail KEY NS IS_EXIST LEN wrong|empty
			a := l.acks[e.key]
			d := byAddr[a.addr]
			// Lost with its holder: read after the departure began, nothing returned, and
			// once an unmount completed, not listed either.
			lost := d != nil && !d.began.After(e.at) && f[5] == "empty" && (!d.unmounts || e.at.Before(d.at) || f[3] == "0")
			// No replica right after the ack ("?"): it was already gone, which only a
			// departure under way can do (this client removes an object only after reading
			// it back). Lost with its holder if one was under way then.
			if d == nil && a.addr == "?" && f[5] == "empty" && f[3] == "0" {
				lost = departingAround(deps, a.at)
			}
			if !lost {
				bad = append(bad, fmt.Sprintf("%s (on %s) [%s]", e.line, a.addr, when(e.at)))
			}
		}
		if len(bad) > 0 {
			problems = append(problems, fmt.Sprintf("%s: %d acknowledged objects did not read back: %s", l.name, len(bad), sample(bad, 6)))
		}
		problems = append(problems, l.other...)
		l.mu.Unlock()
	}
	for _, d := range deps {
		if d.tomb == nil {
			continue
		}
		var late []string
		for _, w := range d.tomb.writes() {
			if w.at.Sub(d.at) > DepartSlack {
				late = append(late, fmt.Sprintf("%s at +%.2fs", w.what, w.at.Sub(d.at).Seconds()))
			}
		}
		if len(late) > 0 {
			problems = append(problems, fmt.Sprintf("cycle %d: %d writes placed on the %s client's worker %s more than %v after it left: %s",
				d.cycle, len(late), d.how, d.addr, DepartSlack, sample(late, 4)))
		}
	}
	return problems
}

// sample joins the first n of s and says how many more there were.
func sample(s []string, n int) string {
	if len(s) <= n {
		return strings.Join(s, "; ")
	}
	return strings.Join(s[:n], "; ") + fmt.Sprintf("; ... (%d more)", len(s)-n)
}

// startLong starts a long-lived client and a goroutine that records its lines.
func (c Churn) startLong(t *testing.T, name string) *longClient {
	t.Helper()
	l := &longClient{name: name, ready: make(chan struct{}), exist: make(chan string, 1), done: make(chan string, 1),
		exit: make(chan error, 1), acks: map[string]ack{}}
	l.cmd = c.Command("long", c.Master, name, strconv.Itoa(c.ObjectSize), strconv.FormatInt(c.Segment, 10))
	stderr := &SyncBuffer{}
	l.cmd.Stderr = stderr
	var err error
	if l.stdin, err = l.cmd.StdinPipe(); err != nil {
		t.Fatal(err)
	}
	stdout, err := l.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := l.cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", name, err)
	}
	t.Cleanup(func() {
		l.cmd.Process.Kill()
		if t.Failed() {
			t.Logf("--- %s stderr (tail):\n%s", name, Tail(stderr.String(), 3000))
		}
	})
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			l.record(sc.Text())
		}
		l.exit <- l.cmd.Wait()
	}()
	return l
}

// lastAckAt returns the time of the latest put l acknowledged (zero before the first).
func (l *longClient) lastAckAt() time.Time {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.lastAck
}

// record takes one line of a long-lived client.
func (l *longClient) record(line string) {
	f := strings.Fields(line)
	if len(f) == 0 {
		return
	}
	at := func(s string) time.Time {
		ns, _ := strconv.ParseInt(s, 10, 64)
		return time.Unix(0, ns)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	switch {
	case f[0] == "ready":
		close(l.ready)
	case f[0] == "ack" && len(f) == 4:
		a := ack{addr: f[2], at: at(f[3])}
		l.acks[f[1]] = a
		if a.at.After(l.lastAck) {
			l.lastAck = a.at
		}
	case f[0] == "putfail" && len(f) >= 4:
		l.putFails = append(l.putFails, churnEvent{client: l.name, line: line, key: f[1], at: at(f[2])})
	case f[0] == "getfail" && len(f) == 6:
		l.getFails = append(l.getFails, churnEvent{client: l.name, line: line, key: f[1], at: at(f[2])})
	case f[0] == "exist":
		select {
		case l.exist <- line:
		default: // a reply nobody waits for any more (checkGone gave up)
		}
	case f[0] == "done":
		select {
		case l.done <- strings.Join(f[1:], " "):
		default:
			l.other = append(l.other, fmt.Sprintf("%s printed a second %q", l.name, line))
		}
	default:
		l.other = append(l.other, fmt.Sprintf("%s printed %q", l.name, line))
	}
}

// tombstone listens on a departed worker's address and records the frames that would have
// written an object there.
type tombstone struct {
	l  net.Listener
	wg sync.WaitGroup

	mu sync.Mutex // protects w
	w  []tombWrite
}

type tombWrite struct {
	at   time.Time
	what string // "Write KEY", "ShmPutOpen", "ShmPutWrite KEY"
}

func newTombstone(addr string) (*tombstone, error) {
	var l net.Listener
	// The kernel may take a moment to release the port of a process just reaped.
	err := Poll(time.Second, func() (err error) {
		l, err = net.Listen("tcp", addr)
		return err
	})
	if err != nil {
		return nil, err
	}
	tb := &tombstone{l: l}
	tb.wg.Add(1)
	go func() {
		defer tb.wg.Done()
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			tb.wg.Add(1)
			go func() {
				defer tb.wg.Done()
				tb.serve(c)
			}()
		}
	}()
	return tb, nil
}

// serve answers the handshake, reads the first frame's header and key (docs/protocol.md
// sections 1-4) and resets the connection.
func (tb *tombstone) serve(c net.Conn) {
	defer func() {
		if tc, ok := c.(*net.TCPConn); ok {
			tc.SetLinger(0) // a reset, as from a host whose worker is gone
		}
		c.Close()
	}()
	c.SetDeadline(time.Now().Add(5 * time.Second))
	hello := make([]byte, 10)
	if _, err := io.ReadFull(c, hello); err != nil || string(hello[:4]) != "MCGO" {
		return
	}
	if _, err := io.CopyN(io.Discard, c, int64(binary.LittleEndian.Uint16(hello[8:]))); err != nil {
		return
	}
	// Accepted: magic, version 1, status 0, no message.
	if _, err := c.Write([]byte{'M', 'C', 'G', 'O', 1, 0, 0, 0, 0, 0}); err != nil {
		return
	}
	hdr := make([]byte, 32)
	if _, err := io.ReadFull(c, hdr); err != nil {
		return
	}
	at := time.Now()
	body := make([]byte, min(binary.LittleEndian.Uint32(hdr[4:]), 24+4+4096))
	io.ReadFull(c, body)
	key := func(off int) string {
		if len(body) < off+4 {
			return "?"
		}
		n := int(binary.LittleEndian.Uint32(body[off:]))
		if len(body) < off+4+n {
			return "?"
		}
		return string(body[off+4 : off+4+n])
	}
	var what string
	switch hdr[0] {
	case 40: // Write: WriteRequest starts with its key
		what = "Write " + key(0)
	case 100:
		what = "ShmPutOpen"
	case 101: // ShmPutWrite: stage, stage_offset, length, then a WriteRequest
		what = "ShmPutWrite " + key(24)
	default:
		return // reads and pins of objects that were there
	}
	tb.mu.Lock()
	tb.w = append(tb.w, tombWrite{at: at, what: what})
	tb.mu.Unlock()
}

func (tb *tombstone) writes() []tombWrite {
	tb.mu.Lock()
	defer tb.mu.Unlock()
	return slices.Clone(tb.w)
}

func (tb *tombstone) close() {
	tb.l.Close()
	tb.wg.Wait()
}
