package triggeronce_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"cloud.google.com/go/firestore"

	"github.com/fireonce/fireonce/shared/firestoretest"
	"github.com/fireonce/fireonce/shared/triggeronce"
	"github.com/fireonce/fireonce/shared/triggeronce/driver"
)

const concurrency = 50

func TestHasAlreadyTriggered(t *testing.T) {
	t.Parallel()
	env := firestoretest.New(t)
	ctx := testCtx(t)

	t.Run("ConcurrentOneKey", func(t *testing.T) {
		t.Parallel()
		event := newEventID()
		var falses, trues atomic.Int32
		var wg sync.WaitGroup
		errs := make(chan error, concurrency)
		for range concurrency {
			wg.Go(func() {
				seen, err := triggeronce.HasAlreadyTriggered(ctx, env.Client, event, "sendPostNotification")
				switch {
				case err != nil:
					errs <- err
				case seen:
					trues.Add(1)
				default:
					falses.Add(1)
				}
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Errorf("HasAlreadyTriggered: %v", err)
		}
		if falses.Load() != 1 || trues.Load() != concurrency-1 {
			t.Fatalf("%d false and %d true answers, want 1 and %d", falses.Load(), trues.Load(), concurrency-1)
		}
	})

	t.Run("ConcurrentFunctionsOneEvent", func(t *testing.T) {
		t.Parallel()
		event := newEventID()
		var falses atomic.Int32
		var wg sync.WaitGroup
		for i := range concurrency {
			wg.Go(func() {
				seen, err := triggeronce.HasAlreadyTriggered(ctx, env.Client, event, fmt.Sprintf("fn%d", i))
				if err != nil {
					t.Errorf("HasAlreadyTriggered: %v", err)
				} else if !seen {
					falses.Add(1)
				}
			})
		}
		wg.Wait()
		if falses.Load() != concurrency {
			t.Fatalf("%d false answers for %d functions, want all", falses.Load(), concurrency)
		}
	})

	t.Run("InvalidKey", func(t *testing.T) {
		t.Parallel()
		for _, tc := range []struct{ name, event, function string }{
			{"NoEventID", "", "f"},
			{"NoFunction", "e", ""},
			{"Neither", "", ""},
		} {
			t.Run(tc.name, func(t *testing.T) {
				_, err := triggeronce.HasAlreadyTriggered(ctx, env.Client, tc.event, tc.function)
				if !errors.Is(err, triggeronce.ErrInvalidKey) {
					t.Fatalf("err = %v, want ErrInvalidKey", err)
				}
			})
		}
	})
}

func TestRunConcurrentDuplicates(t *testing.T) {
	t.Parallel()
	for _, policy := range []triggeronce.InProgressPolicy{triggeronce.InProgressRetry, triggeronce.InProgressSkip} {
		t.Run(fmt.Sprint("policy", policy), func(t *testing.T) {
			t.Parallel()
			g, _, _ := newGuard(t, &triggeronce.Options{InProgress: policy})
			ctx := testCtx(t)
			key := triggeronce.Key{EventID: newEventID(), Function: "sendPostNotification"}
			var runs atomic.Int32
			outcomes := make([]triggeronce.Outcome, concurrency)
			errs := make([]error, concurrency)
			var wg sync.WaitGroup
			start := make(chan struct{})
			for i := range concurrency {
				wg.Go(func() {
					<-start
					outcomes[i], errs[i] = g.Run(ctx, key, triggeronce.Meta{}, func(context.Context) error {
						runs.Add(1)
						return nil
					})
				})
			}
			close(start)
			wg.Wait()
			if n := runs.Load(); n != 1 {
				t.Fatalf("fn ran %d times, want 1", n)
			}
			count := map[triggeronce.Outcome]int{}
			for i, o := range outcomes {
				count[o]++
				switch {
				case o == triggeronce.OutcomeExecuted || o == triggeronce.OutcomeDuplicate:
					if errs[i] != nil {
						t.Errorf("%s with error %v", o, errs[i])
					}
				case o == triggeronce.OutcomeInProgress:
					if got, want := errors.Is(errs[i], triggeronce.ErrInProgress), policy == triggeronce.InProgressRetry; got != want {
						t.Errorf("in_progress error = %v under policy %d", errs[i], policy)
					}
				default:
					t.Errorf("outcome %s (%v)", o, errs[i])
				}
			}
			if count[triggeronce.OutcomeExecuted] != 1 {
				t.Fatalf("outcomes %v, want exactly one executed", count)
			}
			if o, err := g.Run(ctx, key, triggeronce.Meta{}, func(context.Context) error {
				t.Error("fn ran after completion")
				return nil
			}); o != triggeronce.OutcomeDuplicate || err != nil {
				t.Fatalf("Run after completion = %s, %v; want duplicate", o, err)
			}
		})
	}
}

func TestRunFailingEffectIsReleased(t *testing.T) {
	t.Parallel()
	g, env, _ := newGuard(t, nil)
	ctx := testCtx(t)
	key := triggeronce.Key{EventID: newEventID(), Function: "sendPostNotification"}
	errPush := errors.New("push: unavailable")

	o, err := g.Run(ctx, key, triggeronce.Meta{}, func(context.Context) error { return errPush })
	if o != triggeronce.OutcomeReleased || !errors.Is(err, errPush) {
		t.Fatalf("Run with a failing fn = %s, %v; want released wrapping the fn error", o, err)
	}
	if _, err := env.Client.Collection("triggerEvents").Doc(key.ID()).Get(ctx); err == nil {
		t.Fatalf("a released claim left a marker behind")
	}

	func() {
		defer func() {
			if r := recover(); r != "boom" {
				t.Fatalf("recovered %v, want the fn's panic to propagate", r)
			}
		}()
		g.Run(ctx, key, triggeronce.Meta{}, func(context.Context) error { panic("boom") })
	}()

	var runs int
	o, err = g.Run(ctx, key, triggeronce.Meta{}, func(context.Context) error { runs++; return nil })
	if o != triggeronce.OutcomeExecuted || err != nil || runs != 1 {
		t.Fatalf("Run after release = %s, %v (runs %d); want executed once", o, err, runs)
	}
}

func TestRunInvalidKey(t *testing.T) {
	t.Parallel()
	g := triggeronce.New(failingStore{}, nil)
	for _, key := range []triggeronce.Key{{EventID: "", Function: "f"}, {EventID: "e", Function: ""}} {
		o, err := g.Run(context.Background(), key, triggeronce.Meta{}, func(context.Context) error {
			t.Error("fn ran for an invalid key")
			return nil
		})
		if o != triggeronce.OutcomeFailed || !errors.Is(err, triggeronce.ErrInvalidKey) {
			t.Errorf("Run(%+v) = %s, %v; want failed, ErrInvalidKey", key, o, err)
		}
	}
}

// failingStore is a store that is not Firestore and always fails.
type failingStore struct{}

var errStoreDown = errors.New("store down")

func (failingStore) Claim(context.Context, driver.ClaimRequest) (driver.ClaimResult, error) {
	return driver.ClaimResult{}, errStoreDown
}
func (failingStore) Complete(context.Context, driver.Key, string, time.Duration) error {
	return errStoreDown
}
func (failingStore) Release(context.Context, driver.Key, string) error { return errStoreDown }

func TestStoreErrorsFailClosed(t *testing.T) {
	t.Parallel()
	g := triggeronce.New(failingStore{}, nil)
	key := triggeronce.Key{EventID: "e", Function: "f"}
	o, err := g.Run(context.Background(), key, triggeronce.Meta{}, func(context.Context) error {
		t.Error("fn ran without a claim")
		return nil
	})
	if o != triggeronce.OutcomeFailed || !errors.Is(err, errStoreDown) {
		t.Fatalf("Run on a failing store = %s, %v; want failed wrapping the store error", o, err)
	}
	o, err = g.RunTx(context.Background(), key, triggeronce.Meta{}, func(context.Context, *firestore.Transaction) error {
		t.Error("fn ran on a store that is not Firestore")
		return nil
	})
	if o != triggeronce.OutcomeFailed || !errors.Is(err, triggeronce.ErrNotFirestore) {
		t.Fatalf("RunTx on another store = %s, %v; want failed, ErrNotFirestore", o, err)
	}
	o, err = g.RunBatch(context.Background(), key, triggeronce.Meta{}, func(*firestore.WriteBatch) error { return nil })
	if o != triggeronce.OutcomeFailed || !errors.Is(err, triggeronce.ErrNotFirestore) {
		t.Fatalf("RunBatch on another store = %s, %v; want failed, ErrNotFirestore", o, err)
	}
}

// TestRunTakeover: a holder that outlives its lease is taken over, and what
// it does afterwards (complete or release) is refused without touching the
// new owner's marker.
func TestRunTakeover(t *testing.T) {
	t.Parallel()
	env := firestoretest.New(t)
	stale, _ := guardOn(env.Client, &triggeronce.Options{Lease: time.Second})
	fresh, _ := guardOn(env.Client, nil)
	ctx := testCtx(t)

	// hold runs a Run on the stale guard whose fn blocks until released,
	// ignoring its context like a stuck handler, and returns result.
	hold := func(key triggeronce.Key, result error) (unblock func(), done <-chan error) {
		started, release := make(chan struct{}), make(chan struct{})
		out := make(chan error, 1)
		go func() {
			o, err := stale.Run(ctx, key, triggeronce.Meta{}, func(context.Context) error {
				close(started)
				<-release
				return result
			})
			out <- fmt.Errorf("%s: %w", o, err)
		}()
		<-started
		return func() { close(release) }, out
	}
	takeOver := func(key triggeronce.Key, fn func(context.Context) error) (triggeronce.Outcome, error) {
		var o triggeronce.Outcome
		var err error
		waitFor(t, "the lease to expire", 20*time.Second, func() bool {
			o, err = fresh.Run(ctx, key, triggeronce.Meta{}, fn)
			return o != triggeronce.OutcomeInProgress
		})
		return o, err
	}

	t.Run("StaleCompletionRefused", func(t *testing.T) {
		key := triggeronce.Key{EventID: newEventID(), Function: "sendPostNotification"}
		unblock, staleDone := hold(key, nil)
		var runs int
		o, err := takeOver(key, func(context.Context) error { runs++; return nil })
		if o != triggeronce.OutcomeTakenOver || err != nil || runs != 1 {
			t.Fatalf("Run after the lease expired = %s, %v (runs %d); want taken_over", o, err, runs)
		}
		unblock()
		err = <-staleDone
		if !errors.Is(err, triggeronce.ErrNotCompleted) || !errors.Is(err, driver.ErrNotOwner) {
			t.Fatalf("stale holder's Run = %v; want failed with ErrNotCompleted and ErrNotOwner", err)
		}
		if o, err := fresh.Run(ctx, key, triggeronce.Meta{}, func(context.Context) error { return nil }); o != triggeronce.OutcomeDuplicate {
			t.Fatalf("Run after takeover completed = %s, %v; want duplicate", o, err)
		}
	})

	t.Run("StaleReleaseRefused", func(t *testing.T) {
		key := triggeronce.Key{EventID: newEventID(), Function: "sendPostNotification"}
		errStale := errors.New("stale effect failed")
		unblockStale, staleDone := hold(key, errStale)
		// The new owner holds its claim while the stale one fails.
		newStarted, newRelease := make(chan struct{}), make(chan struct{})
		newDone := make(chan error, 1)
		go func() {
			o, err := takeOver(key, func(context.Context) error {
				close(newStarted)
				<-newRelease
				return nil
			})
			if o != triggeronce.OutcomeTakenOver {
				err = fmt.Errorf("outcome %s, want taken_over: %v", o, err)
			}
			newDone <- err
		}()
		<-newStarted
		unblockStale()
		if err := <-staleDone; !errors.Is(err, errStale) || !strings.HasPrefix(err.Error(), "released:") {
			t.Fatalf("stale Run = %v, want released with its error", err)
		}
		// The new owner's marker survived the stale release.
		if o, err := fresh.Run(ctx, key, triggeronce.Meta{}, func(context.Context) error {
			t.Error("ran while the new owner holds the key")
			return nil
		}); o != triggeronce.OutcomeInProgress {
			t.Fatalf("Run during the new owner's lease = %s, %v; want in_progress", o, err)
		}
		close(newRelease)
		if err := <-newDone; err != nil {
			t.Fatalf("new owner: %v", err)
		}
		if o, _ := fresh.Run(ctx, key, triggeronce.Meta{}, func(context.Context) error { return nil }); o != triggeronce.OutcomeDuplicate {
			t.Fatalf("Run after the new owner completed = %s, want duplicate", o)
		}
	})
}

func TestRunTxCounter(t *testing.T) {
	t.Parallel()
	const events, duplicates = 20, 5
	cases := []struct {
		name string
		run  func(g *triggeronce.Guard, ctx context.Context, key triggeronce.Key, counter *firestore.DocumentRef) (triggeronce.Outcome, error)
	}{
		{"RunTx", func(g *triggeronce.Guard, ctx context.Context, key triggeronce.Key, counter *firestore.DocumentRef) (triggeronce.Outcome, error) {
			return g.RunTx(ctx, key, triggeronce.Meta{}, func(ctx context.Context, tx *firestore.Transaction) error {
				return tx.Set(counter, map[string]any{"postCount": firestore.Increment(1)}, firestore.MergeAll)
			})
		}},
		{"RunBatch", func(g *triggeronce.Guard, ctx context.Context, key triggeronce.Key, counter *firestore.DocumentRef) (triggeronce.Outcome, error) {
			return g.RunBatch(ctx, key, triggeronce.Meta{}, func(b *firestore.WriteBatch) error {
				b.Set(counter, map[string]any{"postCount": firestore.Increment(1)}, firestore.MergeAll)
				return nil
			})
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			g, env, _ := newGuard(t, nil)
			ctx := testCtx(t)
			counter := env.Client.Doc("users/u1")
			var executed atomic.Int32
			var wg sync.WaitGroup
			for range events {
				key := triggeronce.Key{EventID: newEventID(), Function: "incrementPostCount"}
				for range duplicates {
					wg.Go(func() {
						o, err := tc.run(g, ctx, key, counter)
						switch {
						case o == triggeronce.OutcomeExecuted:
							executed.Add(1)
						case o == triggeronce.OutcomeDuplicate:
						default:
							t.Errorf("outcome %s, %v", o, err)
						}
					})
				}
			}
			wg.Wait()
			snap, err := counter.Get(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if got, _ := snap.DataAt("postCount"); got != int64(events) || executed.Load() != events {
				t.Fatalf("postCount = %v after %d events x %d deliveries (%d executed), want %d", got, events, duplicates, executed.Load(), events)
			}
		})
	}
}

// TestRunTxReadsAndFailures: fn reads before it writes (a counter that must
// not go below zero), a failing fn commits nothing and the next delivery
// runs it.
func TestRunTxReadsAndFailures(t *testing.T) {
	t.Parallel()
	g, env, _ := newGuard(t, nil)
	ctx := testCtx(t)
	counter := env.Client.Doc("users/u2")
	if _, err := counter.Set(ctx, map[string]any{"postCount": 1}); err != nil {
		t.Fatal(err)
	}
	errFail := errors.New("effect failed")
	decrement := func(fail bool) func(context.Context, *firestore.Transaction) error {
		return func(ctx context.Context, tx *firestore.Transaction) error {
			snap, err := tx.Get(counter)
			if err != nil {
				return err
			}
			n, _ := snap.DataAt("postCount")
			if fail {
				return errFail
			}
			if n.(int64) <= 0 {
				return nil
			}
			return tx.Update(counter, []firestore.Update{{Path: "postCount", Value: firestore.Increment(-1)}})
		}
	}
	key := triggeronce.Key{EventID: newEventID(), Function: "decrementPostCount"}
	if o, err := g.RunTx(ctx, key, triggeronce.Meta{}, decrement(true)); o != triggeronce.OutcomeReleased || !errors.Is(err, errFail) {
		t.Fatalf("failing RunTx = %s, %v; want released wrapping the fn error", o, err)
	}
	for want := range []triggeronce.Outcome{triggeronce.OutcomeExecuted, triggeronce.OutcomeDuplicate} {
		o, err := g.RunTx(ctx, key, triggeronce.Meta{}, decrement(false))
		if err != nil || o != []triggeronce.Outcome{triggeronce.OutcomeExecuted, triggeronce.OutcomeDuplicate}[want] {
			t.Fatalf("RunTx #%d = %s, %v", want, o, err)
		}
	}
	// A second event must not take the counter below zero.
	if o, err := g.RunTx(ctx, triggeronce.Key{EventID: newEventID(), Function: "decrementPostCount"}, triggeronce.Meta{}, decrement(false)); o != triggeronce.OutcomeExecuted {
		t.Fatalf("RunTx = %s, %v", o, err)
	}
	snap, err := counter.Get(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if n, _ := snap.DataAt("postCount"); n != int64(0) {
		t.Fatalf("postCount = %v, want 0", n)
	}
}

// TestAtomicRespectsRunClaims: RunTx and RunBatch on a key a Run holds
// answer in_progress and touch nothing.
func TestAtomicRespectsRunClaims(t *testing.T) {
	t.Parallel()
	g, env, _ := newGuard(t, &triggeronce.Options{InProgress: triggeronce.InProgressSkip})
	ctx := testCtx(t)
	key := triggeronce.Key{EventID: newEventID(), Function: "f"}
	counter := env.Client.Doc("users/u3")
	g.Run(ctx, key, triggeronce.Meta{}, func(ctx context.Context) error {
		o, err := g.RunTx(ctx, key, triggeronce.Meta{}, func(ctx context.Context, tx *firestore.Transaction) error {
			return tx.Set(counter, map[string]any{"n": 1})
		})
		if o != triggeronce.OutcomeInProgress || err != nil {
			t.Errorf("RunTx under a live Run claim = %s, %v; want in_progress", o, err)
		}
		o, err = g.RunBatch(ctx, key, triggeronce.Meta{}, func(b *firestore.WriteBatch) error {
			b.Set(counter, map[string]any{"n": 1})
			return nil
		})
		if o != triggeronce.OutcomeInProgress || err != nil {
			t.Errorf("RunBatch under a live Run claim = %s, %v; want in_progress", o, err)
		}
		return nil
	})
	if _, err := counter.Get(ctx); err == nil {
		t.Fatalf("an in_progress RunTx or RunBatch wrote its effect")
	}
}

func TestMarkerAndLogs(t *testing.T) {
	t.Parallel()
	g, env, logs := newGuard(t, &triggeronce.Options{Retention: 48 * time.Hour})
	ctx := testCtx(t)
	key := triggeronce.Key{EventID: newEventID(), Function: "sendPostNotification"}
	meta := triggeronce.Meta{EventType: "google.cloud.firestore.document.v1.created", Subject: "documents/users/u1/posts/p1"}
	ref := env.Client.Collection("triggerEvents").Doc(key.ID())

	g.Run(ctx, key, meta, func(ctx context.Context) error {
		snap, err := ref.Get(ctx)
		if err != nil {
			t.Fatalf("marker while processing: %v", err)
		}
		d := snap.Data()
		if d["state"] != "processing" || d["leaseMillis"] != int64(triggeronce.DefaultLease/time.Millisecond) || d["leaseExpiresAt"] == nil || d["owner"] == "" {
			t.Errorf("processing marker = %v", d)
		}
		return nil
	})
	g.Run(ctx, key, meta, func(context.Context) error { return nil })

	snap, err := ref.Get(ctx)
	if err != nil {
		t.Fatal(err)
	}
	d := snap.Data()
	for field, want := range map[string]any{
		"function": key.Function, "eventID": key.EventID, "eventType": meta.EventType,
		"subject": meta.Subject, "state": "done", "attempts": int64(1),
	} {
		if d[field] != want {
			t.Errorf("marker %s = %v, want %v", field, d[field], want)
		}
	}
	for _, field := range []string{"owner", "createdAt", "updatedAt", "expireAt"} {
		if d[field] == nil || d[field] == "" {
			t.Errorf("marker has no %s: %v", field, d)
		}
	}
	for _, field := range []string{"leaseMillis", "leaseExpiresAt"} {
		if _, ok := d[field]; ok {
			t.Errorf("done marker keeps %s", field)
		}
	}
	if exp, ok := d["expireAt"].(time.Time); !ok || exp.Before(time.Now().Add(47*time.Hour)) || exp.After(time.Now().Add(49*time.Hour)) {
		t.Errorf("expireAt = %v, want about now + 48h", d["expireAt"])
	}

	recs := logs.Lines(t)
	var outcomes []string
	for _, r := range recs {
		if r["eventID"] != key.EventID || r["function"] != key.Function || r["key"] != key.ID() || r["attempts"] == nil {
			t.Errorf("log record without the key's attributes: %v", r)
		}
		outcomes = append(outcomes, fmt.Sprint(r["outcome"]))
	}
	if fmt.Sprint(outcomes) != "[executed duplicate]" {
		t.Errorf("logged outcomes %v, want [executed duplicate]", outcomes)
	}
}

// flakyCompleteStore owns every claim and fails the first failures
// completions, as a store does while it restarts.
type flakyCompleteStore struct {
	mu        sync.Mutex
	failures  int
	completes int
}

func (s *flakyCompleteStore) Claim(context.Context, driver.ClaimRequest) (driver.ClaimResult, error) {
	return driver.ClaimResult{Status: driver.Claimed, Attempts: 1}, nil
}

func (s *flakyCompleteStore) Complete(context.Context, driver.Key, string, time.Duration) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.completes++
	if s.completes <= s.failures {
		return errStoreDown
	}
	return nil
}

func (s *flakyCompleteStore) Release(context.Context, driver.Key, string) error { return nil }

// TestCompleteRetriedThroughStoreErrors: the effect ran, so a completion the
// store refuses for a while is tried again until it lands.
func TestCompleteRetriedThroughStoreErrors(t *testing.T) {
	t.Parallel()
	store := &flakyCompleteStore{failures: 3}
	g := triggeronce.New(store, nil)
	runs := 0
	o, err := g.Run(context.Background(), triggeronce.Key{EventID: "e", Function: "f"}, triggeronce.Meta{},
		func(context.Context) error { runs++; return nil })
	if o != triggeronce.OutcomeExecuted || err != nil || runs != 1 {
		t.Fatalf("Run = %s, %v after %d runs; want executed once", o, err, runs)
	}
	if store.completes != 4 {
		t.Fatalf("%d completions, want 3 refused and the 4th landing", store.completes)
	}
}
