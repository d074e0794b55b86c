package benchmarks

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"syscall"
	"testing"
	"time"

	"github.com/mooncake-go/mooncake/client"
	"github.com/mooncake-go/mooncake/internal/testutil"
	"github.com/mooncake-go/mooncake/server/master"
	"github.com/mooncake-go/mooncake/server/worker"
)

// startStandalone runs one master and one DRAM-only worker in this process.
func startStandalone(tb testing.TB, segment int64) *client.Client {
	tb.Helper()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	m, err := master.NewMaster(master.Config{DataDir: tb.TempDir(), RPCAddress: "127.0.0.1:0", Logger: log})
	if err != nil {
		tb.Fatal(err)
	}
	w, err := worker.NewWorker(worker.Config{WorkerID: "w1", MasterAddresses: []string{m.Addr()},
		Address: "127.0.0.1:0", GlobalSegmentSize: segment, Logger: log})
	if err != nil {
		m.Shutdown(context.Background())
		tb.Fatal(err)
	}
	c, err := client.Connect(context.Background(), client.Config{MasterAddresses: []string{m.Addr()}, Logger: log})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		c.Close()
		w.Shutdown(ctx)
		m.Shutdown(ctx)
	})
	testutil.WaitFor(tb, "the worker registered", 30*time.Second, func() error {
		st, err := c.Status(context.Background())
		if err == nil && (len(st.Workers) != 1 || st.Workers[0].State != "active") {
			err = fmt.Errorf("workers %+v", st.Workers)
		}
		return err
	})
	return c
}

// BenchmarkStandalone measures put and get through the client against an in-process
// standalone store, and raw loopback TCP with the same sizes and concurrency in the same run;
// it reports both and their ratio ("x-loopback"). Numbers on a shared 2-core machine are noisy.
func BenchmarkStandalone(b *testing.B) {
	for _, op := range []Op{OpPut, OpGet} {
		for _, size := range []int64{64 << 10, 1 << 20, 2 << 20, 16 << 20} {
			b.Run(fmt.Sprintf("%s/%s", op, sizeName(size)), func(b *testing.B) {
				// A fresh store per run: removed objects are freed by the worker only after
				// its next heartbeat, and a full DRAM-only worker would evict what a get
				// benchmark prepared.
				c := startStandalone(b, 1<<30)
				ctx := context.Background()
				w := Workload{Op: op, Size: size, Count: b.N, Concurrency: 4}
				keys := w.Keys()
				s := ClientStore{C: c}
				if op == OpGet {
					// Gets cycle over a live set well under the 1 GiB segment. (Puts need
					// fresh keys; the DRAM-only worker evicts the oldest when it fills.)
					n := min(len(keys), int(512<<20/size))
					pw := w
					pw.Count = n
					if err := Prepare(ctx, s, pw, keys[:n]); err != nil {
						b.Fatal(err)
					}
					for i := n; i < len(keys); i++ {
						keys[i] = keys[i%n]
					}
				}
				b.ReportAllocs()
				b.SetBytes(size)
				b.ResetTimer()
				cpu0 := processCPU()
				r, err := Run(ctx, s, w, keys)
				cpu1 := processCPU()
				b.StopTimer()
				if err != nil {
					b.Fatal(err)
				}
				base, err := LoopbackTCP(ctx, w)
				cpu2 := processCPU()
				if err != nil {
					b.Fatal(err)
				}
				// CPU per operation (client, master and worker here; both ends of the
				// loopback exchange): steadier than GB/s on a shared machine.
				b.ReportMetric(float64((cpu1-cpu0).Microseconds())/float64(b.N), "cpu-µs/op")
				b.ReportMetric(float64((cpu2-cpu1).Microseconds())/float64(b.N), "loopback-cpu-µs/op")
				b.ReportMetric(r.GBps(), "GB/s")
				b.ReportMetric(base.GBps(), "loopback-GB/s")
				b.ReportMetric(r.GBps()/base.GBps(), "x-loopback")
				b.ReportMetric(float64(r.Percentile(0.99).Microseconds()), "p99-µs")
			})
		}
	}
}

func sizeName(n int64) string {
	if n >= 1<<20 {
		return fmt.Sprintf("%dMiB", n>>20)
	}
	return fmt.Sprintf("%dKiB", n>>10)
}

// processCPU returns the CPU time (user and system) this process has used.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
