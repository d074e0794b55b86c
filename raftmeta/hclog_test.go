package raftmeta

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"

	"github.com/hashicorp/go-hclog"
)

func TestHCLogAdapter(t *testing.T) {
	var buf bytes.Buffer
	l := newHCLogger(slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelInfo})), "raft")
	l.Debug("hidden", "k", 1)
	l.Info("entering follower state", "leader-id", "m2")
	l.Named("snapshot").Warn("slow", "took", "3s")
	l.With("peer", "m3").Error("failed to contact")
	l.StandardLogger(&hclog.StandardLoggerOptions{ForceLevel: hclog.Warn}).Print("from std log")
	out := buf.String()
	for _, want := range []string{
		`level=INFO msg="entering follower state" component=raft leader-id=m2`,
		`level=WARN msg=slow component=raft.snapshot took=3s`,
		`level=ERROR msg="failed to contact" component=raft peer=m3`,
		`level=WARN msg="from std log" component=raft`,
	} {
		if !strings.Contains(out, want) {
			t.Fatalf("missing %q in:\n%s", want, out)
		}
	}
	if strings.Contains(out, "hidden") || l.IsDebug() || !l.IsInfo() || l.GetLevel() != hclog.Info {
		t.Fatalf("level filtering wrong:\n%s", out)
	}
}
