package worker

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/mooncake-go/mooncake/nvme"
)

// nvmeSpaceCollector exports how the NVMe tier's space is used and reclaimed, so an operator
// sees removed objects give their room back: worker_nvme_used_bytes (what counts against
// ssd_capacity), worker_nvme_live_bytes, and worker_nvme_reclaimed_bytes_total by how
// (punch: dead records punched out of their extent; gc: extents deleted or rewritten).
type nvmeSpaceCollector struct {
	metrics                         func() nvme.Metrics
	used, live, reclaimed, diskFull *prometheus.Desc
}

func newNVMeSpaceCollector(metrics func() nvme.Metrics) *nvmeSpaceCollector {
	return &nvmeSpaceCollector{
		metrics: metrics,
		used:    prometheus.NewDesc("worker_nvme_used_bytes", "Bytes the NVMe tier uses against its capacity (dead space not yet reclaimed included).", nil, nil),
		live:    prometheus.NewDesc("worker_nvme_live_bytes", "Bytes of the NVMe tier held by live objects.", nil, nil),
		reclaimed: prometheus.NewDesc("worker_nvme_reclaimed_bytes_total",
			"Bytes of dead NVMe records reclaimed since start, by how: punch (punched out of their extent) or gc (extents deleted or rewritten).",
			[]string{"how"}, nil),
		diskFull: prometheus.NewDesc("worker_nvme_disk_full",
			"1 when the disk under root_fs_dir filled and the NVMe index took its reserve: new objects are refused until the disk has room again.", nil, nil),
	}
}

func (c *nvmeSpaceCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.used
	ch <- c.live
	ch <- c.reclaimed
	ch <- c.diskFull
}

func (c *nvmeSpaceCollector) Collect(ch chan<- prometheus.Metric) {
	m := c.metrics()
	ch <- prometheus.MustNewConstMetric(c.used, prometheus.GaugeValue, float64(m.BytesUsed))
	ch <- prometheus.MustNewConstMetric(c.live, prometheus.GaugeValue, float64(m.LiveBytes))
	ch <- prometheus.MustNewConstMetric(c.reclaimed, prometheus.CounterValue, float64(m.PunchedBytes), "punch")
	ch <- prometheus.MustNewConstMetric(c.reclaimed, prometheus.CounterValue, float64(m.GCBytesReclaimed), "gc")
	full := 0.0
	if m.DiskFull {
		full = 1
	}
	ch <- prometheus.MustNewConstMetric(c.diskFull, prometheus.GaugeValue, full)
}

var _ prometheus.Collector = (*nvmeSpaceCollector)(nil)
