package functions

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/fireonce/fireonce/shared/fcmemulator"
	"github.com/fireonce/fireonce/shared/triggeronce"
)

const push = "sendPostNotification"

func TestSendPostNotificationOnePushPerDevice(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil)
	// f1 and f2 share a device (one phone, two accounts); f4 follows but has
	// no device; outsider has devices but does not follow.
	h.seed(world{
		users:     map[string]string{"ada": "Ada Lovelace", "f1": "F1", "f2": "F2", "f3": "F3", "f4": "F4"},
		followers: map[string][]string{"ada": {"f1", "f2", "f3", "f4"}},
		tokens: map[string][]string{
			"f1":       {"f1-phone", "f1-tablet", "shared"},
			"f2":       {"f2-phone", "shared"},
			"f3":       {"f3-phone"},
			"outsider": {"outsider-phone"},
			"ada":      {"ada-phone"},
		},
	})
	// 120 characters, many of them multibyte: the body is the first 100.
	title := strings.Repeat("Ünïcödé 🚀 ", 12)
	if n := utf8.RuneCountInString(title); n != 120 {
		t.Fatalf("title has %d runes", n)
	}
	wantBody := string([]rune(title)[:100])

	e := h.created("ada", "p1", title)
	err, line := h.invoke(context.Background(), push, e)
	if err != nil {
		t.Fatal(err)
	}
	devices := []string{"f1-phone", "f1-tablet", "shared", "f2-phone", "f3-phone"}
	expectLine(t, line, triggeronce.OutcomeExecuted, "INFO", len(devices), 0)
	if line["document"] != "users/ada/posts/p1" {
		t.Errorf("document = %v", line["document"])
	}
	expectPushes(t, h.fcm, each(devices, 1))
	for _, m := range h.fcm.Messages() {
		if m.Title != "New post from Ada Lovelace" {
			t.Errorf("title %q", m.Title)
		}
		if m.Body != wantBody || !utf8.ValidString(m.Body) {
			t.Errorf("body %q, want %q", m.Body, wantBody)
		}
		if len(m.Data) != 2 || m.Data["userID"] != "ada" || m.Data["postID"] != "p1" {
			t.Errorf("data %v, want userID ada and postID p1", m.Data)
		}
		if m.Project != h.env.ProjectID {
			t.Errorf("sent to project %q", m.Project)
		}
	}
	if got := h.marker(e.ID(), push); got != "done" {
		t.Fatalf("marker state %q, want done", got)
	}

	// A redelivery of the same event sends nothing.
	before := len(h.fcm.Requests())
	err, line = h.invoke(context.Background(), push, e)
	if err != nil {
		t.Fatal(err)
	}
	expectLine(t, line, triggeronce.OutcomeDuplicate, "INFO", 0, 0)
	if n := len(h.fcm.Requests()); n != before {
		t.Fatalf("duplicate sent %d requests", n-before)
	}
}

func TestSendPostNotificationShortTitle(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil)
	// No displayName: a neutral name rather than "New post from ".
	h.seed(world{
		followers: map[string][]string{"anon": {"f1"}},
		tokens:    map[string][]string{"f1": {"f1-phone"}},
	})
	title := strings.Repeat("é", 100) // exactly the limit: kept whole
	err, _ := h.invoke(context.Background(), push, h.created("anon", "p1", title))
	if err != nil {
		t.Fatal(err)
	}
	msgs := h.fcm.Messages()
	if len(msgs) != 1 || msgs[0].Body != title || msgs[0].Title != "New post from someone you follow" {
		t.Fatalf("messages %+v", msgs)
	}
}

func TestSendPostNotificationPrunesDeadTokens(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil)
	h.fcm.SetUnregistered("f1-old", "dead-shared")
	h.fcm.SetInvalid("f2-garbage")
	h.seed(world{
		users:     map[string]string{"ada": "Ada"},
		followers: map[string][]string{"ada": {"f1", "f2"}},
		tokens: map[string][]string{
			"f1": {"f1-live", "f1-old", "dead-shared"},
			"f2": {"f2-live", "f2-garbage", "dead-shared"},
		},
	})
	e := h.created("ada", "p1", "hello")
	err, line := h.invoke(context.Background(), push, e)
	if err != nil {
		t.Fatal(err)
	}
	// Four token documents die: f1-old, f2-garbage and dead-shared under
	// both followers.
	expectLine(t, line, triggeronce.OutcomeExecuted, "INFO", 2, 4)
	expectPushes(t, h.fcm, each([]string{"f1-live", "f2-live"}, 1))
	for _, tc := range []struct {
		user, token string
		want        bool
	}{
		{"f1", "f1-live", true}, {"f2", "f2-live", true},
		{"f1", "f1-old", false}, {"f2", "f2-garbage", false},
		{"f1", "dead-shared", false}, {"f2", "dead-shared", false},
	} {
		if got := h.tokenExists(tc.user, tc.token); got != tc.want {
			t.Errorf("users/%s/fcmTokens/%s exists = %v, want %v", tc.user, tc.token, got, tc.want)
		}
	}
	if got := h.marker(e.ID(), push); got != "done" {
		t.Fatalf("marker state %q, want done", got)
	}
}

func TestSendPostNotificationNothingToSend(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		w    world
	}{
		{"no followers", world{users: map[string]string{"ada": "Ada"}, tokens: map[string][]string{"ada": {"ada-phone"}}}},
		{"followers without devices", world{users: map[string]string{"ada": "Ada"}, followers: map[string][]string{"ada": {"f1", "f2"}}}},
		{"no author document", world{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			h := newHarness(t, nil)
			h.seed(tt.w)
			e := h.created("ada", "p1", "hello")
			err, line := h.invoke(context.Background(), push, e)
			if err != nil {
				t.Fatal(err)
			}
			expectLine(t, line, triggeronce.OutcomeExecuted, "INFO", 0, 0)
			if n := len(h.fcm.Requests()); n != 0 {
				t.Fatalf("%d FCM requests, want none", n)
			}
			if n := len(h.multicasts.Sizes()); n != 0 {
				t.Fatalf("%d multicasts, want none", n)
			}
			if got := h.marker(e.ID(), push); got != "done" {
				t.Fatalf("marker state %q, want done", got)
			}
		})
	}
}

// TestSendPostNotificationPagesAndBatches has more followers than one page
// (pageSize) and more devices than one multicast (multicastLimit).
func TestSendPostNotificationPagesAndBatches(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil)
	const followers = pageSize + 20
	w := world{users: map[string]string{"star": "Star"}, followers: map[string][]string{}, tokens: map[string][]string{}}
	var devices []string
	for i := range followers {
		f := fmt.Sprintf("f%04d", i)
		w.followers["star"] = append(w.followers["star"], f)
		for _, d := range []string{"a", "b"} {
			tok := f + "-" + d
			w.tokens[f] = append(w.tokens[f], tok)
			devices = append(devices, tok)
		}
	}
	if len(devices) <= multicastLimit {
		t.Fatalf("only %d devices", len(devices))
	}
	h.seed(w)

	err, line := h.invoke(context.Background(), push, h.created("star", "p1", "hi"))
	if err != nil {
		t.Fatal(err)
	}
	expectLine(t, line, triggeronce.OutcomeExecuted, "INFO", len(devices), 0)
	expectPushes(t, h.fcm, each(devices, 1))
	if n := len(h.fcm.Requests()); n != len(devices) {
		t.Fatalf("%d FCM requests for %d devices", n, len(devices))
	}
	sizes := h.multicasts.Sizes()
	total := 0
	for _, s := range sizes {
		if s > multicastLimit || s == 0 {
			t.Fatalf("multicast sizes %v: want each in 1..%d", sizes, multicastLimit)
		}
		total += s
	}
	if total != len(devices) || len(sizes) < 2 {
		t.Fatalf("multicast sizes %v for %d devices", sizes, len(devices))
	}
}

// deadlineCtx is a context whose deadline passes when the test says so: the
// function's timeout arriving while a push is stalled.
type deadlineCtx struct {
	context.Context
	done chan struct{}
	once sync.Once
}

func newDeadlineCtx() *deadlineCtx {
	return &deadlineCtx{Context: context.Background(), done: make(chan struct{})}
}

func (c *deadlineCtx) Done() <-chan struct{} { return c.done }
func (c *deadlineCtx) Err() error {
	select {
	case <-c.done:
		return context.DeadlineExceeded
	default:
		return nil
	}
}
func (c *deadlineCtx) expire() { c.once.Do(func() { close(c.done) }) }

// interceptToken wraps the FCM stand-in: the first request for token is
// handed to fn instead.
func interceptToken(token string, fn func(w http.ResponseWriter, r *http.Request)) func(http.Handler) http.Handler {
	var once sync.Once
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			body, err := io.ReadAll(r.Body)
			if err != nil {
				http.Error(w, err.Error(), http.StatusBadRequest)
				return
			}
			r.Body = io.NopCloser(bytes.NewReader(body))
			hit := false
			if bytes.Contains(body, []byte(fmt.Sprintf("%q:%q", "token", token))) {
				once.Do(func() { hit = true })
			}
			if hit {
				fn(w, r)
				return
			}
			next.ServeHTTP(w, r)
		})
	}
}

// TestSendPostNotificationTransientFailure: some devices fail transiently.
// The invocation returns an error and releases its claim; the retry sends
// only to the devices the first attempt missed, so each device gets exactly
// one push in total.
func TestSendPostNotificationTransientFailure(t *testing.T) {
	t.Parallel()
	const failing1, failing2 = "f1-tablet", "f3-phone"
	tests := []struct {
		name string
		// setup injects the failure; it returns the context the first
		// attempt runs with.
		setup func(t *testing.T, h *harness) context.Context
		// opts wraps the stand-in.
		opts func(stalled chan<- struct{}) *harnessOptions
		// firstRequests is how many requests the failing devices' first
		// attempt should make each (0: unchecked).
		firstRequests int
		// inFlightMayBeLost: answers still on their way when the deadline
		// passes are lost to the function, which cannot tell those devices
		// were reached (no FCM request is idempotent): the retry may push
		// them again. Devices the attempt saw answered never are.
		inFlightMayBeLost bool
	}{
		{
			name: "503 burst outlasting the SDK's retries",
			setup: func(t *testing.T, h *harness) context.Context {
				// The client tries 5 times (1 + 4 retries) with backoff.
				h.fcm.FailNext(5, fcmemulator.Unavailable, failing1, failing2)
				return context.Background()
			},
			firstRequests: 5,
		},
		{
			name: "500, which the SDK does not retry",
			setup: func(t *testing.T, h *harness) context.Context {
				h.fcm.FailNext(1, fcmemulator.Internal, failing1, failing2)
				return context.Background()
			},
			firstRequests: 1,
		},
		{
			// A gateway answers 502 with an HTML page: no FCM error detail,
			// so only the platform error code says "transient".
			name: "502 from a gateway without FCM details",
			opts: func(chan<- struct{}) *harnessOptions {
				return &harnessOptions{wrapFCM: func(next http.Handler) http.Handler {
					bad := func(w http.ResponseWriter, r *http.Request) {
						w.Header().Set("Content-Type", "text/html")
						w.WriteHeader(http.StatusBadGateway)
						io.WriteString(w, "<html><body>502 Bad Gateway</body></html>")
					}
					return interceptToken(failing1, bad)(interceptToken(failing2, bad)(next))
				}}
			},
			setup: func(t *testing.T, h *harness) context.Context { return context.Background() },
		},
		{
			// The function's deadline passes while a push hangs.
			name: "deadline while a push hangs",
			opts: func(stalled chan<- struct{}) *harnessOptions {
				return &harnessOptions{wrapFCM: interceptToken(failing1, func(w http.ResponseWriter, r *http.Request) {
					close(stalled)
					<-r.Context().Done()
				})}
			},
			setup: func(t *testing.T, h *harness) context.Context {
				h.fcm.FailNext(1, fcmemulator.Internal, failing2)
				return nil // set by the test
			},
			inFlightMayBeLost: true,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			stalled := make(chan struct{})
			var opts *harnessOptions
			if tt.opts != nil {
				opts = tt.opts(stalled)
			}
			h := newHarness(t, opts)
			h.seed(world{
				users:     map[string]string{"ada": "Ada"},
				followers: map[string][]string{"ada": {"f1", "f2", "f3"}},
				tokens:    map[string][]string{"f1": {"f1-phone", "f1-tablet"}, "f2": {"f2-phone"}, "f3": {"f3-phone"}},
			})
			healthy := []string{"f1-phone", "f2-phone"}
			all := append([]string{failing1, failing2}, healthy...)
			ctx := tt.setup(t, h)
			if ctx == nil {
				// Expire the deadline once the hanging push is in flight
				// and every other device has had its answer.
				dctx := newDeadlineCtx()
				ctx = dctx
				go func() {
					select {
					case <-stalled:
					case <-time.After(30 * time.Second):
					}
					deadline := time.Now().Add(30 * time.Second)
					for len(h.fcm.Requests()) < len(all)-1 && time.Now().Before(deadline) {
						time.Sleep(10 * time.Millisecond)
					}
					dctx.expire()
				}()
			}

			e := h.created("ada", "p1", "hello")
			err, line := h.invoke(ctx, push, e)
			if err == nil {
				t.Fatalf("first attempt returned nil; log %v", line)
			}
			firstSent := len(healthy)
			if tt.inFlightMayBeLost {
				v, _ := line["sent"].(float64) // checked by expectLine below
				firstSent = int(v)
			}
			expectLine(t, line, triggeronce.OutcomeReleased, "WARNING", firstSent, 0)
			if got := h.marker(e.ID(), push); got != "" {
				t.Fatalf("claim not released: marker state %q", got)
			}
			if !tt.inFlightMayBeLost {
				expectPushes(t, h.fcm, each(healthy, 1))
			}
			if tt.firstRequests > 0 {
				for _, tok := range []string{failing1, failing2} {
					n := 0
					for _, m := range h.fcm.Requests() {
						if m.Token == tok {
							n++
						}
					}
					if n != tt.firstRequests {
						t.Errorf("%s: %d requests in the first attempt, want %d", tok, n, tt.firstRequests)
					}
				}
			}

			// The platform retries: only the missed devices get a push.
			err, line = h.invoke(context.Background(), push, e)
			if err != nil {
				t.Fatalf("retry: %v", err)
			}
			if tt.inFlightMayBeLost && firstSent < len(healthy) {
				// Some healthy answers were lost: those devices may get a
				// second push; the failing ones still get exactly one.
				t.Logf("the deadline cut %d healthy answers short", len(healthy)-firstSent)
				expectLine(t, line, triggeronce.OutcomeExecuted, "INFO", len(all)-firstSent, 0)
				for _, tok := range all {
					n := h.fcm.PushesTo(tok)
					if n < 1 || n > 2 || ((tok == failing1 || tok == failing2) && n != 1) {
						t.Fatalf("%s got %d pushes", tok, n)
					}
				}
				return
			}
			expectLine(t, line, triggeronce.OutcomeExecuted, "INFO", 2, 0)
			expectPushes(t, h.fcm, each(all, 1))
			if got := h.marker(e.ID(), push); got != "done" {
				t.Fatalf("marker state %q after the retry, want done", got)
			}

			// And a late duplicate sends nothing.
			err, line = h.invoke(context.Background(), push, e)
			if err != nil {
				t.Fatal(err)
			}
			expectLine(t, line, triggeronce.OutcomeDuplicate, "INFO", 0, 0)
			expectPushes(t, h.fcm, each(all, 1))
		})
	}
}

// TestSendPostNotificationShortBurst: a 503 burst the SDK's own retries
// absorb never reaches the handler.
func TestSendPostNotificationShortBurst(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil)
	h.seed(world{
		users:     map[string]string{"ada": "Ada"},
		followers: map[string][]string{"ada": {"f1"}},
		tokens:    map[string][]string{"f1": {"f1-phone", "f1-tablet"}},
	})
	h.fcm.FailNext(1, fcmemulator.Unavailable, "f1-tablet")
	err, line := h.invoke(context.Background(), push, h.created("ada", "p1", "hello"))
	if err != nil {
		t.Fatal(err)
	}
	expectLine(t, line, triggeronce.OutcomeExecuted, "INFO", 2, 0)
	expectPushes(t, h.fcm, each([]string{"f1-phone", "f1-tablet"}, 1))
}

// TestSendPostNotificationConcurrentDuplicates: duplicates delivered at once
// push each device once; the ones that find a live lease ask for a retry.
func TestSendPostNotificationConcurrentDuplicates(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil)
	h.seed(world{
		users:     map[string]string{"ada": "Ada"},
		followers: map[string][]string{"ada": {"f1", "f2"}},
		tokens:    map[string][]string{"f1": {"f1-phone"}, "f2": {"f2-phone", "f2-tablet"}},
	})
	e := h.created("ada", "p1", "hello")
	const copies = 5
	errs := make([]error, copies)
	var wg sync.WaitGroup
	for i := range copies {
		wg.Go(func() { errs[i] = h.svc.Handler(push)(context.Background(), e) })
	}
	wg.Wait()
	lines := h.logs.Take(t)
	if len(lines) != copies {
		t.Fatalf("%d log lines for %d deliveries", len(lines), copies)
	}
	outcomes := map[string]int{}
	for _, l := range lines {
		outcomes[l["outcome"].(string)]++
	}
	if outcomes["executed"] != 1 || outcomes["executed"]+outcomes["duplicate"]+outcomes["in_progress"] != copies {
		t.Fatalf("outcomes %v", outcomes)
	}
	nErr := 0
	for _, err := range errs {
		if err != nil {
			nErr++
		}
	}
	if nErr != outcomes["in_progress"] {
		t.Fatalf("%d errors for %d in_progress outcomes: %v", nErr, outcomes["in_progress"], errs)
	}
	expectPushes(t, h.fcm, each([]string{"f1-phone", "f2-phone", "f2-tablet"}, 1))
	if got := h.marker(e.ID(), push); got != "done" {
		t.Fatalf("marker state %q", got)
	}
}

// TestPushReceiptsRoundTrip: receipts saved by a failed attempt, over
// several documents, are all read back by the next attempt, together with
// the author's name.
func TestPushReceiptsRoundTrip(t *testing.T) {
	h := newHarness(t, nil)
	h.seed(world{users: map[string]string{"ada": "Ada"}})
	old := receiptsPerDoc
	receiptsPerDoc = 10
	t.Cleanup(func() { receiptsPerDoc = old })

	key := triggeronce.Key{EventID: newEventID(), Function: push}
	first := &pusher{s: h.svc, d: h.deps, key: key, receipts: map[receipt]bool{}}
	for i := range 25 {
		first.reached = append(first.reached, fmt.Sprintf("token-%d", i))
	}
	if err := first.saveReceipts(context.Background()); err != nil {
		t.Fatal(err)
	}
	retry := &pusher{s: h.svc, d: h.deps, key: key}
	name, err := retry.loadAuthorAndReceipts(context.Background(), "ada")
	if err != nil {
		t.Fatal(err)
	}
	if name != "Ada" || len(retry.receipts) != 25 {
		t.Fatalf("read name %q and %d receipts, want Ada and 25", name, len(retry.receipts))
	}
	for _, tok := range first.reached {
		if !retry.receipts[receiptOf(tok)] {
			t.Fatalf("no receipt for %s", tok)
		}
	}
	if retry.receipts[receiptOf("token-25")] {
		t.Fatal("a receipt for a device never reached")
	}
}
