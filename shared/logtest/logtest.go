// Package logtest collects what loggers, servers and child processes write
// from many goroutines, for a test to read while they run.
//
// A Buffer is safe for concurrent Write, String, Lines and Take: a reader
// never sees a write half done. Lines and Take read slog's JSON output (one
// object per line) and fail the test on a line that is not one JSON object.
package logtest

import (
	"bytes"
	"encoding/json"
	"strings"
	"sync"
	"testing"
)

// Buffer is an io.Writer that goroutines may write to while the test reads
// it. The zero value is an empty buffer ready to use.
type Buffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

// Write appends p; it never fails.
func (b *Buffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

// String returns everything written so far.
func (b *Buffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// Lines returns the JSON lines written so far, one map each, failing t on a
// line that is not one JSON object. Blank lines are skipped.
func (b *Buffer) Lines(t testing.TB) []map[string]any {
	t.Helper()
	return parse(t, b.String())
}

// Take is Lines that also empties the buffer, in one step, so no line
// written meanwhile is lost: each call returns only what came after the
// previous one.
func (b *Buffer) Take(t testing.TB) []map[string]any {
	t.Helper()
	b.mu.Lock()
	text := b.buf.String()
	b.buf.Reset()
	b.mu.Unlock()
	return parse(t, text)
}

func parse(t testing.TB, text string) []map[string]any {
	t.Helper()
	var lines []map[string]any
	for l := range strings.SplitSeq(strings.TrimSpace(text), "\n") {
		if l == "" {
			continue
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatalf("log line is not one JSON object: %q: %v", l, err)
		}
		lines = append(lines, m)
	}
	return lines
}
