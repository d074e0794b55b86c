package raftmeta

import (
	"context"
	"io"
	"log"
	"log/slog"

	"github.com/hashicorp/go-hclog"
)

// hcLogger adapts hclog.Logger (what hashicorp/raft logs to) to an injected *slog.Logger.
// Levels map one to one (Trace goes to slog.LevelDebug-4); hclog's key/value args are slog's.
// SetLevel is ignored: the slog handler's level decides what is written.
type hcLogger struct {
	base    *slog.Logger // the injected logger plus With args, without the component
	l       *slog.Logger // base with component=name
	name    string
	implied []any
}

func newHCLogger(l *slog.Logger, name string) hclog.Logger {
	return &hcLogger{base: l, l: l.With("component", name), name: name}
}

func slogLevel(level hclog.Level) slog.Level {
	switch level {
	case hclog.Trace:
		return slog.LevelDebug - 4
	case hclog.Debug:
		return slog.LevelDebug
	case hclog.Warn:
		return slog.LevelWarn
	case hclog.Error:
		return slog.LevelError
	}
	return slog.LevelInfo
}

func (h *hcLogger) Log(level hclog.Level, msg string, args ...any) {
	h.l.Log(context.Background(), slogLevel(level), msg, args...)
}
func (h *hcLogger) Trace(msg string, args ...any) { h.Log(hclog.Trace, msg, args...) }
func (h *hcLogger) Debug(msg string, args ...any) { h.Log(hclog.Debug, msg, args...) }
func (h *hcLogger) Info(msg string, args ...any)  { h.Log(hclog.Info, msg, args...) }
func (h *hcLogger) Warn(msg string, args ...any)  { h.Log(hclog.Warn, msg, args...) }
func (h *hcLogger) Error(msg string, args ...any) { h.Log(hclog.Error, msg, args...) }

func (h *hcLogger) enabled(level hclog.Level) bool {
	return h.l.Enabled(context.Background(), slogLevel(level))
}
func (h *hcLogger) IsTrace() bool { return h.enabled(hclog.Trace) }
func (h *hcLogger) IsDebug() bool { return h.enabled(hclog.Debug) }
func (h *hcLogger) IsInfo() bool  { return h.enabled(hclog.Info) }
func (h *hcLogger) IsWarn() bool  { return h.enabled(hclog.Warn) }
func (h *hcLogger) IsError() bool { return h.enabled(hclog.Error) }

func (h *hcLogger) ImpliedArgs() []any { return h.implied }
func (h *hcLogger) With(args ...any) hclog.Logger {
	return &hcLogger{base: h.base.With(args...), l: h.l.With(args...), name: h.name,
		implied: append(append([]any(nil), h.implied...), args...)}
}
func (h *hcLogger) Name() string { return h.name }
func (h *hcLogger) Named(name string) hclog.Logger {
	if h.name != "" {
		name = h.name + "." + name
	}
	return h.ResetNamed(name)
}
func (h *hcLogger) ResetNamed(name string) hclog.Logger {
	return &hcLogger{base: h.base, l: h.base.With("component", name), name: name, implied: h.implied}
}
func (h *hcLogger) SetLevel(hclog.Level) {}
func (h *hcLogger) GetLevel() hclog.Level {
	for _, lv := range []hclog.Level{hclog.Trace, hclog.Debug, hclog.Info, hclog.Warn, hclog.Error} {
		if h.enabled(lv) {
			return lv
		}
	}
	return hclog.Off
}
func (h *hcLogger) StandardLogger(opts *hclog.StandardLoggerOptions) *log.Logger {
	return log.New(h.StandardWriter(opts), "", 0)
}
func (h *hcLogger) StandardWriter(opts *hclog.StandardLoggerOptions) io.Writer {
	level := hclog.Info
	if opts != nil && opts.ForceLevel != hclog.NoLevel {
		level = opts.ForceLevel
	}
	return &hcWriter{h: h, level: level}
}

// hcWriter turns lines written by a standard *log.Logger into log records.
type hcWriter struct {
	h     *hcLogger
	level hclog.Level
}

func (w *hcWriter) Write(p []byte) (int, error) {
	msg := string(p)
	for len(msg) > 0 && msg[len(msg)-1] == '\n' {
		msg = msg[:len(msg)-1]
	}
	w.h.Log(w.level, msg)
	return len(p), nil
}
