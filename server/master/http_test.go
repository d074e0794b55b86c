package master

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"testing"

	"github.com/mooncake-go/mooncake/server/internal/admin"
)

func TestAdminServer(t *testing.T) {
	m := newMasterMetrics(func() masterStats { return masterStats{Keys: 3} })
	healthErr := error(nil)
	s, err := admin.Start("127.0.0.1:0", admin.Handlers{
		Reg:       m.reg,
		Health:    func() error { return healthErr },
		Status:    func() (any, error) { return map[string]any{"leader": "m2"}, nil },
		Dashboard: true,
	}, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := s.Close(context.Background()); err != nil {
			t.Error(err)
		}
	}()
	get := func(path string) (int, string) {
		t.Helper()
		resp, err := http.Get("http://" + s.Addr() + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if code, body := get("/metrics"); code != 200 || !strings.Contains(body, "master_key_count 3") {
		t.Fatalf("/metrics: %d %s", code, body)
	}
	if code, body := get("/health"); code != 200 || !strings.Contains(body, `"ok"`) {
		t.Fatalf("/health: %d %s", code, body)
	}
	healthErr = errors.New("no leader")
	if code, _ := get("/health"); code != 503 {
		t.Fatalf("/health unhealthy: %d", code)
	}
	if code, body := get("/api/v1/status"); code != 200 || !strings.Contains(body, `"leader": "m2"`) {
		t.Fatalf("/api/v1/status: %d %s", code, body)
	}
	if code, body := get("/"); code != 200 || !strings.Contains(body, "/api/v1/status") {
		t.Fatalf("/: %d %s", code, body)
	}
	if code, body := get("/debug/pprof/"); code != 200 || !strings.Contains(body, "goroutine") {
		t.Fatalf("/debug/pprof/: %d %s", code, body)
	}
	if code, body := get("/debug/pprof/goroutine?debug=1"); code != 200 || !strings.Contains(body, "admin.Start") {
		t.Fatalf("/debug/pprof/goroutine: %d %.200s", code, body)
	}
	if code, _ := get("/nope"); code != 404 {
		t.Fatalf("/nope: %d", code)
	}
}
