package functions

import (
	"context"
	"fmt"
	"testing"

	"github.com/fireonce/fireonce/shared/firestoreevent/firestoreeventtest"
	"github.com/fireonce/fireonce/shared/triggeronce"
)

const (
	increment = "incrementPostCount"
	decrement = "decrementPostCount"
)

func TestPostCounters(t *testing.T) {
	t.Parallel()
	type step struct {
		function  string
		created   bool   // a created event, else a deleted one
		post      string // the post; default: a new one for a create, an old uncounted one for a delete
		redeliver bool   // deliver the previous step's event again
		want      int64
	}
	tests := []struct {
		name    string
		initial map[string]any // users/ada before; nil: no document
		steps   []step
	}{
		{
			name:  "create on a missing user creates the document",
			steps: []step{{function: increment, created: true, want: 1}},
		},
		{
			name:    "create keeps the other fields",
			initial: map[string]any{"displayName": "Ada", postCountField: 41},
			steps:   []step{{function: increment, created: true, want: 42}},
		},
		{
			name:    "delete decrements",
			initial: map[string]any{"displayName": "Ada", postCountField: 2},
			steps:   []step{{function: decrement, want: 1}, {function: decrement, want: 0}},
		},
		{
			name:  "delete on a missing user: zero, document created",
			steps: []step{{function: decrement, want: 0}},
		},
		{
			name:    "delete on a user without a count: zero",
			initial: map[string]any{"displayName": "Ada"},
			steps:   []step{{function: decrement, want: 0}},
		},
		{
			name:    "never below zero",
			initial: map[string]any{postCountField: 0},
			steps:   []step{{function: decrement, want: 0}, {function: decrement, want: 0}, {function: increment, created: true, want: 1}},
		},
		{
			name:    "delete arrives before its create",
			initial: map[string]any{postCountField: 3},
			steps: []step{
				{function: decrement, post: "late", want: 2}, // taken as a post from before: owed
				{function: increment, created: true, post: "late", want: 3},
			},
		},
		{
			name:    "delete before its create at zero",
			initial: map[string]any{postCountField: 0},
			steps: []step{
				{function: decrement, post: "late", want: 0},
				{function: increment, created: true, post: "late", want: 0},
			},
		},
		{
			name: "a post ID used again",
			steps: []step{
				{function: increment, created: true, post: "p", want: 1},
				{function: decrement, post: "p", want: 0},
				{function: increment, created: true, post: "p", want: 1},
				{function: increment, created: true, post: "q", want: 2},
				{function: decrement, post: "p", want: 1},
			},
		},
		{
			name: "redeliveries change nothing",
			steps: []step{
				{function: increment, created: true, want: 1},
				{function: increment, redeliver: true, want: 1},
				{function: increment, created: true, want: 2},
				{function: decrement, post: "p0", want: 1},
				{function: decrement, redeliver: true, want: 1},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			h := newHarness(t, nil)
			if tt.initial != nil {
				h.setDocs(map[string]map[string]any{"users/ada": tt.initial})
			}
			var prev string
			for i, s := range tt.steps {
				var eventID string
				var err error
				var line map[string]any
				post := s.post
				if post == "" && s.created {
					post = fmt.Sprintf("p%d", i)
				} else if post == "" {
					post = "from-before"
				}
				if s.redeliver {
					e := h.created("ada", post, "t")
					if s.function == decrement {
						e = h.deleted("ada", post)
					}
					e.SetID(prev)
					eventID = prev
					err, line = h.invoke(context.Background(), s.function, e)
					if err == nil {
						expectLine(t, line, triggeronce.OutcomeDuplicate, "INFO", 0, 0)
					}
				} else {
					e := h.deleted("ada", post)
					if s.created {
						e = h.created("ada", post, "t")
					}
					eventID = e.ID()
					err, line = h.invoke(context.Background(), s.function, e)
					if err == nil {
						expectLine(t, line, triggeronce.OutcomeExecuted, "INFO", 0, 0)
					}
				}
				if err != nil {
					t.Fatalf("step %d: %v", i, err)
				}
				prev = eventID
				got, exists := postCount(t, h.env.Client, "ada")
				if !exists || got != s.want {
					t.Fatalf("step %d (%s): postCount %d (document exists %v), want %d", i, s.function, got, exists, s.want)
				}
				if st := h.marker(eventID, s.function); st != "done" {
					t.Fatalf("step %d: marker %q, want done", i, st)
				}
			}
		})
	}
}

// TestSameEventEachFunctionOnce: the three functions share a path and a
// created event goes to two of them: each is deduplicated under its own
// name, so neither skips the other's event.
func TestSameEventEachFunctionOnce(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil)
	h.seed(world{
		users:     map[string]string{"ada": "Ada"},
		followers: map[string][]string{"ada": {"f1"}},
		tokens:    map[string][]string{"f1": {"f1-phone"}},
	})
	e := h.created("ada", "p1", "hello")
	for _, name := range []string{push, increment, push, increment} {
		if err, _ := h.invoke(context.Background(), name, e); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
	}
	if got, _ := postCount(t, h.env.Client, "ada"); got != 1 {
		t.Fatalf("postCount %d, want 1", got)
	}
	expectPushes(t, h.fcm, map[string]int{"f1-phone": 1})
	for _, name := range []string{push, increment} {
		if st := h.marker(e.ID(), name); st != "done" {
			t.Fatalf("%s marker %q", name, st)
		}
	}
	if n := len(markers(t, h.env.Client)); n != 2 {
		t.Fatalf("%d markers, want 2", n)
	}
}

// TestWithAuthContextTypes: the ".withAuthContext" variants of the event
// types are the same changes and run the same functions.
func TestWithAuthContextTypes(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil)
	created := h.change(EventCreated+".withAuthContext", "users/ada/posts/p1", postFields("hello"))
	deleted := h.change(EventDeleted+".withAuthContext", "users/ada/posts/p0", nil)
	deleted.Before = postFields("old")
	for _, step := range []struct {
		function string
		change   firestoreeventtest.Change
		want     int64
	}{
		{increment, created, 1}, {increment, created, 1}, {decrement, deleted, 0},
	} {
		e := mustEvent(t, step.change)
		e.SetExtension("authtype", "unauthenticated")
		if err, _ := h.invoke(context.Background(), step.function, e); err != nil {
			t.Fatalf("%s: %v", step.function, err)
		}
		if n, _ := postCount(t, h.env.Client, "ada"); n != step.want {
			t.Fatalf("after %s: postCount %d, want %d", step.function, n, step.want)
		}
	}
}
