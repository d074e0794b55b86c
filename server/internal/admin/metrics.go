package admin

import (
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
)

// OpCounter is one call's totals. Typed atomics, read by both Prometheus (CounterFunc) and
// the summary line, so there is one source of truth.
type OpCounter struct {
	Requests atomic.Uint64
	Failures atomic.Uint64
}

// Observe counts one call that ended with err.
func (c *OpCounter) Observe(err error) {
	c.Requests.Add(1)
	if err != nil {
		c.Failures.Add(1)
	}
}

// NewRegistry returns a fresh registry (never the global one) holding the Go runtime and
// process collectors every server exports.
func NewRegistry() *prometheus.Registry {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return reg
}

// RequestLatencyBuckets are the upper bounds, in seconds, of the request latency histograms:
// from 100 µs (a lookup on loopback) to 10 s (a multi-GiB put over a slow link), about x2.5
// apart, so p50 and p99 of both small and large objects land inside the range.
var RequestLatencyBuckets = []float64{0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10}
