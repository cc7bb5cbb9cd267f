package bench_test

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/fireonce/fireonce/functions/internal/bench"
	"github.com/fireonce/fireonce/shared/firestoretest"
	"github.com/fireonce/fireonce/shared/triggeronce/redisstore/redistest"
)

// TestRun runs every case briefly on the emulator and a redis-server and
// checks what does not depend on timing: each case ran without errors and
// passed its check, and a first delivery made the calls counted here.
func TestRun(t *testing.T) {
	host := firestoretest.Host(t)
	addr := os.Getenv("FIREONCE_REDIS_ADDR")
	if addr == "" {
		addr = redistest.Start(t, nil).Addr
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	rep, err := bench.Run(ctx, bench.Config{
		EmulatorHost: host, Redis: &redis.Options{Addr: addr},
		Samples: 4, Rounds: 2, Warmup: 2, Users: 20, Storms: 2, StormSize: 16, Events: 6, Concurrency: 4,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = firestoretest.ClearProject(context.Background(), host, rep.Project) })

	calls := map[string]string{
		"1":  "Commit",
		"1t": "BeginTransaction + Commit",
		"1d": "BeginTransaction + BatchGetDocuments + Commit",
		"2a": "Commit",
		"2b": "BeginTransaction + Commit",
		"2c": "BeginTransaction + BatchGetDocuments + Commit",
		"3a": "BeginTransaction + BatchGetDocuments + Commit + Commit",
		"3b": "Commit + Commit",
		"4":  "Commit + Commit",
		"7a": "evalsha + evalsha",
		"7b": "set + del",
	}
	byID := map[string]bench.Result{}
	for _, c := range rep.Cases {
		byID[c.ID] = c
	}
	for _, id := range []string{"1", "1t", "1d", "2a", "2b", "2c", "3a", "3b", "4", "5", "6a", "6b", "6c", "6d", "7a", "7b", "7c"} {
		t.Run(id, func(t *testing.T) {
			c, ok := byID[id]
			if !ok {
				t.Fatal("case missing from the report")
			}
			if c.Errors > 0 || strings.HasPrefix(c.Check, "FAIL") {
				t.Fatalf("check %q, %d errors (%s)", c.Check, c.Errors, c.FirstError)
			}
			if c.Samples == 0 || c.P50Ms <= 0 {
				t.Errorf("no figures: %+v", c)
			}
			if want, ok := calls[id]; ok && c.Calls != want {
				t.Errorf("calls of a first delivery = %q, want %q", c.Calls, want)
			}
			if c.Baseline != "" && c.RatioP50 <= 0 {
				t.Errorf("no ratio to baseline %s", c.Baseline)
			}
		})
	}
	if rep.Failed() {
		t.Error("report says a case failed")
	}

	var table, js bytes.Buffer
	if err := rep.WriteTable(&table); err != nil {
		t.Fatal(err)
	}
	for _, c := range rep.Cases {
		if !strings.Contains(table.String(), "| "+c.ID+" | "+c.Name+" |") {
			t.Errorf("table has no row for %s", c.ID)
		}
	}
	if err := rep.WriteJSON(&js); err != nil {
		t.Fatal(err)
	}
	var back bench.Report
	if err := json.Unmarshal(js.Bytes(), &back); err != nil {
		t.Fatal(err)
	}
	if len(back.Cases) != len(rep.Cases) || back.Cases[0] != rep.Cases[0] {
		t.Errorf("JSON round trip lost cases: %d of %d", len(back.Cases), len(rep.Cases))
	}
}
