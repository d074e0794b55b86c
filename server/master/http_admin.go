package master

import (
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync"
	"time"

	"github.com/mooncake-go/mooncake/internal/base"
	"github.com/mooncake-go/mooncake/raftmeta"
	"github.com/mooncake-go/mooncake/server/internal/admin"
	"github.com/mooncake-go/mooncake/server/rpcsrv"
)

// The rest of Mooncake's master admin endpoints (master_admin_service.cpp), beside
// http_compat.go's: /get_segments_detail, /kv_events/status, /api/v1/segments/status and
// the drain jobs (/api/v1/drain_jobs, /query, /cancel) over the leader's worker drain. The
// JSON shapes are Mooncake's: an error is {"success":false,"error_code":N,"error_message":S}
// with Mooncake's ErrorCode number and name.

// mooncakeErrorCode is Mooncake's ErrorCode number of err (types.h), for the admin JSON.
// NB: the master's column of the error table (internal/base errtable.go), not the C and
// Python API's: a master that does not lead says UNAVAILABLE_IN_CURRENT_STATUS.
func mooncakeErrorCode(err error) int {
	code, _ := base.CodeOf(err).MooncakeMaster()
	return int(code)
}

// httpStatusOf is Mooncake's ErrorCodeToHttpStatus: 400 for bad input, 404 for what is not
// there, 503 on a master that does not lead, else 500 (the error table's master column).
func httpStatusOf(err error) int {
	_, status := base.CodeOf(err).MooncakeMaster()
	return status
}

// writeMooncakeError writes Mooncake's HttpErrorResponse for err.
func writeMooncakeError(w http.ResponseWriter, err error) {
	admin.WriteJSON(w, httpStatusOf(err), map[string]any{"success": false, "error_code": mooncakeErrorCode(err),
		"error_message": base.CodeOf(err).String() + ": " + err.Error()})
}

// segmentDetail is Mooncake's HttpSegmentDetailItem. A segment here is a worker: segment_id
// and client_id are its worker id, base_address 0x0 (objects are reached by key over TCP, not
// by address), te_endpoint its data address.
type segmentDetail struct {
	SegmentName            string  `json:"segment_name"`
	SegmentID              string  `json:"segment_id"`
	ClientID               string  `json:"client_id"`
	BaseAddress            string  `json:"base_address"`
	SizeBytes              int64   `json:"size_bytes"`
	SizeHuman              string  `json:"size_human"`
	TEEndpoint             string  `json:"te_endpoint"`
	Protocol               string  `json:"protocol"`
	Status                 string  `json:"status"`
	AllocatorUsedBytes     int64   `json:"allocator_used_bytes"`
	AllocatorCapacityBytes int64   `json:"allocator_capacity_bytes"`
	AllocatorUsagePercent  float64 `json:"allocator_usage_percent"`
}

// segmentStatus is a segment's status under Mooncake's SegmentStatus names, with its number.
func segmentStatus(s raftmeta.Segment) (int, string) {
	switch {
	case s.State != raftmeta.SegmentActive:
		return 3, "UNMOUNTING"
	case s.Draining:
		return 2, "DRAINING"
	}
	return 1, "OK"
}

// findSegment returns the segment named by its worker's address or id.
func (m *Master) findSegment(name string) (raftmeta.Segment, error) {
	if name == "" {
		return raftmeta.Segment{}, fmt.Errorf("%w: missing segment query parameter", base.ErrInvalidParams)
	}
	for _, s := range m.node.Segments() {
		if s.Address == name || string(s.ID) == name {
			return s, nil
		}
	}
	return raftmeta.Segment{}, fmt.Errorf("%w: no segment %q", base.ErrSegmentNotFound, name)
}

// drainJob is one /api/v1/drain_jobs job: workers drained together. Its progress is read
// from the metadata (the replicas its workers still hold), so it needs no state beyond the
// start figures. Jobs are this master's soft state: a new leader keeps draining (the flag
// is committed) but does not know the job ids.
type drainJob struct {
	id                    string
	segments              []string
	ids                   []base.WorkerID
	created, updated      time.Time
	startObjs, startBytes int64
	canceled              bool
}

// drainJobs holds the jobs created on this master.
type drainJobs struct {
	mu sync.Mutex // protects m
	m  map[string]*drainJob
}

// maxDrainJobs bounds the jobs kept; past it the oldest finished one is forgotten.
const maxDrainJobs = 1024

func newJobID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	b[6], b[8] = b[6]&0x0f|0x40, b[8]&0x3f|0x80 // a version 4 UUID, as Mooncake's
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:])
}

// createDrainJob drains every segment of req (Mooncake's CreateDrainJobRequest).
func (m *Master) createDrainJob(r *http.Request) (*drainJob, error) {
	var req struct {
		Segments []string `json:"segments"`
	}
	if err := json.NewDecoder(io.LimitReader(r.Body, 1<<20)).Decode(&req); err != nil {
		return nil, fmt.Errorf("%w: Invalid JSON body: %v", base.ErrInvalidParams, err)
	}
	if len(req.Segments) == 0 {
		return nil, fmt.Errorf("%w: no segments to drain", base.ErrInvalidParams)
	}
	j := &drainJob{id: newJobID(), segments: req.Segments, created: m.now()}
	j.updated = j.created
	for _, name := range req.Segments {
		s, err := m.findSegment(name)
		if err != nil {
			return nil, err
		}
		j.ids = append(j.ids, s.ID)
		j.startObjs += s.Objects
		j.startBytes += s.Bytes
	}
	for _, id := range j.ids {
		if err := m.drainWorker(r.Context(), id, false); err != nil {
			return nil, err
		}
	}
	m.jobs.mu.Lock()
	defer m.jobs.mu.Unlock()
	if m.jobs.m == nil {
		m.jobs.m = map[string]*drainJob{}
	}
	if len(m.jobs.m) >= maxDrainJobs {
		var oldest *drainJob
		for _, o := range m.jobs.m {
			if oldest == nil || o.created.Before(oldest.created) {
				oldest = o
			}
		}
		delete(m.jobs.m, oldest.id)
	}
	m.jobs.m[j.id] = j
	return j, nil
}

// job returns the job named by the job_id query parameter.
func (m *Master) job(r *http.Request) (*drainJob, error) {
	id := r.URL.Query().Get("job_id")
	if id == "" {
		return nil, fmt.Errorf("%w: Missing or invalid job_id", base.ErrInvalidParams)
	}
	m.jobs.mu.Lock()
	defer m.jobs.mu.Unlock()
	j, ok := m.jobs.m[id]
	if !ok {
		return nil, fmt.Errorf("%w: JOB_NOT_FOUND: no drain job %s on this master", base.ErrObjectNotFound, id)
	}
	return j, nil
}

// jobReport is Mooncake's HttpQueryDrainJobResponse for j: status CANCELED, SUCCEEDED once
// its workers hold no replica, else RUNNING; units are replicas.
func (m *Master) jobReport(j *drainJob) map[string]any {
	var objs, bytes int64
	for _, s := range m.node.Segments() {
		for _, id := range j.ids {
			if s.ID == id {
				objs += s.Objects
				bytes += s.Bytes
			}
		}
	}
	now := m.now()
	m.jobs.mu.Lock()
	status, name := 1, "RUNNING"
	switch {
	case j.canceled:
		status, name = 3, "CANCELED"
	case objs == 0:
		status, name = 2, "SUCCEEDED"
	}
	if status == 1 || j.updated.Equal(j.created) {
		j.updated = now // running: progress now; finished: when first seen finished
	}
	updated := j.updated
	m.jobs.mu.Unlock()
	return map[string]any{"success": true, "job_id": j.id, "type": 0, "type_name": "DRAIN", "status": status, "status_name": name,
		"created_at_ms_epoch": j.created.UnixMilli(), "last_updated_at_ms_epoch": updated.UnixMilli(), "segments": j.segments,
		"succeeded_units": max(0, j.startObjs-objs), "failed_units": 0, "blocked_units": 0, "active_units": objs,
		"migrated_bytes": max(0, j.startBytes-bytes), "message": fmt.Sprintf("%d replicas left on the draining workers", objs),
		"error_code": 0, "error_message": ""}
}

// jobRoutes adds the endpoints of this file to the master's metrics port.
func (m *Master) jobRoutes(mux *http.ServeMux) {
	m.tenantRoutes(mux) // http_tenants.go
	mux.HandleFunc("GET /get_segments_detail", func(w http.ResponseWriter, _ *http.Request) {
		segs := m.activeSegmentsSorted()
		items := make([]segmentDetail, 0, len(segs))
		for _, s := range segs {
			_, st := segmentStatus(s)
			pct := 0.0
			if s.DRAMCapacity > 0 {
				pct = float64(s.Bytes) / float64(s.DRAMCapacity) * 100
			}
			items = append(items, segmentDetail{SegmentName: s.Address, SegmentID: string(s.ID), ClientID: string(s.ID),
				BaseAddress: "0x0", SizeBytes: s.DRAMCapacity, SizeHuman: fmt.Sprintf("%g GiB", float64(s.DRAMCapacity)/(1<<30)),
				TEEndpoint: s.Address, Protocol: rpcsrv.DefaultProtocol, Status: st, AllocatorUsedBytes: s.Bytes,
				AllocatorCapacityBytes: s.DRAMCapacity, AllocatorUsagePercent: pct})
		}
		admin.WriteJSON(w, http.StatusOK, map[string]any{"total_segments": len(items), "segments": items})
	})
	mux.HandleFunc("GET /kv_events/status", func(w http.ResponseWriter, _ *http.Request) {
		admin.WriteJSON(w, http.StatusOK, m.kv.status())
	})
	mux.HandleFunc("GET /api/v1/segments/status", func(w http.ResponseWriter, r *http.Request) {
		name := r.URL.Query().Get("segment")
		s, err := m.findSegment(name)
		if err != nil {
			writeMooncakeError(w, err)
			return
		}
		n, st := segmentStatus(s)
		admin.WriteJSON(w, http.StatusOK, map[string]any{"success": true, "segment": name, "status": n, "status_name": st,
			"error_code": 0, "error_message": ""})
	})
	mux.HandleFunc("POST /api/v1/drain_jobs", func(w http.ResponseWriter, r *http.Request) {
		j, err := m.createDrainJob(r)
		if err != nil {
			writeMooncakeError(w, err)
			return
		}
		admin.WriteJSON(w, http.StatusOK, map[string]any{"success": true, "job_id": j.id, "status": "CREATED", "error_code": 0, "error_message": ""})
	})
	mux.HandleFunc("GET /api/v1/drain_jobs/query", func(w http.ResponseWriter, r *http.Request) {
		j, err := m.job(r)
		if err != nil {
			writeMooncakeError(w, err)
			return
		}
		admin.WriteJSON(w, http.StatusOK, m.jobReport(j))
	})
	mux.HandleFunc("POST /api/v1/drain_jobs/cancel", func(w http.ResponseWriter, r *http.Request) {
		j, err := m.job(r)
		if err == nil {
			for _, id := range j.ids {
				if e := m.drainWorker(r.Context(), id, true); e != nil && !errors.Is(e, base.ErrSegmentNotFound) {
					err = e
					break
				}
			}
		}
		if err != nil {
			writeMooncakeError(w, err)
			return
		}
		m.jobs.mu.Lock()
		j.canceled, j.updated = true, m.now()
		m.jobs.mu.Unlock()
		admin.WriteJSON(w, http.StatusOK, map[string]any{"success": true, "job_id": j.id, "status": "CANCELED", "error_code": 0, "error_message": ""})
	})
}
