package client

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mooncake-go/mooncake/internal/base"
	"github.com/mooncake-go/mooncake/internal/testutil"
	"github.com/mooncake-go/mooncake/server/worker"
)

// churnHelperEnv set to 1 makes this test binary a client process of TestChurnGo (TestMain).
const churnHelperEnv = "MOONCAKE_CHURN_HELPER"

// TestChurnGo is issue 18's check with Go clients (testutil.Churn): a `mooncake master`
// alone, two long-lived processes (this test binary, see churnHelper) each with a Client and a
// worker of its own in the process, putting and getting without pause, and 20 short-lived
// ones (a worker, 20 puts, then Close, exit without closing, or SIGKILL in turn). A process
// that exits without closing is one the leader loses, as a killed one.
func TestChurnGo(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the mooncake binary; skipped with -short")
	}
	bin := testutil.BuildMooncake(t, t.TempDir())
	master, _ := testutil.StartMaster(t, bin, t.TempDir())
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	testutil.Churn{
		Master: master,
		Command: func(args ...string) *exec.Cmd {
			cmd := exec.Command(self, args...)
			cmd.Env = append(os.Environ(), churnHelperEnv+"=1")
			return cmd
		},
	}.Run(t)
}

// churnStore is a helper process's Client and the worker it runs, as an application that
// contributes memory would.
type churnStore struct {
	cl   *Client
	w    *worker.Worker
	size int
	out  sync.Mutex // serializes lines on stdout
}

func (s *churnStore) say(f ...any) {
	s.out.Lock()
	defer s.out.Unlock()
	fmt.Println(f...)
}

// churnValue is the bytes of key: any process recomputes them from the key alone.
func churnValue(key string, n int) []byte {
	h := fnv.New64a()
	h.Write([]byte(key))
	r := rand.New(rand.NewPCG(h.Sum64(), 0))
	v := make([]byte, n)
	for i := range v {
		v[i] = byte(r.Uint32())
	}
	return v
}

// churnHelper runs one client process of testutil.Churn's protocol (args: long|short MASTER
// NAME OBJECT_SIZE SEGMENT_BYTES) and returns its exit code.
func churnHelper(args []string) int {
	if len(args) != 5 {
		fmt.Fprintln(os.Stderr, "usage: long|short MASTER NAME OBJECT_SIZE SEGMENT_BYTES")
		return 2
	}
	size, _ := strconv.Atoi(args[3])
	seg, _ := strconv.ParseInt(args[4], 10, 64)
	s, err := openChurnStore(args[1], args[2], size, seg)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if args[0] == "long" {
		return s.long(args[2])
	}
	return s.short(args[2])
}

func openChurnStore(master, name string, size int, seg int64) (*churnStore, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cl, err := Connect(ctx, Config{MasterAddresses: []string{master}})
	if err != nil {
		return nil, err
	}
	w, err := worker.NewWorker(worker.Config{WorkerID: base.WorkerID(fmt.Sprintf("churn-%s-%d", name, os.Getpid())),
		MasterAddresses: []string{master}, GlobalSegmentSize: seg, Ephemeral: true})
	if err != nil {
		return nil, err
	}
	for {
		st, err := cl.Status(ctx)
		if err == nil && workerActive(st, string(w.ID())) {
			return &churnStore{cl: cl, w: w, size: size}, nil
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("worker %s not active: %v", w.ID(), err)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

func workerActive(st Status, id string) bool {
	for _, w := range st.Workers {
		if w.ID == id && w.State == "active" && w.Attached {
			return true
		}
	}
	return false
}

// close is the application's shutdown: its worker, then its client.
func (s *churnStore) close() error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	err := s.w.Shutdown(ctx)
	s.cl.Close()
	return err
}

// get is "ok", "empty" or "wrong" for a get of key, and the bytes' length.
func (s *churnStore) get(key string, want []byte) (string, int) {
	got, err := s.cl.Get(context.Background(), key)
	switch {
	case err == nil && bytes.Equal(got, want):
		return "ok", len(got)
	case len(got) == 0:
		return "empty", 0
	}
	return "wrong", len(got)
}

func (s *churnStore) exists(key string) int {
	ok, err := s.cl.Exists(context.Background(), key)
	switch {
	case err != nil:
		return -1
	case ok:
		return 1
	}
	return 0
}

func (s *churnStore) long(name string) int {
	s.say("ready")
	var stop atomic.Bool
	var puts, gets atomic.Int64
	var live []string
	readBack := func(key string) {
		gets.Add(1)
		if st, n := s.get(key, churnValue(key, s.size)); st != "ok" {
			s.say("getfail", key, time.Now().UnixNano(), s.exists(key), n, st)
		}
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		ctx := context.Background()
		for i := 1; !stop.Load(); i++ {
			key := fmt.Sprintf("%s-%d-%d", name, os.Getpid(), i)
			err := s.cl.Put(ctx, key, churnValue(key, s.size), ReplicateConfig{})
			now := time.Now().UnixNano()
			puts.Add(1)
			if err != nil {
				s.say("putfail", key, now, errorCodeOf(err), strings.ReplaceAll(err.Error(), "\n", " "))
				continue
			}
			addr := "?"
			if info, err := s.cl.Describe(ctx, key); err == nil && len(info.Replicas) > 0 {
				addr = info.Replicas[0].Address
			}
			s.say("ack", key, addr, now)
			live = append(live, key)
			readBack(key)
			if len(live) > 64 {
				readBack(live[0])
				s.cl.Remove(ctx, live[0])
				live = live[1:]
			}
		}
	}()
	sc := bufio.NewScanner(os.Stdin)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) == 0 {
			continue
		}
		if f[0] == "stop" {
			break
		}
		if f[0] == "exist" {
			reply := []any{"exist"}
			for _, k := range f[1:] {
				st, _ := s.get(k, churnValue(k, s.size))
				reply = append(reply, fmt.Sprintf("%d/%s", s.exists(k), st))
			}
			s.say(reply...)
		}
	}
	stop.Store(true)
	<-done
	for _, k := range live {
		readBack(k)
	}
	s.say("done", fmt.Sprintf("puts=%d", puts.Load()), fmt.Sprintf("gets=%d", gets.Load()))
	for sc.Scan() { // the driver closes stdin once every long-lived client has read back
	}
	s.close()
	return 0
}

func (s *churnStore) short(name string) int {
	ctx := context.Background()
	var keys []string
	addr := "?"
	for i := range 20 {
		key := fmt.Sprintf("%s-%d-%d", name, os.Getpid(), i)
		if err := s.cl.Put(ctx, key, churnValue(key, s.size), ReplicateConfig{PreferredWorker: s.w.ID()}); err != nil {
			s.say("putfail", key, time.Now().UnixNano(), errorCodeOf(err), strings.ReplaceAll(err.Error(), "\n", " "))
			continue
		}
		keys = append(keys, key)
		if info, err := s.cl.Describe(ctx, key); err == nil && addr == "?" && len(info.Replicas) > 0 {
			addr = info.Replicas[0].Address
		}
	}
	s.say("ready", addr, strings.Join(keys, ","))
	sc := bufio.NewScanner(os.Stdin)
	if !sc.Scan() {
		return 0
	}
	switch sc.Text() {
	case "close":
		rc := 0
		if err := s.close(); err != nil {
			rc = -1
			fmt.Fprintln(os.Stderr, "close:", err)
		}
		s.say("closed", rc)
	case "exit":
		os.Exit(0) // the worker and the client are left running
	}
	for sc.Scan() { // until the driver closes stdin, or kills this process
	}
	return 0
}

// errorCodeOf is the base code of err, for the putfail line.
func errorCodeOf(err error) int {
	return int(base.CodeOf(err))
}
