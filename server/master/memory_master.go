package master

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/mooncake-go/mooncake/internal/base"
	"github.com/mooncake-go/mooncake/raftmeta"
	"github.com/mooncake-go/mooncake/server/internal/admin"
	"github.com/mooncake-go/mooncake/server/memory"
	"github.com/mooncake-go/mooncake/transfer"
)

// workerMemoryTimeout bounds one worker's memory.WorkerMemory answer in a report: a worker that does
// not answer in time is listed with an error and left out of the sums.
const workerMemoryTimeout = 2 * time.Second

// callMemory answers the memory and model calls (ops 70-73); handled is false for any other.
func (h *masterHandler) callMemory(ctx context.Context, req transfer.Message) (resp transfer.Message, handled bool, err error) {
	m := h.m
	switch r := req.(type) {
	case *transfer.ModelAddRequest:
		actx, cancel := h.applyCtx(ctx)
		defer cancel()
		return nil, true, m.applyModel(actx, raftmeta.RegisterModel{Name: r.Name, BytesPerToken: r.BytesPerToken, Description: r.Description})
	case *transfer.ModelRemoveRequest:
		actx, cancel := h.applyCtx(ctx)
		defer cancel()
		return nil, true, m.applyModel(actx, raftmeta.RemoveModel{Name: r.Name})
	case *transfer.Empty:
		if r.Op() != transfer.OpMemory {
			return nil, false, nil
		}
		if !m.ensureLeader() {
			return nil, true, m.notLeader() // the client asks the leader, whose puts counters are the cluster's
		}
		b, err := json.Marshal(m.memoryReport(ctx))
		if err != nil {
			return nil, true, fmt.Errorf("%w: memory: %v", base.ErrInternal, err)
		}
		return &transfer.JSONResponse{Call: transfer.OpMemory, JSON: b}, true, nil
	}
	return nil, false, nil
}

// applyModel commits a RegisterModel or RemoveModel (leader only).
func (m *Master) applyModel(ctx context.Context, c raftmeta.Command) error {
	if !m.ensureLeader() {
		return m.notLeader()
	}
	res, err := m.node.Apply(ctx, c)
	if err != nil {
		return err
	}
	return res.Err
}

// memoryReport asks every active worker for its breakdown (in parallel, each bounded by
// workerMemoryTimeout) and builds the report with the default threshold.
func (m *Master) memoryReport(ctx context.Context) memory.MemoryReport {
	var segs []raftmeta.Segment
	var replicaBytes int64
	for _, s := range m.node.Segments() {
		replicaBytes += s.Bytes
		if s.State == raftmeta.SegmentActive {
			segs = append(segs, s)
		}
	}
	workers := make([]memory.WorkerMemory, len(segs))
	var wg sync.WaitGroup
	for i, s := range segs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			workers[i] = m.workerMemory(ctx, s)
		}()
	}
	wg.Wait()
	ms := m.stats()
	var reserved int64
	m.mu.Lock()
	// Every put in flight counts its size once per placed worker (lifecycle's Reserved).
	for _, w := range m.mu.lc.Workers() {
		reserved += w.Reserved
	}
	m.mu.Unlock()
	r := memory.BuildReport(memory.Inputs{
		Models: m.node.Models(), Workers: workers, Keys: ms.Keys, MetaB: ms.MetadataBytes, ReplicaBytes: replicaBytes, ReservedBytes: reserved,
		Puts:    int64(m.met.ops[opPutEnd].Requests.Load() + m.met.ops[opBatchPutEnd].Requests.Load()),
		Lookups: int64(m.met.ops[opLookup].Requests.Load() + m.met.ops[opBatchLookup].Requests.Load()),
	})
	r.ClusterID, r.Master, r.TimeUnixMs = m.cfg.ClusterID, m.cfg.ID, m.now().UnixMilli()
	return r
}

func (m *Master) workerMemory(ctx context.Context, s raftmeta.Segment) memory.WorkerMemory {
	ctx, cancel := context.WithTimeout(ctx, workerMemoryTimeout)
	defer cancel()
	resp := &transfer.JSONResponse{Call: transfer.OpWorkerMemory}
	err := m.cli.Call(ctx, s.Address, transfer.NewEmpty(transfer.OpWorkerMemory), resp)
	var wm memory.WorkerMemory
	if err == nil {
		err = json.Unmarshal(resp.JSON, &wm)
	}
	if err != nil {
		return memory.WorkerMemory{ID: string(s.ID), Address: s.Address, Error: oneLineErr(err)}
	}
	return wm
}

func oneLineErr(err error) string { return strings.ReplaceAll(err.Error(), "\n", "; ") }

// adminRoutes adds the master's endpoints beyond the standard ones: Mooncake's (compatRoutes)
// and the memory report.
func (m *Master) adminRoutes(mux *http.ServeMux) {
	m.compatRoutes(mux)
	m.memoryRoutes(mux)
}

// memoryRoutes serves the report over HTTP: GET /api/v1/memory[?threshold=PCT].
func (m *Master) memoryRoutes(mux *http.ServeMux) {
	mux.HandleFunc("GET /api/v1/memory", func(w http.ResponseWriter, r *http.Request) {
		rep := m.memoryReport(r.Context())
		if t := r.URL.Query().Get("threshold"); t != "" {
			var pct float64
			if _, err := fmt.Sscanf(t, "%g", &pct); err != nil || pct <= 0 {
				http.Error(w, "threshold must be a positive percent", http.StatusBadRequest)
				return
			}
			rep.Judge(pct)
		}
		admin.WriteJSON(w, http.StatusOK, rep)
	})
}

// summaryTokens is the part of the periodic "Master Metrics:" line about models, "" when no
// model is registered: " | Tokens: qwen2-7b=1234 (expected 1.0 GiB, actual 1.0 GiB, DRAM
// 1.0 GiB, NVMe 0 B)". alloc gives the workers' per-model allocated bytes (from their
// heartbeats); it is called only when a model is registered, and models it does not list
// are printed without them.
func summaryTokens(models []raftmeta.ModelUsage, alloc func() map[string]transfer.ModelStats) string {
	var b strings.Builder
	var onWorkers map[string]transfer.ModelStats
	for _, u := range models {
		if !u.Registered {
			continue
		}
		if b.Len() == 0 {
			b.WriteString(" | Tokens: ")
			onWorkers = alloc()
		} else {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "%s=%d (expected %s, actual %s", u.Name, u.Tokens,
			base.Bytes(memory.SatMul(u.ReplicaTokens, u.BytesPerToken)), base.Bytes(u.ReplicaBytes))
		if a, ok := onWorkers[u.Name]; ok {
			fmt.Fprintf(&b, ", DRAM %s, NVMe %s", base.Bytes(a.DRAMBytes), base.Bytes(a.NVMeBytes))
		}
		b.WriteString(")")
	}
	return b.String()
}

// Model and memory metrics (docs/metrics.md). Per-model series come from the metadata (cheap);
// the cluster's expected, actual and unexplained bytes need every worker's breakdown, so a
// scrape builds a report, bounded by workerMemoryTimeout per worker.
var (
	descModelTokens    = prometheus.NewDesc("master_model_retained_tokens", "KV-cache tokens retained by the objects of a model (one copy each).", []string{"model"}, nil)
	descModelExpected  = prometheus.NewDesc("master_model_expected_bytes", "Expected bytes of a registered model's objects: replica tokens x bytes per token.", []string{"model"}, nil)
	descModelActual    = prometheus.NewDesc("master_model_actual_bytes", "Logical bytes of a model's objects times their replicas.", []string{"model"}, nil)
	descModelBPT       = prometheus.NewDesc("master_model_bytes_per_token", "Bytes per token of a registered model.", []string{"model"}, nil)
	descMemExpected    = prometheus.NewDesc("master_memory_expected_bytes", "Expected bytes of all registered models' objects.", nil, nil)
	descMemActual      = prometheus.NewDesc("master_memory_actual_bytes", "Bytes workers hold: arena allocated plus NVMe used.", nil, nil)
	descMemUnexplained = prometheus.NewDesc("master_memory_unexplained_bytes", "Actual minus expected bytes that no known cause accounts for.", nil, nil)
	descMemCause       = prometheus.NewDesc("master_memory_difference_bytes", "Actual minus expected bytes, by cause (docs/memory.md).", []string{"cause"}, nil)
)

type modelCollector struct{ m *Master }

func (c modelCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descModelTokens, descModelExpected, descModelActual, descModelBPT, descMemExpected, descMemActual, descMemUnexplained, descMemCause} {
		ch <- d
	}
}

func (c modelCollector) Collect(ch chan<- prometheus.Metric) {
	g := func(d *prometheus.Desc, v int64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, float64(v), labels...)
	}
	for _, u := range c.m.node.Models() {
		if u.Name == "" {
			continue
		}
		g(descModelTokens, u.Tokens, u.Name)
		g(descModelActual, u.ReplicaBytes, u.Name)
		if u.Registered {
			g(descModelExpected, memory.SatMul(u.ReplicaTokens, u.BytesPerToken), u.Name)
			g(descModelBPT, u.BytesPerToken, u.Name)
		}
	}
	if !c.m.ensureLeader() {
		return // the report is the leader's
	}
	r := c.m.memoryReport(context.Background())
	g(descMemExpected, r.ExpectedBytes)
	g(descMemActual, r.ActualBytes)
	var unexplained int64
	for _, cs := range r.Causes {
		g(descMemCause, cs.Bytes, cs.Name)
		if cs.Name == memory.CauseUnexplained {
			unexplained = cs.Bytes
		}
	}
	g(descMemUnexplained, unexplained)
}

// ExportMetrics adds collectors to this master's /metrics: a worker's series in a process
// that runs both (the composer's ExportWorkerMetrics). Call it once per collector.
func (m *Master) ExportMetrics(cs ...prometheus.Collector) error {
	var errs []error
	for _, c := range cs {
		errs = append(errs, m.met.reg.Register(c))
	}
	return errors.Join(errs...)
}
