package functions

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fireonce/fireonce/shared/triggeronce"
	"github.com/fireonce/fireonce/shared/triggeronce/redisstore"
	"github.com/fireonce/fireonce/shared/triggeronce/redisstore/redistest"
)

// TestPushOnRedisStore: with FIREONCE_STORE=redis the push keeps its marker
// in Redis (none in Firestore), concurrent duplicates still push each device
// once, and the counters keep theirs in Firestore next to the counter.
func TestPushOnRedisStore(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t, nil)
	h := newHarness(t, &harnessOptions{redisURL: "redis://" + srv.Addr + "/0"})
	h.seed(world{
		users:     map[string]string{"ada": "Ada"},
		followers: map[string][]string{"ada": {"f1", "f2"}},
		tokens:    map[string][]string{"f1": {"f1-phone"}, "f2": {"f2-phone", "f2-tablet"}},
	})
	e := h.created("ada", "p1", "hello")

	var wg sync.WaitGroup
	errs := make([]error, 5)
	for i := range errs {
		wg.Go(func() { errs[i] = h.svc.Handler(push)(context.Background(), e) })
	}
	wg.Wait()
	executed := 0
	for _, l := range h.logs.Take(t) {
		if l["outcome"] == string(triggeronce.OutcomeExecuted) {
			executed++
		}
	}
	if executed != 1 {
		t.Fatalf("%d executions of 5 concurrent deliveries, want 1 (errors %v)", executed, errs)
	}
	for _, err := range errs {
		if err != nil && !errors.Is(err, triggeronce.ErrInProgress) {
			t.Fatalf("unexpected error: %v", err)
		}
	}
	expectPushes(t, h.fcm, each([]string{"f1-phone", "f2-phone", "f2-tablet"}, 1))

	key := triggeronce.Key{EventID: e.ID(), Function: push}
	state, err := srv.Client(t, nil).HGet(context.Background(), redisstore.New(nil, nil).RedisKey(key), "state").Result()
	if err != nil || state != "done" {
		t.Fatalf("Redis marker state = %q, %v; want done", state, err)
	}
	if got := h.marker(e.ID(), push); got != "" {
		t.Fatalf("a Firestore marker %q exists for the push on the Redis store", got)
	}

	if err, _ := h.invoke(context.Background(), "incrementPostCount", e); err != nil {
		t.Fatal(err)
	}
	if got := h.marker(e.ID(), "incrementPostCount"); got != "done" {
		t.Fatalf("counter marker in Firestore = %q, want done", got)
	}
}

// TestPushRedisDown: Redis unreachable at claim time means nothing runs,
// an ERROR line says so and the error goes back for the platform to retry;
// once Redis is back, the retry pushes each device once.
func TestPushRedisDown(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t, nil)
	h := newHarness(t, &harnessOptions{redisURL: "redis://" + srv.Addr + "/0"})
	h.seed(world{
		users:     map[string]string{"ada": "Ada"},
		followers: map[string][]string{"ada": {"f1"}},
		tokens:    map[string][]string{"f1": {"f1-phone"}},
	})
	e := h.created("ada", "p1", "hello")

	srv.Kill(t)
	err, line := h.invoke(context.Background(), push, e)
	if err == nil {
		t.Fatal("no error with Redis down: the platform would not retry")
	}
	expectLine(t, line, triggeronce.OutcomeFailed, "ERROR", 0, 0)
	if msg := fmt.Sprint(line["error"]); !strings.Contains(msg, "redisstore: claim") {
		t.Fatalf("the ERROR line does not say the Redis claim failed: %q", msg)
	}
	if n := len(h.fcm.Requests()); n != 0 {
		t.Fatalf("%d pushes attempted with Redis down (fail closed means none)", n)
	}

	srv.Restart(t)
	waitFor(t, "Redis answers again", 30*time.Second, func() bool {
		return srv.Client(t, nil).Ping(context.Background()).Err() == nil
	})
	var retryErr error
	waitFor(t, "the retry runs once the client reconnects", 30*time.Second, func() bool {
		retryErr, line = h.invoke(context.Background(), push, e)
		return retryErr == nil
	})
	expectLine(t, line, triggeronce.OutcomeExecuted, "INFO", 1, 0)
	expectPushes(t, h.fcm, each([]string{"f1-phone"}, 1))
}
