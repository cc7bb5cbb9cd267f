package logtest_test

import (
	"fmt"
	"log/slog"
	"sync"
	"testing"

	"github.com/fireonce/fireonce/shared/logtest"
)

func TestConcurrentWritesAreWhole(t *testing.T) {
	var b logtest.Buffer
	log := slog.New(slog.NewJSONHandler(&b, nil))
	const writers, each = 8, 50
	var wg sync.WaitGroup
	for w := range writers {
		wg.Go(func() {
			for i := range each {
				log.Info("hello", "writer", w, "i", i)
				_ = b.String() // a reader racing the writers
			}
		})
	}
	wg.Wait()
	if n := len(b.Lines(t)); n != writers*each {
		t.Fatalf("%d lines, want %d", n, writers*each)
	}
}

func TestTakeEmpties(t *testing.T) {
	var b logtest.Buffer
	fmt.Fprintln(&b, `{"n":1}`)
	fmt.Fprintln(&b, "")
	fmt.Fprintln(&b, `{"n":2}`)
	if got := b.Lines(t); len(got) != 2 {
		t.Fatalf("Lines = %v, want 2 lines (the blank one skipped)", got)
	}
	if got := b.Take(t); len(got) != 2 || got[1]["n"] != 2.0 {
		t.Fatalf("Take = %v, want the same 2 lines", got)
	}
	if got := b.Take(t); len(got) != 0 || b.String() != "" {
		t.Fatalf("after Take: Take = %v, String = %q, want both empty", got, b.String())
	}
}

func ExampleBuffer() {
	var b logtest.Buffer
	slog.New(slog.NewJSONHandler(&b, &slog.HandlerOptions{
		ReplaceAttr: func(_ []string, a slog.Attr) slog.Attr {
			if a.Key == slog.TimeKey {
				return slog.Attr{}
			}
			return a
		},
	})).Info("sent", "eventID", "e1")
	fmt.Print(b.String())
	// Output: {"level":"INFO","msg":"sent","eventID":"e1"}
}
