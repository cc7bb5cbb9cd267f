package bridge_test

import (
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	cloudevents "github.com/cloudevents/sdk-go/v2"

	"github.com/fireonce/fireonce/shared/bridge"
	"github.com/fireonce/fireonce/shared/logtest"
)

// fixtureProject is the project the fixtures were captured with.
const fixtureProject = "demo-capture"

// newBridge serves a Bridge for fixtureProject through httptest and returns
// it with its base URL; logs go to t's output and to the returned buffer.
func newBridge(t *testing.T, functionsURL string, opts *bridge.Options) (*bridge.Bridge, string, *logtest.Buffer) {
	t.Helper()
	logs := &logtest.Buffer{}
	o := bridge.Options{}
	if opts != nil {
		o = *opts
	}
	o.Logger = slog.New(slog.NewTextHandler(multiWriter{t.Output(), logs}, nil))
	b, err := bridge.New(fixtureProject, functionsURL, table, &o)
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(b.Handler())
	t.Cleanup(func() {
		b.Close()
		ts.Close()
	})
	return b, ts.URL, logs
}

type multiWriter [2]interface{ Write([]byte) (int, error) }

func (m multiWriter) Write(p []byte) (int, error) {
	m[0].Write(p)
	return m[1].Write(p)
}

func TestForwardsCapturedDelivery(t *testing.T) {
	tests := []struct {
		trigger, ceType string
		wantValue       bool // created: value only; deleted: old value only
	}{
		{"sendPostNotification", created, true},
		{"decrementPostCount", deleted, false},
	}
	for _, tt := range tests {
		t.Run(tt.trigger, func(t *testing.T) {
			fn := newFunctions(t, tt.trigger)
			b, base, _ := newBridge(t, fn.serve(), &bridge.Options{Duplicates: 1})
			fx := loadFixture(t, tt.trigger)
			if code := post(t, fx.request(t, base, nil)); code != http.StatusOK {
				t.Fatalf("bridge answered the emulator %d, want 200", code)
			}
			idle(t, b)
			got := fn.received()
			if len(got) != 1 {
				t.Fatalf("function received %d events, want 1", len(got))
			}
			e, data := got[0].Event, got[0].Data
			checks := []struct{ name, got, want string }{
				{"id", e.ID(), fx.Header.Get("Ce-Id")},
				{"type", e.Type(), tt.ceType},
				{"source", e.Source(), "//firestore.googleapis.com/projects/demo-capture/databases/(default)"},
				{"subject", e.Subject(), "documents/users/u1/posts/p1"},
				{"datacontenttype", e.DataContentType(), "application/protobuf"},
				{"document", ext(e, "document"), "users/u1/posts/p1"},
				{"database", ext(e, "database"), "(default)"},
				{"namespace", ext(e, "namespace"), "(default)"},
				{"project", ext(e, "project"), fixtureProject},
				{"location", ext(e, "location"), "us-central1"},
			}
			for _, c := range checks {
				if c.got != c.want {
					t.Errorf("%s = %q, want %q", c.name, c.got, c.want)
				}
			}
			doc := data.GetOldValue()
			if tt.wantValue {
				doc = data.GetValue()
			}
			if (data.GetValue() != nil) != tt.wantValue || (data.GetOldValue() != nil) == tt.wantValue {
				t.Errorf("value set %v, old value set %v", data.GetValue() != nil, data.GetOldValue() != nil)
			}
			if !strings.HasSuffix(doc.GetName(), "/documents/users/u1/posts/p1") ||
				doc.GetFields()["title"].GetStringValue() != "Hello" {
				t.Errorf("document = %v", doc)
			}
		})
	}

	// Why the bridge exists: sdk-go refuses the emulator's delivery as sent
	// (500: ce-datacontenttype is not an allowed extension name).
	t.Run("unrepaired delivery is refused by sdk-go", func(t *testing.T) {
		fn := newFunctions(t, "sendPostNotification")
		fx := loadFixture(t, "sendPostNotification")
		req := fx.request(t, fn.serve(), nil)
		req.URL.Path = "/sendPostNotification"
		if code := post(t, req); code/100 == 2 || len(fn.received()) > 0 {
			t.Errorf("sdk-go accepted the raw emulator delivery (%d); the repair may be unnecessary now", code)
		}
	})
}

func ext(e cloudevents.Event, name string) string {
	v, _ := e.Extensions()[name].(string)
	return v
}

func TestDuplicatesAndRedelivery(t *testing.T) {
	const n = 3
	fn := newFunctions(t, "incrementPostCount")
	// Hold every delivery until all n copies have arrived: they can only all
	// arrive if they are sent concurrently.
	var arrived sync.WaitGroup
	arrived.Add(n)
	allIn := make(chan struct{})
	go func() { arrived.Wait(); close(allIn) }()
	var once sync.Map
	fn.before = func(_ string, r *http.Request) int {
		if _, seen := once.LoadOrStore(r, true); !seen {
			arrived.Done()
		}
		select {
		case <-allIn:
		case <-time.After(20 * time.Second):
			t.Errorf("not all %d copies arrived concurrently", n)
		}
		return 0
	}
	b, base, _ := newBridge(t, fn.serve(), &bridge.Options{Duplicates: n})
	fx := loadFixture(t, "sendPostNotification")
	req := fx.request(t, base, nil)
	req.URL.Path = strings.Replace(req.URL.Path, "sendPostNotification", "incrementPostCount", 1)
	if code := post(t, req); code != http.StatusOK {
		t.Fatalf("status %d", code)
	}
	idle(t, b)
	got := fn.received()
	if len(got) != n {
		t.Fatalf("received %d deliveries, want %d", len(got), n)
	}
	for _, r := range got {
		if r.Event.ID() != fx.Header.Get("Ce-Id") {
			t.Errorf("ce-id %q, want %q", r.Event.ID(), fx.Header.Get("Ce-Id"))
		}
	}

	t.Run("redeliver after", func(t *testing.T) {
		fn := newFunctions(t, "sendPostNotification")
		b, base, _ := newBridge(t, fn.serve(), &bridge.Options{Duplicates: 1, RedeliverAfter: 50 * time.Millisecond})
		if code := post(t, loadFixture(t, "sendPostNotification").request(t, base, nil)); code != http.StatusOK {
			t.Fatalf("status %d", code)
		}
		idle(t, b) // covers the pending redelivery
		got := fn.received()
		if len(got) != 2 || got[0].Event.ID() != got[1].Event.ID() {
			t.Fatalf("received %d deliveries, want 2 with one ce-id", len(got))
		}
		if s := b.Stats(); s.Events != 1 || s.Deliveries != 2 || s.Delivered != 2 || s.ByStatus[200] != 2 {
			t.Errorf("stats %+v", s)
		}
	})
}

func TestRejectsBadRequests(t *testing.T) {
	fx := loadFixture(t, "sendPostNotification")
	tests := []struct {
		name string
		edit func(*http.Request)
		want int
		log  string
	}{
		{"unknown trigger", func(r *http.Request) {
			r.URL.Path = "/functions/projects/demo-capture/triggers/noSuchFunction"
		}, http.StatusNotFound, "noSuchFunction"},
		{"other project", func(r *http.Request) {
			r.URL.Path = "/functions/projects/demo-other/triggers/sendPostNotification"
		}, http.StatusNotFound, "unknown trigger"},
		{"not the delivery endpoint", func(r *http.Request) { r.URL.Path = "/elsewhere" },
			http.StatusNotFound, "no such endpoint"},
		{"body not base64 protobuf", func(r *http.Request) { setBody(r, "%%% not base64 %%%") },
			http.StatusBadRequest, "neither base64"},
		{"base64 of something else", func(r *http.Request) { setBody(r, "/////w==") },
			http.StatusBadRequest, "neither base64"},
		{"empty body", func(r *http.Request) { setBody(r, "") }, http.StatusBadRequest, "empty body"},
		{"no ce-id", func(r *http.Request) { r.Header.Del("Ce-Id") }, http.StatusBadRequest, "ce-id"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fn := newFunctions(t, "sendPostNotification")
			b, base, logs := newBridge(t, fn.serve(), nil)
			if code := post(t, fx.request(t, base, tt.edit)); code != tt.want {
				t.Errorf("status %d, want %d", code, tt.want)
			}
			idle(t, b)
			if n := len(fn.received()); n != 0 {
				t.Errorf("%d deliveries for a rejected request", n)
			}
			if s := b.Stats(); s.Rejected != 1 || s.Events != 0 {
				t.Errorf("stats %+v", s)
			}
			if !strings.Contains(logs.String(), tt.log) {
				t.Errorf("log lacks %q:\n%s", tt.log, logs.String())
			}
		})
	}
}

func setBody(r *http.Request, s string) {
	r.Body = io.NopCloser(strings.NewReader(s))
	r.ContentLength = int64(len(s))
}

func TestFunctionsServerDown(t *testing.T) {
	// An address nothing listens on, taken again later by the server.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()

	t.Run("without retry: logged, given up, no crash", func(t *testing.T) {
		b, base, logs := newBridge(t, "http://"+addr, nil)
		if code := post(t, loadFixture(t, "sendPostNotification").request(t, base, nil)); code != http.StatusOK {
			t.Fatalf("status %d", code)
		}
		idle(t, b)
		s := b.Stats()
		if s.Deliveries != bridge.DefaultDuplicates || s.GaveUp != bridge.DefaultDuplicates || s.ByStatus[0] != bridge.DefaultDuplicates {
			t.Errorf("stats %+v", s)
		}
		if !strings.Contains(logs.String(), "giving up") || !strings.Contains(logs.String(), "status=0") {
			t.Errorf("log lacks the failed deliveries:\n%s", logs.String())
		}
	})

	t.Run("with retry: delivered once the server is up", func(t *testing.T) {
		fn := newFunctions(t, "sendPostNotification")
		b, base, logs := newBridge(t, "http://"+addr, &bridge.Options{
			Duplicates: 1, Retry: true, MaxAttempts: 1000,
			RetryBackoff: 10 * time.Millisecond, MaxRetryBackoff: 50 * time.Millisecond,
		})
		if code := post(t, loadFixture(t, "sendPostNotification").request(t, base, nil)); code != http.StatusOK {
			t.Fatalf("status %d", code)
		}
		waitFor(t, "two failed attempts", 20*time.Second, func() bool { return b.Stats().Failures >= 2 })
		l, err := net.Listen("tcp", addr)
		if err != nil {
			t.Fatalf("listen again on %s: %v", addr, err)
		}
		srv := &http.Server{Handler: fn.mux}
		go srv.Serve(l)
		t.Cleanup(func() { srv.Close() })
		idle(t, b)
		if n := len(fn.received()); n != 1 {
			t.Fatalf("received %d, want 1", n)
		}
		s := b.Stats()
		if s.Delivered != 1 || s.GaveUp != 0 || s.Retries < 2 || s.Retries != s.Deliveries-1 {
			t.Errorf("stats %+v", s)
		}
		if !strings.Contains(logs.String(), "will retry") {
			t.Errorf("log lacks the retries:\n%s", logs.String())
		}
	})

	t.Run("with retry: a 500 from the function is retried", func(t *testing.T) {
		fn := newFunctions(t, "sendPostNotification")
		var mu sync.Mutex
		calls := 0
		fn.before = func(string, *http.Request) int {
			mu.Lock()
			defer mu.Unlock()
			if calls++; calls <= 2 {
				return http.StatusInternalServerError
			}
			return 0
		}
		b, base, _ := newBridge(t, fn.serve(), &bridge.Options{
			Duplicates: 1, Retry: true, RetryBackoff: time.Millisecond,
		})
		if code := post(t, loadFixture(t, "sendPostNotification").request(t, base, nil)); code != http.StatusOK {
			t.Fatalf("status %d", code)
		}
		idle(t, b)
		s := b.Stats()
		if len(fn.received()) != 1 || s.ByStatus[500] != 2 || s.ByStatus[200] != 1 || s.Deliveries != 3 {
			t.Errorf("received %d, stats %+v", len(fn.received()), s)
		}
	})
}

func TestCloseStopsPendingRedeliveries(t *testing.T) {
	fn := newFunctions(t, "sendPostNotification")
	b, base, _ := newBridge(t, fn.serve(), &bridge.Options{Duplicates: 1, RedeliverAfter: time.Hour})
	fx := loadFixture(t, "sendPostNotification")
	if code := post(t, fx.request(t, base, nil)); code != http.StatusOK {
		t.Fatalf("status %d", code)
	}
	waitFor(t, "the first delivery", 20*time.Second, func() bool { return len(fn.received()) == 1 })
	// Close returns only if it cancels the hour-long redelivery.
	if err := b.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	idle(t, b)
	if code := post(t, fx.request(t, base, nil)); code != http.StatusServiceUnavailable {
		t.Errorf("after Close: status %d, want 503", code)
	}
	if n := len(fn.received()); n != 1 {
		t.Errorf("received %d, want 1", n)
	}
}

func TestNewValidatesTable(t *testing.T) {
	tests := []struct {
		name     string
		triggers []bridge.Trigger
	}{
		{"missing name", []bridge.Trigger{{EventType: created, DocumentPattern: pattern}}},
		{"missing pattern", []bridge.Trigger{{Name: "f", EventType: created}}},
		{"duplicate name", []bridge.Trigger{
			{Name: "f", EventType: created, DocumentPattern: pattern},
			{Name: "f", EventType: deleted, DocumentPattern: pattern},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := bridge.New("demo-x", "http://127.0.0.1:1", tt.triggers, nil); err == nil {
				t.Error("New accepted an invalid table")
			}
		})
	}
}
