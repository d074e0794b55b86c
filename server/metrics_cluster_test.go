package server

import (
	"log/slog"
	"strings"
	"testing"
	"time"

	mctest "github.com/mooncake-go/mooncake/internal/testutil"

	"github.com/mooncake-go/mooncake/server/master"
)

// TestSummaryLogged: the leader logs the "Master Metrics:" line every SummaryInterval, and the
// effective config once at start.
func TestSummaryLogged(t *testing.T) {
	var buf mctest.SyncBuffer
	c := startMasters(t, 1, func(cfg *master.Config) {
		cfg.SummaryInterval = 20 * time.Millisecond
		cfg.Logger = slog.New(slog.NewTextHandler(&buf, nil))
	})
	c.addWorker("", nil)
	eventually(t, "summary line", func() bool {
		return strings.Contains(buf.String(), "Master Metrics: Mem Storage: 0 B / 32.0 MiB (0.0%) | SSD Storage: 0 B / 0 B | Keys: 0 (soft-pinned: 0) | Clients: 1 |")
	})
	if !strings.Contains(buf.String(), "msg=\"master starting\"") || !strings.Contains(buf.String(), "client_ttl=10s") {
		t.Fatalf("effective config not logged:\n%s", buf.String())
	}
}
