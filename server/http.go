package server

import (
	"context"
	_ "embed"
	"encoding/json"
	"errors"
	"log/slog"
	"maps"
	"net"
	"net/http"
	"net/http/pprof"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

//go:embed dashboard.html
var dashboardHTML []byte

// adminServer serves the metrics port: /metrics (Prometheus text), /health, /api/v1/status
// (JSON), /debug/pprof/ (the Go profiler) and, on masters, a static dashboard at / that
// fetches /api/v1/status.
//
// It owns its listener and one serving goroutine (docs/threads.md: "admin HTTP").
type adminServer struct {
	ln  net.Listener
	srv *http.Server
	// done is closed when the serving goroutine returns.
	done chan struct{}
}

// adminHandlers are the callbacks the admin endpoints read. All run on HTTP goroutines.
type adminHandlers struct {
	reg       *prometheus.Registry
	health    func() error        // nil: healthy (200), else 503 with the error
	ready     func() error        // nil: ready to serve puts and gets; nil func: as health
	status    func() (any, error) // the JSON body of /api/v1/status
	dashboard bool                // serve the dashboard page at /
	// routes, when set, adds endpoints (Mooncake's admin endpoints on masters, http_compat.go).
	routes func(mux *http.ServeMux)
	// healthKV, when set, adds fields to /health's JSON (Mooncake's role, ha_state, ...).
	healthKV func() map[string]any
}

// startAdmin listens on addr and serves h. addr "" means no admin server (nil, nil).
func startAdmin(addr string, h adminHandlers, logger *slog.Logger) (*adminServer, error) {
	if addr == "" {
		return nil, nil
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	mux := http.NewServeMux() // never http.DefaultServeMux (style.md section 12)
	mux.Handle("GET /metrics", promhttp.HandlerFor(h.reg, promhttp.HandlerOpts{ErrorLog: slog.NewLogLogger(logger.Handler(), slog.LevelWarn)}))
	mux.HandleFunc("GET /health", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		body := map[string]any{"status": "ok", "live": true}
		if h.healthKV != nil {
			maps.Copy(body, h.healthKV())
		}
		if err := h.health(); err != nil {
			body["status"], body["ready"], body["error"] = "unavailable", false, err.Error()
			w.WriteHeader(http.StatusServiceUnavailable)
			_ = json.NewEncoder(w).Encode(body)
			return
		}
		body["ready"] = h.isReady() == nil
		_ = json.NewEncoder(w).Encode(body)
	})
	registerProbes(mux, h)
	if h.routes != nil {
		h.routes(mux)
	}
	mux.HandleFunc("GET /api/v1/status", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		v, err := h.status()
		if err != nil {
			w.WriteHeader(http.StatusServiceUnavailable)
			_ = json.NewEncoder(w).Encode(map[string]string{"error": err.Error()})
			return
		}
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		_ = enc.Encode(v)
	})
	// The Go profiler, as on every Go infrastructure server (Prometheus, etcd): CPU, heap,
	// goroutines, mutex contention. It is read-only and on the metrics port, which is not the
	// data port; keep that port off untrusted networks like the rest of it.
	mux.HandleFunc("GET /debug/pprof/", pprof.Index)
	mux.HandleFunc("GET /debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("GET /debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("GET /debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("GET /debug/pprof/trace", pprof.Trace)
	if h.dashboard {
		mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", "text/html; charset=utf-8")
			_, _ = w.Write(dashboardHTML)
		})
	}
	s := &adminServer{
		ln: ln,
		srv: &http.Server{
			Handler:           mux,
			ReadHeaderTimeout: 10 * time.Second,
			ErrorLog:          slog.NewLogLogger(logger.Handler(), slog.LevelWarn),
		},
		done: make(chan struct{}),
	}
	go func() {
		defer close(s.done)
		if err := s.srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			logger.Error("admin http server stopped", "addr", ln.Addr().String(), "err", err)
		}
	}()
	return s, nil
}

// Addr returns the bound address ("" for a nil server).
func (s *adminServer) Addr() string {
	if s == nil {
		return ""
	}
	return s.ln.Addr().String()
}

// close stops the server: graceful until ctx ends, then hard. Safe on nil.
func (s *adminServer) close(ctx context.Context) error {
	if s == nil {
		return nil
	}
	err := s.srv.Shutdown(ctx)
	if err != nil {
		err = errors.Join(err, s.srv.Close())
	}
	<-s.done
	return err
}
