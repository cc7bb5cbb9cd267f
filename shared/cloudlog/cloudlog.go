// Package cloudlog makes slog loggers that write JSON lines the way Cloud
// Logging reads them from a function's stdout: the level under "severity"
// (DEBUG, INFO, WARNING, ERROR) and the text under "message", so the console
// shows severities and messages instead of one opaque string per line.
package cloudlog

import (
	"io"
	"log/slog"
)

// New returns a logger writing one JSON object per record to w, at level and
// above.
func New(w io.Writer, level slog.Leveler) *slog.Logger {
	return slog.New(slog.NewJSONHandler(w, &slog.HandlerOptions{
		Level:       level,
		ReplaceAttr: replace,
	}))
}

func replace(groups []string, a slog.Attr) slog.Attr {
	if len(groups) > 0 {
		return a
	}
	switch a.Key {
	case slog.LevelKey:
		return slog.String("severity", severity(a.Value.Any()))
	case slog.MessageKey:
		a.Key = "message"
	}
	return a
}

func severity(v any) string {
	level, ok := v.(slog.Level)
	if !ok {
		return "DEFAULT"
	}
	switch {
	case level >= slog.LevelError:
		return "ERROR"
	case level >= slog.LevelWarn:
		return "WARNING"
	case level >= slog.LevelInfo:
		return "INFO"
	}
	return "DEBUG"
}
