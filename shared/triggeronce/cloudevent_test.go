package triggeronce_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"

	"github.com/cloudevents/sdk-go/v2/event"
	"google.golang.org/api/iterator"

	"github.com/fireonce/fireonce/shared/triggeronce"
)

func newEvent(id string) event.Event {
	e := event.New()
	e.SetID(id)
	e.SetType("google.cloud.firestore.document.v1.created")
	e.SetSource("//firestore.googleapis.com/projects/demo/databases/(default)")
	e.SetSubject("documents/users/u1/posts/p1")
	return e
}

func TestCloudEvent(t *testing.T) {
	t.Parallel()
	g, env, _ := newGuard(t, nil)
	ctx := testCtx(t)

	t.Run("DuplicatesRunOncePerFunction", func(t *testing.T) {
		var push, count atomic.Int32
		pushFn := triggeronce.CloudEvent(g, "sendPostNotification", func(context.Context, event.Event) error { push.Add(1); return nil })
		countFn := triggeronce.CloudEvent(g, "incrementPostCount", func(context.Context, event.Event) error { count.Add(1); return nil })
		e := newEvent(newEventID())
		for range 3 {
			for _, fn := range []func(context.Context, event.Event) error{pushFn, countFn} {
				if err := fn(ctx, e); err != nil {
					t.Fatalf("delivery: %v", err)
				}
			}
		}
		if push.Load() != 1 || count.Load() != 1 {
			t.Fatalf("handlers ran %d and %d times, want once each", push.Load(), count.Load())
		}
		snap, err := env.Client.Collection("triggerEvents").Doc(triggeronce.Key{EventID: e.ID(), Function: "sendPostNotification"}.ID()).Get(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if d := snap.Data(); d["eventType"] != e.Type() || d["subject"] != e.Subject() {
			t.Errorf("marker meta = %v, %v; want the event's type and subject", d["eventType"], d["subject"])
		}
	})

	t.Run("FailureIsRetried", func(t *testing.T) {
		errPush := errors.New("push failed")
		var calls int
		fn := triggeronce.CloudEvent(g, "sendPostNotification", func(context.Context, event.Event) error {
			calls++
			if calls == 1 {
				return errPush
			}
			return nil
		})
		e := newEvent(newEventID())
		if err := fn(ctx, e); !errors.Is(err, errPush) {
			t.Fatalf("first delivery = %v, want the handler's error (so the platform retries)", err)
		}
		if err := fn(ctx, e); err != nil || calls != 2 {
			t.Fatalf("retry = %v after %d calls, want nil after 2", err, calls)
		}
		if err := fn(ctx, e); err != nil || calls != 2 {
			t.Fatalf("duplicate after success = %v after %d calls, want nil after 2", err, calls)
		}
	})

	t.Run("ConcurrentDuplicateIsRetried", func(t *testing.T) {
		e := newEvent(newEventID())
		inside, leave := make(chan struct{}), make(chan struct{})
		fn := triggeronce.CloudEvent(g, "sendPostNotification", func(context.Context, event.Event) error {
			close(inside)
			<-leave
			return nil
		})
		first := make(chan error, 1)
		go func() { first <- fn(ctx, e) }()
		<-inside
		if err := fn(ctx, e); !errors.Is(err, triggeronce.ErrInProgress) {
			t.Errorf("concurrent duplicate = %v, want ErrInProgress", err)
		}
		close(leave)
		if err := <-first; err != nil {
			t.Fatal(err)
		}
	})

	t.Run("NoIDIsDroppedWithoutMarker", func(t *testing.T) {
		fn := triggeronce.CloudEvent(g, "noIDs", func(context.Context, event.Event) error {
			t.Error("handler ran for an event without an ID")
			return nil
		})
		if err := fn(ctx, newEvent("")); err != nil {
			t.Fatalf("event without an ID = %v, want nil (dropped)", err)
		}
		it := env.Client.Collection("triggerEvents").Where("function", "==", "noIDs").Documents(ctx)
		defer it.Stop()
		if _, err := it.Next(); err != iterator.Done {
			t.Fatalf("an event without an ID left a marker (%v)", err)
		}
	})
}
