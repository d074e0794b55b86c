// Command offthreadbench isolates what an exported Go function costs when a C thread calls it
// and it blocks on the network (docs/clib.md, "Cost of a call"). A thread made with
// pthread_create (cthread.go) runs one operation at a time: RTTS request/response exchanges
// of 8 bytes over loopback TCP with an echo goroutine, made
//
//	A  inside the export, on the caller's locked M (what a plain cgo export does);
//	B  on a new goroutine started by the export, the C thread waiting on a futex and woken
//	   by a cgo call from the goroutine (what libmooncake_store's batch calls do);
//	C  on a new goroutine, the export waiting on a Go channel;
//	G  by a Go goroutine, no C at all (the floor);
//	B+spin  as B, the C thread spinning up to 50 µs before it sleeps.
//
// The cases alternate ROUNDS times over the same connections; it prints each one's median and
// range of µs per operation. A separate module under testdata: not part of the library.
//
//	cd cmd/libmooncake_store/testdata/offthreadbench && go run . ROUNDS OPS RTTS   # e.g. 9 4000 2
package main

/*
#include <stdint.h>
typedef struct { volatile uint32_t done; int64_t rc; } mb_slot;
void mb_wake(mb_slot *s);
double mb_run(int mode, int iters);
*/
import "C"

import (
	"fmt"
	"io"
	"net"
	"os"
	"sort"
	"strconv"
	"time"
)

var conns chan net.Conn // client connections to the echo server, one per operation in flight
var rtts = 2

func rpc() int64 {
	c := <-conns
	var b [8]byte
	for i := 0; i < rtts; i++ {
		if _, err := c.Write(b[:]); err != nil {
			panic(err)
		}
		if _, err := io.ReadFull(c, b[:]); err != nil {
			panic(err)
		}
	}
	conns <- c
	return 1
}

//export mbDirect
func mbDirect() C.int64_t { return C.int64_t(rpc()) }

//export mbStart
func mbStart(p *C.mb_slot) {
	go func() {
		p.rc = C.int64_t(rpc())
		C.mb_wake(p)
	}()
}

//export mbChan
func mbChan() C.int64_t {
	ch := make(chan int64, 1)
	go func() { ch <- rpc() }()
	return C.int64_t(<-ch)
}

func main() {
	if len(os.Args) < 3 {
		fmt.Fprintln(os.Stderr, "usage: offthreadbench ROUNDS OPS [RTTS]")
		os.Exit(2)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		panic(err)
	}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				var b [8]byte
				for {
					if _, err := io.ReadFull(c, b[:]); err != nil {
						return
					}
					c.Write(b[:])
				}
			}()
		}
	}()
	conns = make(chan net.Conn, 4)
	for i := 0; i < 4; i++ {
		c, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			panic(err)
		}
		conns <- c
	}
	rounds, _ := strconv.Atoi(os.Args[1])
	iters, _ := strconv.Atoi(os.Args[2])
	if len(os.Args) > 3 {
		rtts, _ = strconv.Atoi(os.Args[3])
	}
	names := []string{"A direct(locked M)", "B goroutine+futex", "C goroutine+chan", "G pure Go", "B+spin50us"}
	res := make([][]float64, 5)
	for r := 0; r < rounds; r++ {
		for m := 0; m < 5; m++ {
			var us float64
			if m == 3 {
				st := time.Now()
				for i := 0; i < iters; i++ {
					rpc()
				}
				us = float64(time.Since(st).Nanoseconds()) / 1e3 / float64(iters)
			} else {
				us = float64(C.mb_run(C.int(m), C.int(iters)))
			}
			res[m] = append(res[m], us)
		}
	}
	for m, n := range names {
		v := append([]float64(nil), res[m]...)
		sort.Float64s(v)
		fmt.Printf("%-22s median %6.1f µs  range %6.1f-%6.1f\n", n, v[len(v)/2], v[0], v[len(v)-1])
	}
}
