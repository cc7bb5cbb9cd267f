package functions

import (
	"context"
	"errors"
	"log/slog"
	"math/rand/v2"
	"testing"

	"github.com/cloudevents/sdk-go/v2/event"
	fd "github.com/googleapis/google-cloudevents-go/cloud/firestoredata"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/fireonce/fireonce/shared/cloudlog"
	"github.com/fireonce/fireonce/shared/fcmemulator"
	"github.com/fireonce/fireonce/shared/firestoreevent/firestoreeventtest"
	"github.com/fireonce/fireonce/shared/firestoretest"
	"github.com/fireonce/fireonce/shared/logtest"
	"github.com/fireonce/fireonce/shared/triggeronce"
)

// TestMalformedEventsAreDropped: an event no retry can fix is logged at
// ERROR as rejected and dropped with a nil error, before anything is
// written: no marker, no counter, no push.
func TestMalformedEventsAreDropped(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil)
	h.seed(world{
		users:     map[string]string{"ada": "Ada"},
		counts:    map[string]int{"ada": 5},
		followers: map[string][]string{"ada": {"f1"}},
		tokens:    map[string][]string{"f1": {"f1-phone"}},
	})
	const doc = "users/ada/posts/p1"
	// typed returns a well-formed event of the type name listens to.
	typed := func(name string) firestoreeventtest.Change {
		r, _ := lookup(name)
		return h.change(r.EventType, doc, postFields("hello"))
	}
	random := make([]byte, 512)
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range random {
		random[i] = byte(rng.UintN(256))
	}
	validJSON, err := protojson.Marshal(&fd.DocumentEventData{Value: &fd.Document{Name: "projects/" + h.env.ProjectID + "/databases/(default)/documents/" + doc}})
	if err != nil {
		t.Fatal(err)
	}

	tests := []struct {
		name      string
		functions []string // default: all three
		event     func(t *testing.T, name string) event.Event
	}{
		{name: "random bytes as protobuf", event: func(t *testing.T, name string) event.Event {
			e := mustEvent(t, typed(name))
			e.SetData("application/protobuf", random)
			return e
		}},
		{name: "empty data", event: func(t *testing.T, name string) event.Event {
			e := mustEvent(t, typed(name))
			e.SetData("application/protobuf", []byte{})
			return e
		}},
		{name: "JSON declared as protobuf", event: func(t *testing.T, name string) event.Event {
			e := mustEvent(t, typed(name))
			e.SetData("application/protobuf", validJSON)
			return e
		}},
		{name: "garbage JSON", event: func(t *testing.T, name string) event.Event {
			e := mustEvent(t, typed(name))
			e.SetData("application/json", []byte(`{"value": 12`))
			return e
		}},
		{name: "another database", event: func(t *testing.T, name string) event.Event {
			c := typed(name)
			c.Database = "other-db"
			return mustEvent(t, c)
		}},
		{name: "wrong type", event: func(t *testing.T, name string) event.Event {
			c := typed(name)
			if c.Type == EventCreated {
				c = h.change(EventDeleted, doc, postFields("x"))
			} else {
				c = h.change(EventCreated, doc, postFields("x"))
			}
			return mustEvent(t, c)
		}},
		{name: "updated event", event: func(t *testing.T, name string) event.Event {
			c := h.change("google.cloud.firestore.document.v1.updated", doc, postFields("x"))
			c.Before = postFields("y")
			return mustEvent(t, c)
		}},
		{name: "unknown type", event: func(t *testing.T, name string) event.Event {
			e := mustEvent(t, typed(name))
			e.SetType("com.example.something")
			return e
		}},
		{name: "comment, not a post", event: func(t *testing.T, name string) event.Event {
			c := typed(name)
			c.Document = "users/ada/comments/c1"
			return mustEvent(t, c)
		}},
		{name: "user document", event: func(t *testing.T, name string) event.Event {
			c := typed(name)
			c.Document = "users/ada"
			return mustEvent(t, c)
		}},
		{name: "below a post", event: func(t *testing.T, name string) event.Event {
			c := typed(name)
			c.Document = doc + "/likes/l1"
			return mustEvent(t, c)
		}},
		{name: "subject disagrees with the data", event: func(t *testing.T, name string) event.Event {
			e := mustEvent(t, typed(name))
			e.SetSubject("documents/users/bob/posts/p1")
			e.SetExtension("document", "users/bob/posts/p1")
			return e
		}},
		{name: "document extension disagrees with the subject", event: func(t *testing.T, name string) event.Event {
			e := mustEvent(t, typed(name))
			e.SetExtension("document", "users/bob/posts/p1")
			return e
		}},
		{name: "no document in the data", event: func(t *testing.T, name string) event.Event {
			c := typed(name)
			c.Before, c.After = nil, nil
			return mustEvent(t, c)
		}},
		{name: "no event ID", event: func(t *testing.T, name string) event.Event {
			e := mustEvent(t, typed(name))
			e.Context.(*event.EventContextV1).ID = "" // SetID refuses ""
			return e
		}},
		{name: "title not a string", functions: []string{push}, event: func(t *testing.T, name string) event.Event {
			return mustEvent(t, h.change(EventCreated, doc, map[string]any{"title": 42}))
		}},
	}
	for _, tt := range tests {
		names := tt.functions
		if names == nil {
			names = []string{push, increment, decrement}
		}
		for _, name := range names {
			t.Run(tt.name+"/"+name, func(t *testing.T) {
				e := tt.event(t, name)
				h.logs.Take(t)
				err := h.svc.Handler(name)(context.Background(), e)
				if err != nil {
					t.Fatalf("returned %v, want nil (no retry can fix it)", err)
				}
				lines := h.logs.Take(t)
				if len(lines) != 1 {
					t.Fatalf("%d log lines, want 1: %v", len(lines), lines)
				}
				l := lines[0]
				expectLine(t, l, outcomeRejected, "ERROR", 0, 0)
				if l["function"] != name || l["eventID"] != e.ID() || l["error"] == nil {
					t.Fatalf("log line %v", l)
				}
				if m := markers(t, h.env.Client); len(m) != 0 {
					t.Fatalf("a rejected event left %d markers, first %s", len(m), m[0].Ref.ID)
				}
			})
		}
	}
	if n, _ := postCount(t, h.env.Client, "ada"); n != 5 {
		t.Errorf("postCount %d, want 5 (unchanged)", n)
	}
	if n := len(h.fcm.Requests()); n != 0 {
		t.Errorf("%d FCM requests, want none", n)
	}
}

func TestLogLine(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil)
	h.seed(world{followers: map[string][]string{"ada": {"f1"}}, tokens: map[string][]string{"f1": {"f1-phone"}}})
	e := h.created("ada", "p1", "hello")
	// invoke checks there is exactly one line with every field.
	_, line := h.invoke(context.Background(), push, e)
	want := map[string]any{
		"severity": "INFO", "message": "sendPostNotification executed", "function": push,
		"eventID": e.ID(), "document": "users/ada/posts/p1", "outcome": "executed",
		"sent": float64(1), "pruned": float64(0),
	}
	for k, v := range want {
		if line[k] != v {
			t.Errorf("%s = %v (%T), want %v", k, line[k], line[k], v)
		}
	}
	if d, ok := line["durationMs"].(float64); !ok || d < 0 {
		t.Errorf("durationMs = %v", line["durationMs"])
	}
	if _, ok := line["error"]; ok {
		t.Errorf("error logged on success: %v", line)
	}
}

// TestMissingProjectAtInvocation: the registered service reads its
// configuration on the first delivery. Without a project ID that delivery
// fails with a clear ERROR line and an error, so the platform retries it; a
// later delivery, once the configuration is fixed, succeeds (the failure is
// not cached). Not parallel: it sets environment variables.
func TestMissingProjectAtInvocation(t *testing.T) {
	env := firestoretest.New(t)
	fcm := fcmemulator.New(nil)
	if err := fcm.Start("127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { fcm.Close() })
	for _, k := range []string{"GOOGLE_CLOUD_PROJECT", "GCLOUD_PROJECT", "FIREBASE_CONFIG", "FIREONCE_STORE", "REDIS_URL"} {
		t.Setenv(k, "")
	}
	t.Setenv("FCM_ENDPOINT", fcm.URL()+"/v1")

	s := newEnvService()
	logs := &logtest.Buffer{}
	s.logger = cloudlog.New(logs, slog.LevelInfo) // instead of stdout

	c := firestoreeventtest.Change{ID: newEventID(), Type: EventCreated, Project: env.ProjectID,
		Document: "users/ada/posts/p1", After: postFields("hello")}
	e := mustEvent(t, c)
	for _, name := range []string{increment, push} {
		err := s.Handler(name)(context.Background(), e)
		if !errors.Is(err, ErrNoProject) {
			t.Fatalf("%s: err = %v, want ErrNoProject", name, err)
		}
		lines := logs.Take(t)
		if len(lines) != 1 {
			t.Fatalf("%d log lines: %v", len(lines), lines)
		}
		expectLine(t, lines[0], triggeronce.OutcomeFailed, "ERROR", 0, 0)
		if lines[0]["error"] == nil || lines[0]["eventID"] != e.ID() {
			t.Fatalf("log line %v", lines[0])
		}
	}
	if m := markers(t, env.Client); len(m) != 0 {
		t.Fatalf("%d markers written without a configuration", len(m))
	}

	t.Setenv("GOOGLE_CLOUD_PROJECT", env.ProjectID)
	if err := s.Handler(increment)(context.Background(), e); err != nil {
		t.Fatalf("after configuring: %v", err)
	}
	if n, _ := postCount(t, env.Client, "ada"); n != 1 {
		t.Fatalf("postCount %d, want 1", n)
	}
	if d, err := s.deps(context.Background()); err == nil {
		t.Cleanup(func() { d.Firestore.Close() })
	}
	lines := logs.Take(t)
	if len(lines) != 1 || lines[0]["outcome"] != "executed" {
		t.Fatalf("log %v", lines)
	}
}
