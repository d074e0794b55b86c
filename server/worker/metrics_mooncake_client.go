package worker

import (
	"errors"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/mooncake-go/mooncake/internal/base"
	"github.com/mooncake-go/mooncake/transfer"
)

// Mooncake's client metrics (mooncake-store/include/client_metric.h and
// master_heartbeat_metric.h) on each worker's /metrics: a worker is what Mooncake's
// mooncake_client process is, the holder of a segment that serves and receives its bytes.
// Latencies are in microseconds with Mooncake's buckets, as Mooncake's are. Where the
// quantity is the worker's, the value is real: bytes served and received, per-read and
// per-write latency, NVMe reads and spills, the worker's own calls to the leader and its last
// heartbeat. Batches are a client's notion, invisible to a worker serving their items, so the
// batch latency histograms stay empty; DFS (3FS/NFS) is not a tier here, so mooncake_dfs_*
// are 0 or empty (docs/metrics.md).

// mooncakeLatencyBucketsUS are Mooncake's kLatencyBucket (µs): fine below 1 ms, then a
// millisecond tail to 20 s.
var mooncakeLatencyBucketsUS = []float64{50, 75, 125, 150, 200, 250, 300, 400, 500, 750, 1000,
	1500, 2000, 3000, 5000, 7000, 15000, 20000, 50000, 100000, 200000, 500000, 1000000, 2000000, 5000000, 10000000, 20000000}

// mooncakeSSDBucketsUS are Mooncake's kSsdLatencyBucket (µs): 50 µs to 30 s.
var mooncakeSSDBucketsUS = []float64{50, 100, 200, 500, 1000, 2000, 5000, 10000, 20000, 50000, 100000, 200000,
	500000, 1000000, 2000000, 5000000, 10000000, 30000000}

// mooncakeQuantiles are the objectives of Mooncake's latency summaries (p50, p90, p99).
var mooncakeQuantiles = map[float64]float64{0.5: 0.05, 0.9: 0.01, 0.99: 0.001}

// transferOpTCP is the op_name of reads and writes over the worker's TCP data port.
const transferOpTCP = "tcp"

// mooncakeClientMetrics are the worker's Mooncake client metrics.
type mooncakeClientMetrics struct {
	readBytes, writeBytes           prometheus.Counter
	getLatency, putLatency          prometheus.Observer
	readOpCount, readOpBytes        prometheus.Counter
	writeOpCount, writeOpBytes      prometheus.Counter
	readOpLatency, writeOpLatency   prometheus.Observer
	ssdReadLatency, ssdTotalLatency prometheus.Observer
	ssdReadSummary, ssdTotalSummary prometheus.Observer
	// ssdReads, ssdReadBytes count reads served from NVMe; the SSD counters add the spills.
	ssdReads, ssdReadBytes atomic.Int64
	rpcCount               *prometheus.CounterVec
	rpcLatency             *prometheus.HistogramVec
	heartbeatOK            *prometheus.GaugeVec // no labels; a series only once a heartbeat was answered
	heartbeatAt            *prometheus.GaugeVec
}

func histUS(name, help string, buckets []float64) prometheus.Histogram {
	return prometheus.NewHistogram(prometheus.HistogramOpts{Name: name, Help: help, Buckets: buckets})
}

func summaryUS(name, help string) prometheus.Summary {
	return prometheus.NewSummary(prometheus.SummaryOpts{Name: name, Help: help, Objectives: mooncakeQuantiles})
}

func counterOf(name, help string) prometheus.Counter {
	return prometheus.NewCounter(prometheus.CounterOpts{Name: name, Help: help})
}

// newMooncakeClientMetrics registers the metrics on reg. spills reads the worker's spills to
// NVMe (objects and bytes) at scrape time.
func newMooncakeClientMetrics(reg *prometheus.Registry, spills func() (n, bytes int64)) *mooncakeClientMetrics {
	mc := &mooncakeClientMetrics{}
	opVec := func(name, help string) *prometheus.CounterVec {
		return prometheus.NewCounterVec(prometheus.CounterOpts{Name: name, Help: help}, []string{"op_name"})
	}
	opHist := func(name, help string) *prometheus.HistogramVec {
		return prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: name, Help: help, Buckets: mooncakeLatencyBucketsUS}, []string{"op_name"})
	}
	rc := opVec("mooncake_transfer_read_operation_count", "Reads served, by path (op_name tcp).")
	rb := opVec("mooncake_transfer_read_operation_bytes", "Bytes of reads served, by path.")
	rl := opHist("mooncake_transfer_read_operation_latency", "Read latency (us), by path.")
	wc := opVec("mooncake_transfer_write_operation_count", "Writes committed, by path (op_name tcp).")
	wb := opVec("mooncake_transfer_write_operation_bytes", "Bytes of writes committed, by path.")
	wl := opHist("mooncake_transfer_write_operation_latency", "Write latency (us), by path.")
	mc.readOpCount, mc.readOpBytes, mc.readOpLatency = rc.WithLabelValues(transferOpTCP), rb.WithLabelValues(transferOpTCP), rl.WithLabelValues(transferOpTCP)
	mc.writeOpCount, mc.writeOpBytes, mc.writeOpLatency = wc.WithLabelValues(transferOpTCP), wb.WithLabelValues(transferOpTCP), wl.WithLabelValues(transferOpTCP)

	readBytes := counterOf("mooncake_transfer_read_bytes", "Bytes this worker served to readers over TCP.")
	writeBytes := counterOf("mooncake_transfer_write_bytes", "Bytes of the objects written to this worker and committed.")
	getLat := histUS("mooncake_transfer_get_latency", "Get latency (us): a read over TCP from the request to the last byte sent.", mooncakeLatencyBucketsUS)
	putLat := histUS("mooncake_transfer_put_latency", "Put latency (us): a write from its first chunk to its commit.", mooncakeLatencyBucketsUS)
	ssdReadLat := histUS("mooncake_ssd_read_latency_us", "Latency (us) of reads served from the NVMe tier, request to last byte.", mooncakeSSDBucketsUS)
	ssdTotalLat := histUS("mooncake_ssd_total_latency_us", "Latency (us) of NVMe reads and writes (only reads are timed).", mooncakeSSDBucketsUS)
	ssdReadSum := summaryUS("mooncake_ssd_read_latency_summary_us", "Quantiles (us) of reads served from the NVMe tier.")
	ssdTotalSum := summaryUS("mooncake_ssd_total_latency_summary_us", "Quantiles (us) of NVMe reads and writes (only reads are timed).")
	mc.readBytes, mc.writeBytes, mc.getLatency, mc.putLatency = readBytes, writeBytes, getLat, putLat
	mc.ssdReadLatency, mc.ssdTotalLatency, mc.ssdReadSummary, mc.ssdTotalSummary = ssdReadLat, ssdTotalLat, ssdReadSum, ssdTotalSum

	ssd := func(name, help string, f func(spills, spillBytes int64) int64) prometheus.Collector {
		return prometheus.NewCounterFunc(prometheus.CounterOpts{Name: name, Help: help}, func() float64 {
			n, b := spills()
			return float64(f(n, b))
		})
	}
	cs := []prometheus.Collector{readBytes, writeBytes, getLat, putLat, rc, rb, rl, wc, wb, wl, ssdReadLat, ssdTotalLat, ssdReadSum, ssdTotalSum,
		histUS("mooncake_transfer_batch_put_latency", "Batch put latency (us). Always empty on a worker: batches are a client's; the worker serves their items (mooncake_transfer_put_latency).", mooncakeLatencyBucketsUS),
		histUS("mooncake_transfer_batch_get_latency", "Batch get latency (us). Always empty on a worker: see mooncake_transfer_batch_put_latency.", mooncakeLatencyBucketsUS),
		ssd("mooncake_ssd_read_bytes_total", "Bytes of reads this worker served from its NVMe tier.", func(_, _ int64) int64 { return mc.ssdReadBytes.Load() }),
		ssd("mooncake_ssd_read_ops_total", "Reads this worker served from its NVMe tier (one per key).", func(_, _ int64) int64 { return mc.ssdReads.Load() }),
		ssd("mooncake_ssd_write_bytes_total", "Bytes this worker wrote to its NVMe tier (spills).", func(_, b int64) int64 { return b }),
		ssd("mooncake_ssd_write_ops_total", "Objects this worker wrote to its NVMe tier (spills).", func(n, _ int64) int64 { return n }),
		ssd("mooncake_ssd_total_bytes_total", "Bytes read from and written to the NVMe tier.", func(_, b int64) int64 { return mc.ssdReadBytes.Load() + b }),
		ssd("mooncake_ssd_total_ops_total", "NVMe reads and writes (one per key).", func(n, _ int64) int64 { return mc.ssdReads.Load() + n }),
		histUS("mooncake_ssd_write_latency_us", "NVMe write latency (us). Always empty: spills run in the background and are counted (mooncake_ssd_write_ops_total), not timed.", mooncakeSSDBucketsUS),
		summaryUS("mooncake_ssd_write_latency_summary_us", "NVMe write latency quantiles (us). Always empty: see mooncake_ssd_write_latency_us."),
	}
	const noDFS = " Always 0: DFS (3FS/NFS) is not a tier here; the NVMe tier is mooncake_ssd_*."
	for _, n := range []string{"mooncake_dfs_read_bytes_total", "mooncake_dfs_write_bytes_total", "mooncake_dfs_read_ops_total",
		"mooncake_dfs_write_ops_total", "mooncake_dfs_writes_skipped_total"} {
		cs = append(cs, counterOf(n, "Mooncake's DFS counter."+noDFS))
	}
	for _, n := range []string{"mooncake_dfs_read_latency_us", "mooncake_dfs_write_latency_us", "mooncake_dfs_write_staging_latency_us"} {
		cs = append(cs, histUS(n, "Mooncake's DFS latency (us). Always empty: DFS (3FS/NFS) is not a tier here.", mooncakeSSDBucketsUS))
	}
	for _, n := range []string{"mooncake_dfs_read_latency_summary_us", "mooncake_dfs_write_latency_summary_us"} {
		cs = append(cs, summaryUS(n, "Mooncake's DFS latency quantiles (us). Always empty: DFS (3FS/NFS) is not a tier here."))
	}
	for _, n := range []string{"mooncake_dfs_read_errors_total", "mooncake_dfs_write_errors_total"} {
		cs = append(cs, prometheus.NewCounterVec(prometheus.CounterOpts{Name: n,
			Help: "Mooncake's DFS failures by error code. No series: DFS (3FS/NFS) is not a tier here."}, []string{"error"}))
	}
	mc.rpcCount = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "mooncake_client_rpc_count",
		Help: "Calls this worker made to the masters, by Mooncake's RPC name (MountSegment: registration, Ping: heartbeat)."}, []string{"rpc_name"})
	mc.rpcLatency = prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "mooncake_client_rpc_latency",
		Help: "Latency (us) of this worker's calls to the masters, by Mooncake's RPC name.", Buckets: mooncakeLatencyBucketsUS}, []string{"rpc_name"})
	mc.heartbeatOK = prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "mooncake_client_master_heartbeat_status_ok",
		Help: "The leader's answer to the last heartbeat: 1 OK, 0 when it asked this worker to register again; absent before the first."}, nil)
	mc.heartbeatAt = prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "mooncake_client_master_heartbeat_observation_timestamp_seconds",
		Help: "Unix time (seconds) the worker received that answer; absent before the first."}, nil)
	cs = append(cs, mc.rpcCount, mc.rpcLatency, mc.heartbeatOK, mc.heartbeatAt)
	reg.MustRegister(cs...)
	return mc
}

// us converts d to Mooncake's microseconds.
func us(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) }

// observeRead records one read of n bytes served from tier t over d.
func (mc *mooncakeClientMetrics) observeRead(t base.Tier, n int64, d time.Duration) {
	mc.readBytes.Add(float64(n))
	mc.getLatency.Observe(us(d))
	mc.readOpCount.Inc()
	mc.readOpBytes.Add(float64(n))
	mc.readOpLatency.Observe(us(d))
	if t != base.TierDRAM {
		mc.ssdReads.Add(1)
		mc.ssdReadBytes.Add(n)
		mc.ssdReadLatency.Observe(us(d))
		mc.ssdTotalLatency.Observe(us(d))
		mc.ssdReadSummary.Observe(us(d))
		mc.ssdTotalSummary.Observe(us(d))
	}
}

// observeWrite records one committed write of n bytes that took d from its first chunk.
func (mc *mooncakeClientMetrics) observeWrite(n int64, d time.Duration) {
	mc.writeBytes.Add(float64(n))
	mc.putLatency.Observe(us(d))
	mc.writeOpCount.Inc()
	mc.writeOpBytes.Add(float64(n))
	mc.writeOpLatency.Observe(us(d))
}

// rpcName is Mooncake's name of a call a worker makes to a master.
func rpcName(op transfer.Op) string {
	switch op {
	case transfer.OpRegisterWorker:
		return "MountSegment"
	case transfer.OpHeartbeat:
		return "Ping"
	}
	return op.String()
}

// observeMasterCall records one call of this worker to a master: its count and latency, and
// for a heartbeat the leader's answer (a segment the leader does not know asks for a
// registration: Mooncake's NEED_REMOUNT).
func (mc *mooncakeClientMetrics) observeMasterCall(op transfer.Op, d time.Duration, err error, now time.Time) {
	name := rpcName(op)
	mc.rpcCount.WithLabelValues(name).Inc()
	mc.rpcLatency.WithLabelValues(name).Observe(us(d))
	if op != transfer.OpHeartbeat {
		return
	}
	switch {
	case err == nil:
		mc.heartbeatOK.WithLabelValues().Set(1)
	case errors.Is(err, base.ErrSegmentNotFound):
		mc.heartbeatOK.WithLabelValues().Set(0)
	default:
		return // no answer: the last one stands, as in Mooncake
	}
	mc.heartbeatAt.WithLabelValues().Set(float64(now.UnixNano()) / 1e9)
}
