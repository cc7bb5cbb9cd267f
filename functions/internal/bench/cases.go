package bench

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"cloud.google.com/go/firestore"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/fireonce/fireonce/shared/triggeronce"
)

// Field and collection names as the functions use them.
const (
	postCount = "postCount"
	// seedCollection holds the markers of the seed's transaction (3a), apart
	// from the guard's.
	seedCollection = "seedTriggerEvents"
)

// quiet is how the functions configure their guards: the guard's own log
// records are dropped (each invocation logs one line of its own).
var quiet = &triggeronce.Options{Logger: slog.New(slog.DiscardHandler)}

// seed writes the users the events spread over: a display name, a large
// postCount (so decrements decrement), two followers each with one device
// token. Writes go in batches of 500.
func (e *env) seed(ctx context.Context) error {
	e.users = make([]string, e.cfg.Users)
	for i := range e.users {
		e.users[i] = fmt.Sprintf("u%05d", i)
	}
	users := e.fs.Collection("users")
	var writes []func(*firestore.WriteBatch)
	now := time.Now()
	for i, u := range e.users {
		writes = append(writes, func(b *firestore.WriteBatch) {
			b.Set(users.Doc(u), map[string]any{"displayName": "User " + u, postCount: 1_000_000})
		}, func(b *firestore.WriteBatch) {
			b.Set(users.Doc(u).Collection("fcmTokens").Doc(token(u)), map[string]any{"createdAt": now})
		})
		for _, f := range e.followersOf(i) {
			writes = append(writes, func(b *firestore.WriteBatch) {
				b.Set(users.Doc(u).Collection("followers").Doc(f), map[string]any{"createdAt": now})
			})
		}
	}
	for start := 0; start < len(writes); start += 500 {
		//lint:ignore SA1019 an atomic batch is all a seed needs.
		b := e.fs.Batch()
		for _, w := range writes[start:min(start+500, len(writes))] {
			w(b)
		}
		if _, err := b.Commit(ctx); err != nil {
			return fmt.Errorf("bench: seed users: %w", err)
		}
	}
	e.fsCalls.Take()
	return nil
}

// followersOf returns the two followers of user i: the next two users.
func (e *env) followersOf(i int) []string {
	n := len(e.users)
	return []string{e.users[(i+1)%n], e.users[(i+2)%n]}
}

// followers is how many followers, hence devices, each author has.
const followers = 2

func token(user string) string { return "token-" + user }

// user returns the user of delivery n: a spread over every user (a stride
// coprime with their number visits each once per cycle).
func (e *env) user(n int) *firestore.DocumentRef {
	return e.fs.Collection("users").Doc(e.users[(n*7919)%len(e.users)])
}

func (e *env) key(id string, n int, function string) (triggeronce.Key, triggeronce.Meta) {
	ev := fmt.Sprintf("%s-%s-%d", e.run, id, n)
	return triggeronce.Key{EventID: ev, Function: function},
		triggeronce.Meta{EventType: "google.cloud.firestore.document.v1.created", Subject: "documents/users/x/posts/" + ev}
}

func increment() map[string]any { return map[string]any{postCount: firestore.Increment(1)} }

// decrement has the shape of decrementPostCount's effect: one read in the
// transaction (here the count, clamped at zero), then the write.
func decrement(tx *firestore.Transaction, user *firestore.DocumentRef) error {
	snap, err := tx.Get(user)
	if err != nil && status.Code(err) != codes.NotFound {
		return err
	}
	var count int64
	if snap != nil && snap.Exists() {
		if v, err := snap.DataAt(postCount); err == nil {
			count, _ = v.(int64)
		}
	}
	return tx.Set(user, map[string]any{postCount: max(count-1, 0)}, firestore.MergeAll)
}

// executed turns an outcome other than executed into an error.
func executed(o triggeronce.Outcome, err error) error {
	if err == nil && o != triggeronce.OutcomeExecuted {
		err = fmt.Errorf("outcome %s, want executed", o)
	}
	return err
}

var errDuplicate = errors.New("a first delivery was taken for a duplicate")

// firestoreCases are cases 1 to 4 (5 is the storm, see storm.go).
func (e *env) firestoreCases() []*latencyCase {
	g := triggeronce.NewFirestore(e.fs, quiet)
	c := func(id, name, baseline string, op func(ctx context.Context, n int) error) *latencyCase {
		return &latencyCase{Result: Result{ID: id, Name: name, Backend: "firestore", Baseline: baseline, Unit: "delivery"},
			take: e.fsCalls.Take, op: op, total: e.cfg.Samples, rounds: e.cfg.Rounds}
	}
	return []*latencyCase{
		c("1", "baseline: unguarded postCount increment", "", func(ctx context.Context, n int) error {
			_, err := e.user(n).Set(ctx, increment(), firestore.MergeAll)
			return err
		}),
		c("1t", "unguarded increment in a transaction", "1", func(ctx context.Context, n int) error {
			return e.fs.RunTransaction(ctx, func(ctx context.Context, tx *firestore.Transaction) error {
				return tx.Set(e.user(n), increment(), firestore.MergeAll)
			})
		}),
		c("1d", "baseline: unguarded clamped decrement (transaction)", "", func(ctx context.Context, n int) error {
			return e.fs.RunTransaction(ctx, func(ctx context.Context, tx *firestore.Transaction) error {
				return decrement(tx, e.user(n))
			})
		}),
		c("2a", "increment under RunBatch (incrementPostCount)", "1", func(ctx context.Context, n int) error {
			key, meta := e.key("2a", n, "incrementPostCount")
			return executed(g.RunBatch(ctx, key, meta, func(b *firestore.WriteBatch) error {
				b.Set(e.user(n), increment(), firestore.MergeAll)
				return nil
			}))
		}),
		c("2b", "increment under RunTx", "1", func(ctx context.Context, n int) error {
			key, meta := e.key("2b", n, "incrementPostCount")
			return executed(g.RunTx(ctx, key, meta, func(ctx context.Context, tx *firestore.Transaction) error {
				return tx.Set(e.user(n), increment(), firestore.MergeAll)
			}))
		}),
		c("2c", "clamped decrement under RunTx (decrementPostCount)", "1d", func(ctx context.Context, n int) error {
			key, meta := e.key("2c", n, "decrementPostCount")
			return executed(g.RunTx(ctx, key, meta, func(ctx context.Context, tx *firestore.Transaction) error {
				return decrement(tx, e.user(n))
			}))
		}),
		c("3a", "seed: check-and-mark transaction, then increment", "1", e.markThenIncrement("3a", seedHasAlreadyTriggered)),
		c("3b", "HasAlreadyTriggered (one create), then increment", "1", e.markThenIncrement("3b",
			func(ctx context.Context, fs *firestore.Client, key triggeronce.Key) (bool, error) {
				return triggeronce.HasAlreadyTriggered(ctx, fs, key.EventID, key.Function)
			})),
		c("4", "Guard.Run around a no-op (claim + complete)", "1", func(ctx context.Context, n int) error {
			key, meta := e.key("4", n, "sendPostNotification")
			return executed(g.Run(ctx, key, meta, func(context.Context) error { return nil }))
		}),
	}
}

// seedHasAlreadyTriggered is the seed's primitive as it was written: a
// transaction that reads triggerEvents/{eventId}-{functionName} and creates
// it when missing.
func seedHasAlreadyTriggered(ctx context.Context, client *firestore.Client, key triggeronce.Key) (bool, error) {
	ref := client.Collection(seedCollection).Doc(key.EventID + "-" + key.Function)
	var seen bool
	err := client.RunTransaction(ctx, func(ctx context.Context, tx *firestore.Transaction) error {
		snap, err := tx.Get(ref)
		if err == nil && snap.Exists() {
			seen = true
			return nil
		}
		if status.Code(err) != codes.NotFound {
			return err
		}
		seen = false
		return tx.Create(ref, map[string]any{"createdAt": firestore.ServerTimestamp})
	})
	return seen, err
}

// markThenIncrement is the seed approach for case id: mark the event seen
// with hasTriggered, then increment in a separate write (the window between
// the two is what RunBatch closes).
func (e *env) markThenIncrement(id string, hasTriggered func(context.Context, *firestore.Client, triggeronce.Key) (bool, error)) func(context.Context, int) error {
	return func(ctx context.Context, n int) error {
		key, _ := e.key(id, n, "incrementPostCount")
		seen, err := hasTriggered(ctx, e.fs, key)
		if err == nil && seen {
			err = errDuplicate
		}
		if err != nil {
			return err
		}
		_, err = e.user(n).Set(ctx, increment(), firestore.MergeAll)
		return err
	}
}
