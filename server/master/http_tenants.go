package master

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"

	"github.com/mooncake-go/mooncake/internal/base"
	"github.com/mooncake-go/mooncake/server/internal/admin"
)

// Mooncake's tenant quota endpoints (master_admin_service.cpp, tenant_quota_http.cpp), on the
// master's metrics port:
//
//	GET    /tenants/quota                         every tenant with a quota of its own or an object
//	GET    /tenants/quota/query?tenant_id=T       one tenant (404 "Tenant not found" if neither)
//	PUT    /tenants/quota/query?tenant_id=T       {"max_bytes": N, "nvme_max_bytes": M}: set T's quotas (0 or no M: none)
//	DELETE /tenants/quota/query?tenant_id=T       remove T's quota (404 when it has none); it falls back to the default
//	GET    /tenants/quota/_default                the default quota: that of every tenant without its own (0: none)
//	PUT    /tenants/quota/_default                {"max_bytes": N, "nvme_max_bytes": M}: set it (both 0: none)
//
// Writes go through raft on the leader (a follower answers 503, UNAVAILABLE_IN_CURRENT_STATUS).
// "nvme_max_bytes" is the NVMe quota (0 or absent: no limit; master_tenants.go says how the
// workers hold it). A tenant's answer has Mooncake's "has_explicit_policy": false when its
// quota is the default's. As in Mooncake, the /query endpoints refuse ids starting with '_'
// (reserved: "_default" is the default quota's pseudo-tenant).

// tenantQuotaBody is the PUT body. MaxBytes is a pointer so a body without it is an error.
type tenantQuotaBody struct {
	MaxBytes     *int64 `json:"max_bytes"`
	NVMeMaxBytes int64  `json:"nvme_max_bytes"`
}

func readTenantQuotaBody(r *http.Request) (tenantQuotaBody, error) {
	var b tenantQuotaBody
	dec := json.NewDecoder(io.LimitReader(r.Body, 1<<16))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&b); err != nil {
		return b, fmt.Errorf("%w: Invalid JSON body: %v", base.ErrInvalidParams, err)
	}
	if b.MaxBytes == nil {
		return b, fmt.Errorf("%w: the body must set max_bytes (0: no limit)", base.ErrInvalidParams)
	}
	if *b.MaxBytes < 0 || b.NVMeMaxBytes < 0 {
		return b, fmt.Errorf("%w: max_bytes %d: want 0 (no limit) or more", base.ErrInvalidParams, *b.MaxBytes)
	}
	return b, nil
}

// queryTenant returns the tenant_id parameter, checked.
func queryTenant(r *http.Request) (string, error) {
	t := r.URL.Query().Get("tenant_id")
	if t == "" {
		return "", fmt.Errorf("%w: missing tenant_id query parameter", base.ErrInvalidParams)
	}
	if err := base.ValidateQuotaTenant(t); err != nil {
		return "", fmt.Errorf("%w (use the /tenants/quota/_default endpoint for the default policy)", err)
	}
	return t, nil
}

// tenantRoutes adds the endpoints of this file.
func (m *Master) tenantRoutes(mux *http.ServeMux) {
	mux.HandleFunc("GET /tenants/quota", func(w http.ResponseWriter, _ *http.Request) {
		admin.WriteJSON(w, http.StatusOK, map[string]any{"success": true, "tenants": m.tenantStatuses()})
	})
	mux.HandleFunc("GET /tenants/quota/query", func(w http.ResponseWriter, r *http.Request) {
		t, err := queryTenant(r)
		if err != nil {
			writeMooncakeError(w, err)
			return
		}
		u := m.node.Tenant(t)
		if (u.DefaultQuota || u.DRAMQuota == 0 && u.NVMeQuota == 0) && u.Objects == 0 {
			writeMooncakeError(w, fmt.Errorf("%w: Tenant not found: %q has no quota and no object", base.ErrObjectNotFound, t))
			return
		}
		writeTenant(w, m.tenantStatus(u))
	})
	mux.HandleFunc("PUT /tenants/quota/query", func(w http.ResponseWriter, r *http.Request) {
		t, err := queryTenant(r)
		var b tenantQuotaBody
		if err == nil {
			b, err = readTenantQuotaBody(r)
		}
		if err == nil {
			err = m.setTenantQuota(r.Context(), t, *b.MaxBytes, b.NVMeMaxBytes)
		}
		if err != nil {
			writeMooncakeError(w, err)
			return
		}
		writeTenant(w, m.tenantStatus(m.node.Tenant(t)))
	})
	mux.HandleFunc("DELETE /tenants/quota/query", func(w http.ResponseWriter, r *http.Request) {
		t, err := queryTenant(r)
		if err == nil {
			if u := m.node.Tenant(t); u.DefaultQuota || u.DRAMQuota == 0 && u.NVMeQuota == 0 {
				err = fmt.Errorf("%w: Tenant not found: %q has no quota", base.ErrObjectNotFound, t)
			}
		}
		if err == nil {
			err = m.setTenantQuota(r.Context(), t, 0, 0)
		}
		if err != nil {
			writeMooncakeError(w, err)
			return
		}
		admin.WriteJSON(w, http.StatusOK, map[string]any{"success": true, "tenant_id": base.NormalizeTenant(t)})
	})
	mux.HandleFunc("GET /tenants/quota/_default", func(w http.ResponseWriter, _ *http.Request) {
		writeTenant(w, m.defaultTenantStatus())
	})
	mux.HandleFunc("PUT /tenants/quota/_default", func(w http.ResponseWriter, r *http.Request) {
		b, err := readTenantQuotaBody(r)
		if err == nil {
			err = m.setTenantQuota(r.Context(), base.DefaultQuotaTenant, *b.MaxBytes, b.NVMeMaxBytes)
		}
		if err != nil {
			writeMooncakeError(w, err)
			return
		}
		writeTenant(w, m.defaultTenantStatus())
	})
}

// writeTenant writes one tenant as Mooncake's query answer: success and the tenant's fields.
func writeTenant(w http.ResponseWriter, s TenantStatus) {
	admin.WriteJSON(w, http.StatusOK, map[string]any{"success": true, "tenant_id": s.TenantID, "max_bytes": s.MaxBytes,
		"nvme_max_bytes": s.NVMeMaxBytes, "used_bytes": s.UsedBytes, "reserved_bytes": s.ReservedBytes, "committed_count": s.CommittedCount,
		"has_explicit_policy": s.HasExplicitPolicy})
}
