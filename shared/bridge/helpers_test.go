package bridge_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	cloudevents "github.com/cloudevents/sdk-go/v2"
	cehttp "github.com/cloudevents/sdk-go/v2/protocol/http"
	"github.com/googleapis/google-cloudevents-go/cloud/firestoredata"
	"google.golang.org/protobuf/proto"

	"github.com/fireonce/fireonce/shared/bridge"
)

const (
	created = "google.cloud.firestore.document.v1.created"
	deleted = "google.cloud.firestore.document.v1.deleted"
	pattern = "users/{userID}/posts/{postID}"
)

// table is a functions table like the one functions/ will hold.
var table = []bridge.Trigger{
	{Name: "sendPostNotification", EventType: created, DocumentPattern: pattern},
	{Name: "incrementPostCount", EventType: created, DocumentPattern: pattern},
	{Name: "decrementPostCount", EventType: deleted, DocumentPattern: pattern},
}

// fixture is a delivery recorded by internal/capture.
type fixture struct {
	Method string      `json:"method"`
	Path   string      `json:"path"`
	Header http.Header `json:"header"`
	Body   string      `json:"body"`
}

func loadFixture(t *testing.T, trigger string) fixture {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "delivery_"+trigger+".json"))
	if err != nil {
		t.Fatalf("fixture: %v (regenerate with go generate ./shared/bridge)", err)
	}
	var f fixture
	if err := json.Unmarshal(b, &f); err != nil {
		t.Fatalf("fixture %s: %v", trigger, err)
	}
	return f
}

// request rebuilds the recorded delivery against base, optionally edited.
func (f fixture) request(t *testing.T, base string, edit func(*http.Request)) *http.Request {
	t.Helper()
	req, err := http.NewRequest(f.Method, base+f.Path, strings.NewReader(f.Body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header = f.Header.Clone()
	req.Header.Del("Content-Length")
	if edit != nil {
		edit(req)
	}
	return req
}

// post sends req and returns the status code.
func post(t *testing.T, req *http.Request) int {
	t.Helper()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", req.Method, req.URL, err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// received is a CloudEvent as a function got it.
type received struct {
	Function string
	Event    cloudevents.Event
	Data     *firestoredata.DocumentEventData
}

// functions is a functions server: each function decodes binary-mode
// CloudEvents with sdk-go, as functions-framework-go does, and records them.
type functions struct {
	t   *testing.T
	mux *http.ServeMux

	mu     sync.Mutex
	events []received
	// before, when set, runs before an event is decoded; a non-zero status
	// is answered instead.
	before func(function string, r *http.Request) int
}

func newFunctions(t *testing.T, names ...string) *functions {
	f := &functions{t: t, mux: http.NewServeMux()}
	for _, name := range names {
		f.mux.Handle("/"+name, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			f.mu.Lock()
			before := f.before
			f.mu.Unlock()
			if before != nil {
				if code := before(name, r); code != 0 {
					w.WriteHeader(code)
					return
				}
			}
			// Decode as functions-framework-go does (sdk-go's binary-mode
			// reader), but inline: sdk-go's NewHTTPReceiveHandler hands
			// each request to a goroutine over a shared channel and can
			// strand a request when concurrent ones finish first
			// (cloudevents/sdk-go#1224, #1332), which hung this test.
			e, err := cehttp.NewEventFromHTTPRequest(r)
			if err != nil {
				http.Error(w, err.Error(), http.StatusBadRequest)
				return
			}
			var data firestoredata.DocumentEventData
			if err := (proto.UnmarshalOptions{DiscardUnknown: true}).Unmarshal(e.Data(), &data); err != nil {
				t.Errorf("%s: proto.Unmarshal: %v", name, err)
				http.Error(w, err.Error(), http.StatusInternalServerError)
				return
			}
			f.mu.Lock()
			f.events = append(f.events, received{Function: name, Event: *e, Data: &data})
			f.mu.Unlock()
		}))
	}
	return f
}

func (f *functions) serve() string {
	ts := httptest.NewServer(f.mux)
	f.t.Cleanup(ts.Close)
	return ts.URL
}

func (f *functions) received() []received {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]received(nil), f.events...)
}

// waitFor polls cond until it holds or the deadline passes.
func waitFor(t *testing.T, what string, limit time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", limit, what)
		}
		time.Sleep(10 * time.Millisecond) // polling interval, not a wait for an outcome
	}
}

func idle(t *testing.T, b *bridge.Bridge) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := b.Idle(ctx); err != nil {
		t.Fatalf("Idle: %v", err)
	}
}
