package client_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/mooncake-go/mooncake/client"
)

// BenchmarkSharedMemoryPut compares a same-host put through the staging area with the same
// put over TCP, eight in flight, into a warm arena (upserts of a few keys reuse their ranges).
//
//	go test ./client -run '^$' -bench SharedMemoryPut -benchtime 2s
func BenchmarkSharedMemoryPut(b *testing.B) {
	ip := startInproc(b, 1, 1<<30)
	ctx := context.Background()
	for _, size := range []int{1 << 20, 16 << 20} {
		for _, path := range []string{"shm", "tcp"} {
			b.Run(fmt.Sprintf("%dMiB/%s", size>>20, path), func(b *testing.B) {
				c := connectWith(b, ip, client.Config{DisableSharedMemory: path == "tcp"})
				v := val(size, 9)
				var next atomic.Int64
				b.SetBytes(int64(size))
				b.SetParallelism(4) // 8 in flight on 2 cores
				b.ResetTimer()
				b.RunParallel(func(pb *testing.PB) {
					key := fmt.Sprintf("bench-%s-%d-%d", path, size, next.Add(1))
					for pb.Next() {
						if err := c.Put(ctx, key, v, client.ReplicateConfig{Upsert: true}); err != nil {
							b.Error(err)
							return
						}
					}
				})
			})
		}
	}
}
