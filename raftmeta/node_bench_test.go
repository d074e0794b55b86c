package raftmeta_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mooncake-go/mooncake/internal/base"
	"github.com/mooncake-go/mooncake/raftmeta"
	"github.com/mooncake-go/mooncake/raftmeta/raftmetatest"
)

var benchKeySeq atomic.Int64

// BenchmarkCommit measures objects committed per second (PutEnd, 64-byte keys, 2 replicas,
// fsynced bolt log) on one node and on a three-node loopback cluster, with 1, 16 and 64
// concurrent proposers, one object per entry and 64 per entry. The one-node figures are the
// baseline for the three-node ones (same run). b.N counts objects.
//
//	go test -run '^$' -bench Commit -benchtime 3s ./raftmeta/
func BenchmarkCommit(b *testing.B) {
	for _, nodes := range []int{1, 3} {
		b.Run(fmt.Sprintf("nodes=%d", nodes), func(b *testing.B) {
			// Production timeouts: the fast test timeouts cause elections when proposers
			// saturate both cores.
			c := raftmetatest.MakeCluster(b, nodes, func(_ int, cfg *raftmeta.Config) {
				d := raftmeta.DefaultConfig()
				cfg.HeartbeatTimeout, cfg.ElectionTimeout = d.HeartbeatTimeout, d.ElectionTimeout
				cfg.LeaderLeaseTimeout, cfg.CommitTimeout = d.LeaderLeaseTimeout, d.CommitTimeout
			})
			leader := c.Node(c.Leader())
			ctx := context.Background()
			for _, w := range []base.WorkerID{"worker-a", "worker-b"} {
				if _, err := leader.Apply(ctx, raftmeta.RegisterWorker{ID: w, Address: "10.0.0.1:1"}); err != nil {
					b.Fatal(err)
				}
			}
			for _, batch := range []int{1, 64} {
				for _, proposers := range []int{1, 16, 64} {
					b.Run(fmt.Sprintf("batch=%d/proposers=%d", batch, proposers), func(b *testing.B) {
						benchCommit(b, leader, batch, proposers)
					})
				}
			}
		})
	}
}

func benchCommit(b *testing.B, leader *raftmeta.Node, batch, proposers int) {
	ctx := context.Background()
	var next atomic.Int64 // objects handed out
	var wg sync.WaitGroup
	errs := make(chan error, proposers)
	b.ReportAllocs()
	b.ResetTimer()
	start := time.Now()
	for range proposers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				n := int(min(int64(batch), int64(b.N)-next.Add(int64(batch))+int64(batch)))
				if n <= 0 {
					return
				}
				items := make([]base.Object, n)
				for i := range items {
					v, err := leader.NewVersion()
					if err != nil {
						errs <- err
						return
					}
					items[i] = base.Object{ObjectMeta: base.ObjectMeta{Key: fmt.Sprintf("bench/%058d",
						benchKeySeq.Add(1)), Size: 1 << 20, Version: v, Checksum: uint64(v)},
						Replicas: []base.WorkerID{"worker-a", "worker-b"}}
				}
				res, err := leader.Apply(ctx, raftmeta.PutEnd{Items: items})
				if err == nil && res.Failed() != 0 {
					err = res.Err
				}
				if err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	close(errs)
	for err := range errs {
		b.Fatal(err)
	}
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "objects/s")
}
