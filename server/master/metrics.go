package master

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/mooncake-go/mooncake/internal/base"
	"github.com/mooncake-go/mooncake/raftmeta"
	"github.com/mooncake-go/mooncake/server/internal/admin"
)

// masterOp names one master call for its request/failure counters. The metric names are
// Mooncake's: master_<name>_requests_total and master_<name>_failures_total.
type masterOp int

const (
	opPutStart masterOp = iota
	opPutEnd
	opPutRevoke
	opLookup
	opExists
	opRemove
	opRemoveByRegex
	opRemoveAll
	opBatchPutStart
	opBatchPutEnd
	opBatchLookup
	opBatchExists
	opBatchRemove
	opList
	opRegisterWorker
	opHeartbeat
	opStatus
	opCreateCopyTask
	opCreateMoveTask
	opQueryTask
	numMasterOps
)

// masterOpNames[op] = {Prometheus name, summary-line name}. Prometheus names follow Mooncake's
// master_metric_manager (get_replica_list for Lookup, exist_key for Exists, mount_segment for
// worker registration, ping for heartbeats; CreateTask counts under create_copy_task or
// create_move_task by its type, a resend as another request, as Mooncake counts its calls).
var masterOpNames = [numMasterOps][2]string{
	opPutStart:       {"put_start", "PutStart"},
	opPutEnd:         {"put_end", "PutEnd"},
	opPutRevoke:      {"put_revoke", "PutRevoke"},
	opLookup:         {"get_replica_list", "Lookup"},
	opExists:         {"exist_key", "Exists"},
	opRemove:         {"remove", "Remove"},
	opRemoveByRegex:  {"remove_by_regex", "RemoveByRegex"},
	opRemoveAll:      {"remove_all", "RemoveAll"},
	opBatchPutStart:  {"batch_put_start", "BatchPutStart"},
	opBatchPutEnd:    {"batch_put_end", "BatchPutEnd"},
	opBatchLookup:    {"batch_get_replica_list", "BatchLookup"},
	opBatchExists:    {"batch_exist_key", "BatchExists"},
	opBatchRemove:    {"batch_remove", "BatchRemove"},
	opList:           {"list", "List"},
	opRegisterWorker: {"mount_segment", "Register"},
	opHeartbeat:      {"ping", "Heartbeat"},
	opStatus:         {"status", "Status"},
	opCreateCopyTask: {"create_copy_task", "CreateCopyTask"},
	opCreateMoveTask: {"create_move_task", "CreateMoveTask"},
	opQueryTask:      {"query_task", "QueryTask"},
}

// masterStats is what the master's gauges read at scrape time. The master fills it from
// raftmeta (keys, bytes) and its soft state (workers, usage) under its own locks.
type masterStats struct {
	Keys           int64
	SoftPinnedKeys int64
	AllocatedBytes int64 // sum of object sizes times replicas, as placed
	CapacityBytes  int64 // sum of alive workers' DRAM segments
	Workers        int   // alive workers
	MetadataBytes  int64 // estimate of the FSM's bytes (0 if unknown)
	Segments       []segmentStat
	Models         []raftmeta.ModelUsage // the model registry and token counts (server/memory)
}

type segmentStat struct {
	ID        base.WorkerID
	Allocated int64
	Capacity  int64
}

// masterMetrics owns the master's Prometheus registry (never the global one).
type masterMetrics struct {
	reg *prometheus.Registry
	ops [numMasterOps]admin.OpCounter
	// mc holds the Mooncake-named metrics and the summary line's window (metrics_compat.go).
	mc *mooncakeMasterMetrics
	// tenantRejects counts puts refused for their tenant's quota (metrics_tenants.go).
	tenantRejects tenantCounter
}

// newMasterMetrics registers every master metric on a fresh registry. stats is called at
// scrape time, on the HTTP goroutine; it must be cheap and goroutine-safe.
func newMasterMetrics(stats func() masterStats) *masterMetrics {
	m := &masterMetrics{reg: admin.NewRegistry()}
	for op := range numMasterOps {
		name := masterOpNames[op][0]
		c := &m.ops[op]
		m.reg.MustRegister(
			prometheus.NewCounterFunc(prometheus.CounterOpts{
				Name: "master_" + name + "_requests_total",
				Help: "Number of " + masterOpNames[op][1] + " requests the master received.",
			}, func() float64 { return float64(c.Requests.Load()) }),
			prometheus.NewCounterFunc(prometheus.CounterOpts{
				Name: "master_" + name + "_failures_total",
				Help: "Number of " + masterOpNames[op][1] + " requests that failed.",
			}, func() float64 { return float64(c.Failures.Load()) }),
		)
	}
	m.reg.MustRegister(&masterStatsCollector{stats: stats})
	return m
}

// observe counts one call of op that ended with err.
func (m *masterMetrics) observe(op masterOp, err error) { m.ops[op].Observe(err) }

var (
	descKeyCount     = prometheus.NewDesc("master_key_count", "Number of objects the metadata holds.", nil, nil)
	descSoftPinned   = prometheus.NewDesc("master_soft_pin_key_count", "Number of objects with a live soft pin.", nil, nil)
	descAllocated    = prometheus.NewDesc("master_allocated_bytes", "Bytes of object replicas placed on workers.", nil, nil)
	descCapacity     = prometheus.NewDesc("master_total_capacity_bytes", "Sum of the DRAM segments of alive workers.", nil, nil)
	descWorkers      = prometheus.NewDesc("master_worker_count", "Number of alive workers (segments).", nil, nil)
	descMetaBytes    = prometheus.NewDesc("master_metadata_bytes", "Estimated bytes of replicated metadata (keys and records) held by this master.", nil, nil)
	descMetaPerKey   = prometheus.NewDesc("master_metadata_bytes_per_key", "master_metadata_bytes / master_key_count (0 when there are no keys).", nil, nil)
	descSegAllocated = prometheus.NewDesc("segment_allocated_bytes", "Bytes of replicas placed on one worker segment.", []string{"segment"}, nil)
	descSegCapacity  = prometheus.NewDesc("segment_total_capacity_bytes", "DRAM capacity of one worker segment.", []string{"segment"}, nil)
	masterStatsDescs = []*prometheus.Desc{descKeyCount, descSoftPinned, descAllocated, descCapacity, descWorkers, descMetaBytes, descMetaPerKey, descSegAllocated, descSegCapacity}
)

// masterStatsCollector turns one masterStats snapshot into gauges at scrape time, so the
// per-segment series follow workers as they come and go.
type masterStatsCollector struct{ stats func() masterStats }

func (c *masterStatsCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range masterStatsDescs {
		ch <- d
	}
}

func (c *masterStatsCollector) Collect(ch chan<- prometheus.Metric) {
	s := c.stats()
	g := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
	}
	g(descKeyCount, float64(s.Keys))
	g(descSoftPinned, float64(s.SoftPinnedKeys))
	g(descAllocated, float64(s.AllocatedBytes))
	g(descCapacity, float64(s.CapacityBytes))
	g(descWorkers, float64(s.Workers))
	g(descMetaBytes, float64(s.MetadataBytes))
	perKey := 0.0
	if s.Keys > 0 {
		perKey = float64(s.MetadataBytes) / float64(s.Keys)
	}
	g(descMetaPerKey, perKey)
	for _, seg := range s.Segments {
		g(descSegAllocated, float64(seg.Allocated), string(seg.ID))
		g(descSegCapacity, float64(seg.Capacity), string(seg.ID))
	}
}
