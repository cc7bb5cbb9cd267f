package firestoreeventtest_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	cehttp "github.com/cloudevents/sdk-go/v2/protocol/http"

	"github.com/fireonce/fireonce/shared/firestoreevent"
	"github.com/fireonce/fireonce/shared/firestoreevent/firestoreeventtest"
)

var created = firestoreeventtest.Change{
	ID:       "ev-1",
	Type:     "google.cloud.firestore.document.v1.created",
	Project:  "demo-p",
	Document: "users/u1/posts/p1",
	After:    map[string]any{"title": "hi", "n": 3, "at": time.Unix(10, 0), "tags": []any{"a"}, "m": map[string]any{"x": nil}},
}

func TestEventDecodes(t *testing.T) {
	e, err := created.Event()
	if err != nil {
		t.Fatal(err)
	}
	ev, err := firestoreevent.Decode(e)
	if err != nil {
		t.Fatalf("Decode: %v", err)
	}
	if ev.ID != "ev-1" || ev.Kind != firestoreevent.Created || ev.Document != "users/u1/posts/p1" || ev.Before != nil {
		t.Fatalf("decoded %+v", ev)
	}
	if got := ev.After.Data()["title"]; got != "hi" {
		t.Fatalf("title = %v", got)
	}
}

func TestRequestIsBinaryMode(t *testing.T) {
	got := make(chan *firestoreevent.Event, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		e, err := cehttp.NewEventFromHTTPRequest(r)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		ev, err := firestoreevent.Decode(*e)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		got <- ev
	}))
	defer srv.Close()
	req, err := created.Request(context.Background(), srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("status %s", resp.Status)
	}
	if ev := <-got; ev.ID != "ev-1" || ev.Project != "demo-p" {
		t.Fatalf("received %+v", ev)
	}
}

func TestRandomIDIsFixedPerRequest(t *testing.T) {
	c := created
	c.ID = ""
	r1, _ := c.Request(context.Background(), "http://x")
	r2, _ := c.Request(context.Background(), "http://x")
	if id := r1.Header.Get("ce-id"); id == "" || id == r2.Header.Get("ce-id") {
		t.Fatalf("ids %q and %q: want distinct, non-empty", id, r2.Header.Get("ce-id"))
	}
}

func TestUnsupportedValue(t *testing.T) {
	if _, err := firestoreeventtest.Value(struct{}{}); err == nil {
		t.Fatal("no error for a struct value")
	}
}
