package benchmarks

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mooncake-go/mooncake/internal/base"
)

// Store is what a workload needs from a backend. *client.Client satisfies it through
// ClientStore; a map satisfies it in tests.
type Store interface {
	// Put stores value under key. The workload never reuses a key within one run.
	Put(ctx context.Context, key string, value []byte) error
	// BatchPut stores values[i] under keys[i] in one batch call (a put workload with Batch > 1).
	BatchPut(ctx context.Context, keys []string, values [][]byte) error
	// GetInto reads the object into buf (len(buf) is the object's size) and returns its length.
	GetInto(ctx context.Context, key string, buf []byte) (int, error)
	// Exists reports whether key is stored (a get workload with ExistsFirst).
	Exists(ctx context.Context, key string) (bool, error)
}

// Op is a workload operation.
type Op string

// The operations a workload runs.
const (
	OpPut Op = "put"
	OpGet Op = "get"
)

// ParseOp parses "put" or "get".
func ParseOp(s string) (Op, error) {
	switch Op(s) {
	case OpPut, OpGet:
		return Op(s), nil
	}
	return "", fmt.Errorf("%w: unknown op %q (want put or get)", base.ErrInvalidParams, s)
}

// Workload describes one run: Count operations of Op on objects of Size bytes, Concurrency of
// them in flight at once.
type Workload struct {
	Op          Op
	Size        int64
	Count       int
	Concurrency int
	// KeyPrefix namespaces the run's keys; the default is "bench/<random>/".
	KeyPrefix string
	// Objects is how many distinct objects a get workload stores and then reads round-robin.
	// The default is Count, capped so the objects fit in 256 MiB (but at least Concurrency of
	// them): a get benchmark measures reads, and more objects than the store's DRAM would only
	// measure eviction (in cache mode, reads of evicted objects fail).
	Objects int
	// Batch, for puts, is the objects of one operation: each operation is one BatchPut of
	// Batch objects of Size bytes (Count operations, Count*Batch objects). 0 or 1: Put.
	Batch int
	// ExistsFirst, for gets, makes each operation an Exists of its key, then the get, as
	// LMCache asks contains before each get.
	ExistsFirst bool
}

// perOp returns the objects of one operation.
func (w *Workload) perOp() int { return max(w.Batch, 1) }

// defaultGetBytes bounds the bytes a get workload stores when Objects is zero.
const defaultGetBytes = 256 << 20

// distinct returns the number of distinct keys the workload uses.
func (w *Workload) distinct() int {
	if w.Op != OpGet {
		return w.Count * w.perOp()
	}
	n := w.Objects
	if n <= 0 {
		n = max(int(defaultGetBytes/max(w.Size, 1)), w.Concurrency)
	}
	return max(1, min(n, w.Count))
}

// Validate reports a bad workload as an error wrapping base.ErrInvalidParams.
func (w *Workload) Validate() error {
	switch {
	case w.Op != OpPut && w.Op != OpGet:
		return fmt.Errorf("%w: unknown op %q (want put or get)", base.ErrInvalidParams, w.Op)
	case w.Size <= 0 || w.Size > 1<<32:
		return fmt.Errorf("%w: size must be 1 B to 4 GiB, got %d", base.ErrInvalidParams, w.Size)
	case w.Count <= 0:
		return fmt.Errorf("%w: count must be positive, got %d", base.ErrInvalidParams, w.Count)
	case w.Concurrency <= 0 || w.Concurrency > 1024:
		return fmt.Errorf("%w: concurrency must be 1 to 1024, got %d", base.ErrInvalidParams, w.Concurrency)
	case int64(w.Concurrency)*w.Size > 16<<30:
		return fmt.Errorf("%w: concurrency x size is over 16 GiB of buffers", base.ErrInvalidParams)
	case w.Objects < 0:
		return fmt.Errorf("%w: objects must not be negative, got %d", base.ErrInvalidParams, w.Objects)
	case w.Batch < 0 || w.Batch > 4096:
		return fmt.Errorf("%w: batch must be 1 to 4096, got %d", base.ErrInvalidParams, w.Batch)
	case w.Batch > 1 && w.Op != OpPut:
		return fmt.Errorf("%w: batch is for puts only", base.ErrInvalidParams)
	case w.ExistsFirst && w.Op != OpGet:
		return fmt.Errorf("%w: exists first is for gets only", base.ErrInvalidParams)
	case int64(w.Count)*int64(w.perOp()) > 1<<24:
		return fmt.Errorf("%w: count x batch is over 16M objects", base.ErrInvalidParams)
	}
	return nil
}

// Keys returns the keys of the workload's operations, in order (Batch of them per operation).
// A get workload cycles over its distinct objects, so the first distinct() keys are the ones
// Prepare stores.
func (w *Workload) Keys() []string {
	prefix := w.KeyPrefix
	if prefix == "" {
		prefix = fmt.Sprintf("bench/%08x/", rand.Uint32())
		w.KeyPrefix = prefix
	}
	keys := make([]string, w.Count*w.perOp())
	n := w.distinct()
	for i := range keys {
		keys[i] = fmt.Sprintf("%s%d", prefix, i%n)
	}
	return keys
}

// Result is what a run measured.
type Result struct {
	Name        string
	Ops         int
	Bytes       int64
	Elapsed     time.Duration
	Concurrency int
	// Latencies of the successful operations, sorted ascending.
	Latencies []time.Duration
}

// GBps is the throughput in 10^9 bytes per second.
func (r Result) GBps() float64 {
	if r.Elapsed <= 0 {
		return 0
	}
	return float64(r.Bytes) / r.Elapsed.Seconds() / 1e9
}

// OpsPerSec is the operation rate.
func (r Result) OpsPerSec() float64 {
	if r.Elapsed <= 0 {
		return 0
	}
	return float64(r.Ops) / r.Elapsed.Seconds()
}

// Percentile returns the latency at quantile q (0..1); 0 without samples.
func (r Result) Percentile(q float64) time.Duration {
	if len(r.Latencies) == 0 {
		return 0
	}
	i := int(q * float64(len(r.Latencies)-1))
	return r.Latencies[i]
}

// String prints one line: name, GB/s, ops/s, p50, p99.
func (r Result) String() string {
	return fmt.Sprintf("%-14s %8.3f GB/s %10.1f ops/s  p50 %-10v p99 %-10v (%d ops, %s, concurrency %d, %v)",
		r.Name, r.GBps(), r.OpsPerSec(), r.Percentile(0.50).Round(time.Microsecond),
		r.Percentile(0.99).Round(time.Microsecond), r.Ops, base.Bytes(r.Bytes), r.Concurrency,
		r.Elapsed.Round(time.Millisecond))
}

// Fill writes deterministic, incompressible-looking bytes derived from seed into p.
func Fill(p []byte, seed uint64) {
	r := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	for i := 0; i+8 <= len(p); i += 8 {
		v := r.Uint64()
		p[i], p[i+1], p[i+2], p[i+3] = byte(v), byte(v>>8), byte(v>>16), byte(v>>24)
		p[i+4], p[i+5], p[i+6], p[i+7] = byte(v>>32), byte(v>>40), byte(v>>48), byte(v>>56)
	}
	for i := len(p) &^ 7; i < len(p); i++ {
		p[i] = byte(r.Uint64())
	}
}

// Prepare stores the objects a get workload reads (not measured). A put workload needs none.
func Prepare(ctx context.Context, s Store, w Workload, keys []string) error {
	if w.Op != OpGet {
		return nil
	}
	// Keys repeat after the distinct ones (see Keys): store each once.
	seen := make(map[string]bool, len(keys))
	unique := keys[:0:0]
	for _, k := range keys {
		if !seen[k] {
			seen[k] = true
			unique = append(unique, k)
		}
	}
	_, err := runOps(ctx, w.Concurrency, w.Size, unique, func(ctx context.Context, key string, buf []byte) error {
		return s.Put(ctx, key, buf)
	})
	return err
}

// Run runs the workload against s and measures it. A get workload needs Prepare first with
// the same keys. The first error stops the run and is returned.
func Run(ctx context.Context, s Store, w Workload, keys []string) (Result, error) {
	if err := w.Validate(); err != nil {
		return Result{}, err
	}
	if len(keys) != w.Count*w.perOp() {
		return Result{}, fmt.Errorf("%w: %d keys for %d operations of %d objects", base.ErrInvalidParams, len(keys), w.Count, w.perOp())
	}
	if w.perOp() > 1 {
		return runBatches(ctx, s, w, keys)
	}
	op := func(ctx context.Context, key string, buf []byte) error { return s.Put(ctx, key, buf) }
	if w.Op == OpGet {
		op = func(ctx context.Context, key string, buf []byte) error {
			if w.ExistsFirst {
				if ok, err := s.Exists(ctx, key); err != nil || !ok {
					return fmt.Errorf("benchmarks: exists %q: %v, %w", key, ok, err)
				}
			}
			n, err := s.GetInto(ctx, key, buf)
			if err == nil && int64(n) != w.Size {
				err = fmt.Errorf("benchmarks: get %q returned %d bytes, want %d", key, n, w.Size)
			}
			return err
		}
	}
	r, err := runOps(ctx, w.Concurrency, w.Size, keys, op)
	r.Name = "mooncake " + string(w.Op)
	return r, err
}

// runBatches runs a put workload of BatchPut calls: operation i stores keys[i*Batch:][:Batch],
// every value the goroutine's one buffer.
func runBatches(ctx context.Context, s Store, w Workload, keys []string) (Result, error) {
	n := w.perOp()
	ops := make([]string, w.Count)
	for i := range ops {
		ops[i] = keys[i*n]
	}
	first := make(map[string]int, len(ops))
	for i, k := range ops {
		first[k] = i
	}
	r, err := runOps(ctx, w.Concurrency, w.Size, ops, func(ctx context.Context, key string, buf []byte) error {
		i := first[key]
		values := make([][]byte, n)
		for j := range values {
			values[j] = buf
		}
		return s.BatchPut(ctx, keys[i*n:(i+1)*n], values)
	})
	r.Name = fmt.Sprintf("mooncake put x%d", n)
	r.Bytes *= int64(n)
	return r, err
}

// runOps runs op once per key on concurrency goroutines, each with its own buffer of size
// bytes (filled with data for puts).
func runOps(ctx context.Context, concurrency int, size int64, keys []string,
	op func(ctx context.Context, key string, buf []byte) error) (Result, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		next     atomic.Int64
		mu       sync.Mutex // protects lat and firstErr
		lat      = make([]time.Duration, 0, len(keys))
		firstErr error
		wg       sync.WaitGroup
	)
	start := time.Now()
	for g := range concurrency {
		wg.Add(1)
		go func() {
			defer wg.Done()
			buf := make([]byte, size)
			Fill(buf, uint64(g)+1)
			local := make([]time.Duration, 0, len(keys)/concurrency+1)
			for {
				i := next.Add(1) - 1
				if i >= int64(len(keys)) || ctx.Err() != nil {
					break
				}
				t0 := time.Now()
				if err := op(ctx, keys[i], buf); err != nil {
					mu.Lock()
					if firstErr == nil {
						firstErr = fmt.Errorf("%s: %w", keys[i], err)
					}
					mu.Unlock()
					cancel()
					break
				}
				local = append(local, time.Since(t0))
			}
			mu.Lock()
			lat = append(lat, local...)
			mu.Unlock()
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	slices.Sort(lat)
	r := Result{Ops: len(lat), Bytes: int64(len(lat)) * size, Elapsed: elapsed, Concurrency: concurrency, Latencies: lat}
	// cancel is called only after an error, so a done ctx here means the caller's ctx ended.
	if firstErr == nil && ctx.Err() != nil {
		firstErr = ctx.Err()
	}
	return r, firstErr
}
