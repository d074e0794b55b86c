package admin

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

// Server serves the metrics port: /metrics (Prometheus text), /health, /api/v1/status
// (JSON), /debug/pprof/ (the Go profiler) and, on masters, a static dashboard at / that
// fetches /api/v1/status.
//
// It owns its listener and one serving goroutine (docs/threads.md: "admin HTTP").
type Server struct {
	ln  net.Listener
	srv *http.Server
	// done is closed when the serving goroutine returns.
	done chan struct{}
}

// Handlers are the callbacks the admin endpoints read. All run on HTTP goroutines.
type Handlers struct {
	Reg       *prometheus.Registry
	Health    func() error        // nil: healthy (200), else 503 with the error
	Ready     func() error        // nil: ready to serve puts and gets; nil func: as health
	Status    func() (any, error) // the JSON body of /api/v1/status
	Dashboard bool                // serve the dashboard page at /
	// Routes, when set, adds endpoints (Mooncake's admin endpoints on masters, server/master/http_compat.go).
	Routes func(mux *http.ServeMux)
	// HealthKV, when set, adds fields to /health's JSON (Mooncake's role, ha_state, ...).
	HealthKV func() map[string]any
}

// Start listens on addr and serves h. addr "" means no admin server (nil, nil).
func Start(addr string, h Handlers, logger *slog.Logger) (*Server, error) {
	if addr == "" {
		return nil, nil
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	mux := http.NewServeMux() // never http.DefaultServeMux (style.md section 12)
	mux.Handle("GET /metrics", promhttp.HandlerFor(h.Reg, promhttp.HandlerOpts{ErrorLog: slog.NewLogLogger(logger.Handler(), slog.LevelWarn)}))
	mux.HandleFunc("GET /health", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		body := map[string]any{"status": "ok", "live": true}
		if h.HealthKV != nil {
			maps.Copy(body, h.HealthKV())
		}
		if err := h.Health(); err != nil {
			body["status"], body["ready"], body["error"] = "unavailable", false, err.Error()
			w.WriteHeader(http.StatusServiceUnavailable)
			_ = json.NewEncoder(w).Encode(body)
			return
		}
		body["ready"] = h.isReady() == nil
		_ = json.NewEncoder(w).Encode(body)
	})
	registerProbes(mux, h)
	if h.Routes != nil {
		h.Routes(mux)
	}
	mux.HandleFunc("GET /api/v1/status", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		v, err := h.Status()
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
	if h.Dashboard {
		mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", "text/html; charset=utf-8")
			_, _ = w.Write(dashboardHTML)
		})
	}
	s := &Server{
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
func (s *Server) Addr() string {
	if s == nil {
		return ""
	}
	return s.ln.Addr().String()
}

// Close stops the server: graceful until ctx ends, then hard. Safe on nil.
func (s *Server) Close(ctx context.Context) error {
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

// registerProbes adds /health/live (200 while the process serves HTTP) and /health/ready
// (200 when ready to serve puts and gets, else 503), for orchestrators that tell the two
// apart; /health stays as it was (see Start) with "live" and "ready" fields added.
func registerProbes(mux *http.ServeMux, h Handlers) {
	mux.HandleFunc("GET /health/live", func(w http.ResponseWriter, _ *http.Request) {
		WriteJSON(w, http.StatusOK, map[string]any{"status": "ok", "live": true})
	})
	mux.HandleFunc("GET /health/ready", func(w http.ResponseWriter, _ *http.Request) {
		if err := h.isReady(); err != nil {
			WriteJSON(w, http.StatusServiceUnavailable, map[string]any{"status": "unavailable", "live": true, "ready": false, "error": err.Error()})
			return
		}
		WriteJSON(w, http.StatusOK, map[string]any{"status": "ok", "live": true, "ready": true})
	})
}

// isReady applies h.Ready, or h.Health when there is no separate readiness.
func (h Handlers) isReady() error {
	if h.Ready != nil {
		return h.Ready()
	}
	return h.Health()
}

// WriteJSON answers v as JSON with status code.
func WriteJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}

// WriteText answers body as plain text with status code.
func WriteText(w http.ResponseWriter, code int, body string) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.WriteHeader(code)
	_, _ = w.Write([]byte(body))
}
