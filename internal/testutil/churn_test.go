package testutil

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// fakeChurnEnv makes this test binary a fake client of Churn's protocol: "good" or "bad".
const fakeChurnEnv = "MOONCAKE_TESTUTIL_FAKE_CHURN"

func TestMain(m *testing.M) {
	if mode := os.Getenv(fakeChurnEnv); mode != "" {
		fakeChurnClient(mode, os.Args[1:])
		os.Exit(0)
	}
	VerifyNoLeaks(m)
}

func fakeChurn(mode string) Churn {
	self, _ := os.Executable()
	return Churn{Master: "127.0.0.1:1", Cycles: 3, ExitUnmounts: true, Command: func(args ...string) *exec.Cmd {
		cmd := exec.Command(self, args...)
		cmd.Env = append(os.Environ(), fakeChurnEnv+"="+mode)
		return cmd
	}}
}

// TestChurnPasses: clients that follow the rules pass (the judge is not always failing).
func TestChurnPasses(t *testing.T) {
	if p := fakeChurn("good").run(t); len(p) > 0 {
		t.Fatalf("well-behaved fake clients: %s", strings.Join(p, "\n"))
	}
}

// TestChurnFails: each kind of violation is reported.
func TestChurnFails(t *testing.T) {
	p := strings.Join(fakeChurn("bad").run(t), "\n")
	for _, want := range []string{
		"long0: 1 of ", "puts failed: putfail long0-x",
		"acknowledged objects did not read back: getfail long0-1 ",
		"cycle 0: right after close, 2 of the departed client's 2 objects are still there (is_exist/get): short00-a=1/empty",
		"cycle 1: right after exit, 2 of the departed client's 2 objects are still there",
	} {
		if !strings.Contains(p, want) {
			t.Errorf("violations lack %q:\n%s", want, p)
		}
	}
}

// TestTombstone: a Write (and a ShmPutWrite) to a departed worker's address is recorded with
// its key; a read is not.
func TestTombstone(t *testing.T) {
	tb, err := newTombstone("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := tb.l.Addr().String()
	send := func(op byte, body []byte) {
		t.Helper()
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		hello := append([]byte("MCGO\x01\x00\x00\x00\x02\x00"), "cl"...)
		c.Write(hello)
		reply := make([]byte, 10)
		if _, err := c.Read(reply); err != nil || string(reply[:4]) != "MCGO" {
			t.Fatalf("hello reply %q: %v", reply, err)
		}
		hdr := make([]byte, 32)
		hdr[0] = op
		binary.LittleEndian.PutUint32(hdr[4:], uint32(len(body)))
		c.Write(append(hdr, body...))
		c.Read(reply) // until the reset
	}
	key := func(prefix []byte, k string) []byte {
		b := binary.LittleEndian.AppendUint32(prefix, uint32(len(k)))
		return append(b, k+"rest of the request"...)
	}
	send(40, key(nil, "k1"))
	send(42, key(nil, "read"))
	send(101, key(make([]byte, 24), "k2"))
	tb.close()
	var got []string
	for _, w := range tb.writes() {
		got = append(got, w.what)
	}
	if strings.Join(got, ",") != "Write k1,ShmPutWrite k2" {
		t.Fatalf("recorded %q", got)
	}
}

// fakeChurnClient plays a client without a cluster. "good" follows the rules; "bad" fails a
// put, loses an object on a worker that never left, and keeps a departed client's objects.
func fakeChurnClient(mode string, args []string) {
	role, name := args[0], args[2]
	in := bufio.NewScanner(os.Stdin)
	if role == "short" {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			panic(err)
		}
		fmt.Printf("ready %s %s-a,%s-b\n", l.Addr(), name, name)
		in.Scan()
		switch in.Text() {
		case "close":
			l.Close()
			fmt.Println("closed 0")
		case "exit":
			return
		}
		for in.Scan() {
		}
		return
	}
	fmt.Println("ready")
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := 1; ; i++ {
			select {
			case <-stop:
				return
			case <-time.After(5 * time.Millisecond):
			}
			now := time.Now().UnixNano()
			fmt.Printf("ack %s-%d 127.0.0.1:1 %d\n", name, i, now)
			if mode == "bad" && i == 1 {
				fmt.Printf("putfail %s-x %d -900 boom\n", name, now)
				fmt.Printf("getfail %s-%d %d 1 0 empty\n", name, i, now)
			}
		}
	}()
	for in.Scan() {
		f := strings.Fields(in.Text())
		if f[0] == "stop" {
			break
		}
		reply := "exist"
		for range f[1:] {
			if mode == "bad" {
				reply += " 1/empty"
			} else {
				reply += " 0/empty"
			}
		}
		fmt.Println(reply)
	}
	close(stop)
	<-done
	fmt.Println("done puts=1 gets=1")
}
