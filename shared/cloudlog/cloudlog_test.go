package cloudlog

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"testing"
)

func TestSeverityAndMessage(t *testing.T) {
	tests := []struct {
		level slog.Level
		want  string
	}{
		{slog.LevelDebug, "DEBUG"},
		{slog.LevelInfo, "INFO"},
		{slog.LevelWarn, "WARNING"},
		{slog.LevelError, "ERROR"},
		{slog.LevelError + 4, "ERROR"},
	}
	for _, tt := range tests {
		t.Run(tt.want, func(t *testing.T) {
			var buf bytes.Buffer
			New(&buf, slog.LevelDebug).Log(t.Context(), tt.level, "hello", "eventID", "e1", slog.Group("g", "level", "x"))
			var line map[string]any
			if err := json.Unmarshal(buf.Bytes(), &line); err != nil {
				t.Fatalf("not one JSON object: %q: %v", buf.String(), err)
			}
			if line["severity"] != tt.want || line["message"] != "hello" || line["eventID"] != "e1" {
				t.Fatalf("line = %v, want severity %s, message hello, eventID e1", line, tt.want)
			}
			if _, ok := line["level"]; ok {
				t.Fatalf("line still has level: %v", line)
			}
			if g, _ := line["g"].(map[string]any); g["level"] != "x" {
				t.Fatalf("a grouped attribute named level was rewritten: %v", line)
			}
		})
	}
}

func TestLevelFilters(t *testing.T) {
	var buf bytes.Buffer
	New(&buf, slog.LevelWarn).Info("dropped")
	if buf.Len() != 0 {
		t.Fatalf("INFO written at level WARN: %q", buf.String())
	}
}
