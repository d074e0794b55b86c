package worker

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/mooncake-go/mooncake/internal/base"
	"github.com/mooncake-go/mooncake/tier"
	"github.com/mooncake-go/mooncake/transfer"
)

// Prefetch on exist (issue 21 item 4, docs/protocol.md "Prefetch on exist"): a client whose
// is_exist asked for prefetch_to_memory sends Prefetch for the objects found here; this
// worker answers at once and promotes the NVMe-only ones to DRAM in the background
// (tier.Engine.Prefetch), so the read that follows is a DRAM hit.
//
// Bounds: the bytes of accepted prefetches not yet finished stay within
// Config.PrefetchBudget (an item that does not fit is dropped and counted, never
// queued), and at most prefetchRunners promotions run at once (each an NVMe read and a DRAM
// copy). Runners are started on demand and end when the queue is empty or the worker stops.

// prefetchRunners bounds the promotions running at once (NVMe reads in parallel).
const prefetchRunners = 2

// prefetcher holds the prefetches accepted and not yet done.
type prefetcher struct {
	budget int64 // bytes; negative: off
	mu     sync.Mutex
	// inflight: bytes of queued and running prefetches; keys: their keys (a second
	// prefetch of one is answered OK and costs nothing); queue: those not yet started.
	inflight int64
	keys     map[string]bool
	queue    []base.KeyVersion
	sizes    []int64 // sizes[i] is queue[i]'s
	running  int
	stopped  bool
	wg       sync.WaitGroup
	// requested, promoted, dropped, failed: worker_prefetch_*_total.
	requested, promoted, dropped, failed atomic.Int64
}

// prefetch answers a Prefetch request: each item OK (in DRAM already, in flight, or
// accepted), the miss, or NO_AVAILABLE_HANDLE (dropped: the budget is spent).
func (w *Worker) prefetch(req *transfer.PrefetchRequest) (*transfer.BatchResponse, error) {
	p := &w.pf
	if p.budget < 0 {
		return nil, fmt.Errorf("%w: prefetch is off on worker %s (--prefetch_budget < 0)", base.ErrNotSupported, w.id)
	}
	items := make([]transfer.ItemError, len(req.Items))
	for i, it := range req.Items {
		p.requested.Add(1)
		items[i] = transfer.ItemErrorOf(w.acceptPrefetch(it))
	}
	return transfer.NewBatchResponse(transfer.OpPrefetch, items), nil
}

func (w *Worker) acceptPrefetch(it base.KeyVersion) error {
	if err := base.ValidateKey(it.Key); err != nil {
		return err
	}
	info, err := w.eng.Info(it.Key, it.Version)
	if err != nil {
		return err
	}
	if info.Tier == base.TierDRAM {
		return nil
	}
	p := &w.pf
	p.mu.Lock()
	defer p.mu.Unlock()
	switch {
	case p.stopped:
		return fmt.Errorf("%w: worker %s is shutting down", base.ErrNotSupported, w.id)
	case p.keys[it.Key]:
		return nil
	case p.inflight+info.Size > p.budget:
		p.dropped.Add(1)
		return fmt.Errorf("%w: prefetch of %q (%s) dropped: %s of the worker's prefetch budget of %s in flight",
			base.ErrNoSpace, it.Key, base.Bytes(info.Size), base.Bytes(p.inflight), base.Bytes(p.budget))
	}
	if p.keys == nil {
		p.keys = map[string]bool{}
	}
	p.keys[it.Key] = true
	p.inflight += info.Size
	p.queue = append(p.queue, base.KeyVersion{Key: it.Key, Version: info.Version})
	p.sizes = append(p.sizes, info.Size)
	if p.running < prefetchRunners {
		p.running++
		p.wg.Add(1)
		go w.runPrefetches()
	}
	return nil
}

// runPrefetches promotes queued prefetches until the queue is empty or the worker stops.
func (w *Worker) runPrefetches() {
	p := &w.pf
	defer p.wg.Done()
	for {
		p.mu.Lock()
		if len(p.queue) == 0 || p.stopped {
			p.running--
			p.mu.Unlock()
			return
		}
		it, size := p.queue[0], p.sizes[0]
		p.queue, p.sizes = p.queue[1:], p.sizes[1:]
		p.mu.Unlock()
		res, err := w.eng.Prefetch(it.Key, it.Version)
		switch {
		case err == nil && res == tier.PrefetchPromoted:
			p.promoted.Add(1)
		case err != nil && !errors.Is(err, base.ErrObjectNotFound) && !errors.Is(err, base.ErrInvalidVersion):
			// Gone meanwhile (removed, replaced) is no failure: there is nothing to read.
			p.failed.Add(1)
			w.log.Debug("prefetch failed", "key", it.Key, "version", it.Version, "err", err)
		}
		p.mu.Lock()
		p.inflight -= size
		delete(p.keys, it.Key)
		p.mu.Unlock()
	}
}

// stop drops the prefetches not started and waits for those running (Shutdown, after the RPC
// server stopped: no new ones arrive).
func (p *prefetcher) stop() {
	p.mu.Lock()
	p.stopped = true
	p.queue, p.sizes = nil, nil
	p.mu.Unlock()
	p.wg.Wait()
}

// inflightBytes reports the bytes of prefetches accepted and not yet done.
func (p *prefetcher) inflightBytes() int64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.inflight
}

// collectors returns the prefetch metrics: ours (worker_prefetch_*) and Mooncake's names for
// the outcomes (its client's SsdMetric prefetch_complete_total and prefetch_fail_total).
func (p *prefetcher) collectors() []prometheus.Collector {
	counter := func(name, help string, v *atomic.Int64) prometheus.Collector {
		return prometheus.NewCounterFunc(prometheus.CounterOpts{Name: name, Help: help}, func() float64 { return float64(v.Load()) })
	}
	return []prometheus.Collector{
		counter("worker_prefetch_requested_total", "Objects clients asked this worker to prefetch to DRAM (is_exist with prefetch_to_memory).", &p.requested),
		counter("worker_prefetch_promoted_total", "Prefetches that promoted an NVMe-only object to DRAM.", &p.promoted),
		counter("worker_prefetch_dropped_total", "Prefetches dropped because the prefetch budget of bytes in flight was spent.", &p.dropped),
		counter("worker_prefetch_failed_total", "Accepted prefetches whose promotion failed (no DRAM room, NVMe read error).", &p.failed),
		counter("prefetch_complete_total", "Prefetches that promoted an object to DRAM (Mooncake's name).", &p.promoted),
		counter("prefetch_fail_total", "Accepted prefetches whose promotion failed (Mooncake's name).", &p.failed),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "worker_prefetch_inflight_bytes", Help: "Bytes of prefetches accepted and not yet done (bounded by --prefetch_budget)."},
			func() float64 { return float64(p.inflightBytes()) }),
	}
}
