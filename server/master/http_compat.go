package master

import (
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"github.com/mooncake-go/mooncake/internal/base"
	"github.com/mooncake-go/mooncake/raftmeta"
	"github.com/mooncake-go/mooncake/server/internal/admin"
	"github.com/mooncake-go/mooncake/server/rpcsrv"
)

// Mooncake's admin endpoints on the master's metrics port, with Mooncake's response shapes
// (its master_admin_service), so scripts and SGLang's polling of /get_all_segments work
// unchanged. Every master answers from its own replica of the metadata (Mooncake's standby
// masters answer 503 instead); the leader's replica is the current one, a follower's lags it
// by at most the commits in flight. Segments are named by their worker's data address
// (host:port), as Mooncake names a segment by its client's local_hostname; /query_segment
// also accepts a worker id. docs/operations.md lists the endpoints.

// ready is the master's readiness: a leader is known and at least one worker is active, so
// a put can be placed.
func (m *Master) ready() error {
	if err := m.health(); err != nil {
		return err
	}
	if m.node.Stats().Active == 0 {
		return fmt.Errorf("%w: no worker has registered yet", base.ErrUnavailable)
	}
	return nil
}

// role is Mooncake's /role answer: "leader" or "standby".
func (m *Master) role() string {
	if m.node.IsLeader() {
		return "leader"
	}
	return "standby"
}

// haState is Mooncake's /ha_status answer: "serving" on the leader, "standby" on a follower
// that knows a leader, "candidate" while none is known.
func (m *Master) haState() string {
	switch lid, _ := m.node.Leader(); {
	case m.node.IsLeader():
		return "serving"
	case lid != "":
		return "standby"
	}
	return "candidate"
}

// bufferDescriptor is Mooncake's AllocatedBuffer::Descriptor, the JSON of one memory replica
// in /query_key and /batch_query_keys. buffer_address_ is 0: a replica here is a worker's
// object, reached by key over TCP, not a remote address.
type bufferDescriptor struct {
	Size              int64  `json:"size_"`
	BufferAddress     uint64 `json:"buffer_address_"`
	Protocol          string `json:"protocol_"`
	TransportEndpoint string `json:"transport_endpoint_"`
}

// descriptors returns one descriptor per replica of key on an active worker.
func (m *Master) descriptors(key string) ([]bufferDescriptor, error) {
	if err := base.ValidateKey(key); err != nil {
		return nil, err
	}
	obj, ok := m.node.Lookup(key)
	if !ok {
		return nil, fmt.Errorf("%w: %q", base.ErrObjectNotFound, key)
	}
	addr := map[base.WorkerID]string{}
	for _, s := range m.node.Segments() {
		if s.State == raftmeta.SegmentActive {
			addr[s.ID] = s.Address
		}
	}
	out := []bufferDescriptor{}
	for _, id := range obj.Replicas {
		if a, ok := addr[id]; ok {
			out = append(out, bufferDescriptor{Size: obj.Size, Protocol: rpcsrv.DefaultProtocol, TransportEndpoint: a})
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%w: %q has no replica on an active worker", base.ErrObjectNotFound, key)
	}
	return out, nil
}

// maxAdminKeys bounds the keys one /get_all_keys answer lists (about 100 MiB of 100-byte
// keys); past it the answer ends with a comment line saying so.
const maxAdminKeys = 1 << 20

// maxBatchQueryKeys bounds /batch_query_keys (the master's batch bound).
const maxBatchQueryKeys = 4096

// compatRoutes adds Mooncake's admin endpoints to the master's metrics port.
func (m *Master) compatRoutes(mux *http.ServeMux) {
	m.jobRoutes(mux) // the newer ones (http_admin.go)
	mux.HandleFunc("GET /get_all_keys", func(w http.ResponseWriter, _ *http.Request) {
		var b strings.Builder
		n := 0
		m.node.Range("", func(o raftmeta.Object) bool {
			if n == maxAdminKeys {
				fmt.Fprintf(&b, "# truncated after %d keys; use `mooncake ls` for all\n", maxAdminKeys)
				return false
			}
			b.WriteString(o.Key)
			b.WriteByte('\n')
			n++
			return true
		})
		admin.WriteText(w, http.StatusOK, b.String())
	})
	// Mooncake's current shape: {"success":true,"data":[descriptor, ...]}, and on a miss
	// 404 {"success":false,"error_code":-704,"error_message":"OBJECT_NOT_FOUND"}.
	mux.HandleFunc("GET /query_key", func(w http.ResponseWriter, r *http.Request) {
		ds, err := m.descriptors(r.URL.Query().Get("key"))
		if err != nil {
			admin.WriteJSON(w, http.StatusNotFound, map[string]any{"success": false, "error_code": mooncakeErrorCode(err), "error_message": base.CodeOf(err).String()})
			return
		}
		admin.WriteJSON(w, http.StatusOK, map[string]any{"success": true, "data": ds})
	})
	mux.HandleFunc("GET /batch_query_keys", func(w http.ResponseWriter, r *http.Request) {
		raw := r.URL.Query().Get("keys")
		if raw == "" {
			admin.WriteJSON(w, http.StatusBadRequest, map[string]any{"success": false, "error": "No keys provided. Use ?keys=key1,key2,..."})
			return
		}
		keys := strings.Split(raw, ",")
		if len(keys) > maxBatchQueryKeys {
			admin.WriteJSON(w, http.StatusBadRequest, map[string]any{"success": false, "error": fmt.Sprintf("%d keys, the limit is %d", len(keys), maxBatchQueryKeys)})
			return
		}
		type item struct {
			OK     bool               `json:"ok"`
			Error  string             `json:"error,omitempty"`
			Values []bufferDescriptor `json:"values,omitempty"`
		}
		data := make(map[string]item, len(keys))
		for _, k := range keys {
			ds, err := m.descriptors(k)
			if err != nil {
				data[k] = item{Error: base.CodeOf(err).String()}
				continue
			}
			data[k] = item{OK: true, Values: ds}
		}
		admin.WriteJSON(w, http.StatusOK, map[string]any{"success": true, "data": data})
	})
	mux.HandleFunc("GET /get_all_segments", func(w http.ResponseWriter, _ *http.Request) {
		var b strings.Builder
		for _, s := range m.activeSegmentsSorted() {
			b.WriteString(s.Address)
			b.WriteByte('\n')
		}
		admin.WriteText(w, http.StatusOK, b.String())
	})
	mux.HandleFunc("GET /query_segment", func(w http.ResponseWriter, r *http.Request) {
		name := r.URL.Query().Get("segment")
		for _, s := range m.activeSegmentsSorted() {
			if s.Address == name || string(s.ID) == name {
				admin.WriteText(w, http.StatusOK, name+"\nUsed(bytes): "+strconv.FormatInt(s.Bytes, 10)+
					"\nCapacity(bytes) : "+strconv.FormatInt(s.DRAMCapacity, 10)+"\n")
				return
			}
		}
		admin.WriteText(w, http.StatusInternalServerError, "Failed to query segment")
	})
	mux.HandleFunc("GET /metrics/summary", func(w http.ResponseWriter, _ *http.Request) {
		admin.WriteText(w, http.StatusOK, m.summaryText())
	})
	mux.HandleFunc("GET /role", func(w http.ResponseWriter, _ *http.Request) {
		admin.WriteText(w, http.StatusOK, m.role())
	})
	mux.HandleFunc("GET /ha_status", func(w http.ResponseWriter, _ *http.Request) {
		admin.WriteText(w, http.StatusOK, m.haState())
	})
	mux.HandleFunc("GET /leader", func(w http.ResponseWriter, _ *http.Request) {
		lid, laddr := m.node.Leader()
		v := map[string]any{"present": lid != ""}
		if lid != "" {
			// view_version is Mooncake's leader view counter; the raft term plays that role.
			v["leader_address"], v["view_version"], v["leader_id"] = laddr, m.node.Stats().Term, lid
		}
		admin.WriteJSON(w, http.StatusOK, v)
	})
}

// activeSegmentsSorted returns the active workers ordered by address.
func (m *Master) activeSegmentsSorted() []raftmeta.Segment {
	var out []raftmeta.Segment
	for _, s := range m.node.Segments() {
		if s.State == raftmeta.SegmentActive {
			out = append(out, s)
		}
	}
	slices.SortFunc(out, func(a, b raftmeta.Segment) int { return strings.Compare(a.Address, b.Address) })
	return out
}

// healthFields are Mooncake's /health fields: role, ha_state, service_ready and, when a
// leader is known, its address and view_version (the raft term).
func (m *Master) healthFields() map[string]any {
	f := map[string]any{"role": m.role(), "ha_state": m.haState(), "service_ready": m.health() == nil}
	if lid, laddr := m.node.Leader(); lid != "" {
		f["leader_address"], f["view_version"] = laddr, m.node.Stats().Term
	}
	return f
}
