package triggeronce_test

import (
	"context"
	"fmt"
	"testing"

	"cloud.google.com/go/firestore"

	"github.com/fireonce/fireonce/shared/firestoretest"
	"github.com/fireonce/fireonce/shared/triggeronce"
)

// TestRoundTrips counts the RPCs of a first and of a duplicate delivery: the
// figures the package doc states. It counts calls, it does not time them.
func TestRoundTrips(t *testing.T) {
	t.Parallel()
	env := firestoretest.New(t)
	client, rpcs := countingClient(t, env)
	g, _ := guardOn(client, &triggeronce.Options{InProgress: triggeronce.InProgressSkip})
	ctx := testCtx(t)
	counter := client.Doc("users/u1")
	increment := map[string]any{"postCount": firestore.Increment(1)}

	cases := []struct {
		name             string
		deliver          func(key triggeronce.Key) error
		first, duplicate []string
	}{
		{
			name: "Unguarded", // the baseline: the effect alone
			deliver: func(triggeronce.Key) error {
				_, err := counter.Set(ctx, increment, firestore.MergeAll)
				return err
			},
			first:     []string{"Commit"},
			duplicate: []string{"Commit"},
		},
		{
			name: "HasAlreadyTriggered",
			deliver: func(key triggeronce.Key) error {
				_, err := triggeronce.HasAlreadyTriggered(ctx, client, key.EventID, key.Function)
				return err
			},
			first:     []string{"Commit"},
			duplicate: []string{"Commit"},
		},
		{
			name: "Run", // around an external effect: no RPC of its own
			deliver: func(key triggeronce.Key) error {
				_, err := g.Run(ctx, key, triggeronce.Meta{}, func(context.Context) error { return nil })
				return err
			},
			first:     []string{"Commit", "Commit"},
			duplicate: []string{"Commit", "BatchGetDocuments"},
		},
		{
			name: "RunTx",
			deliver: func(key triggeronce.Key) error {
				_, err := g.RunTx(ctx, key, triggeronce.Meta{}, func(ctx context.Context, tx *firestore.Transaction) error {
					return tx.Set(counter, increment, firestore.MergeAll)
				})
				return err
			},
			first:     []string{"BeginTransaction", "Commit"},
			duplicate: []string{"BeginTransaction", "Commit", "Rollback", "BatchGetDocuments"},
		},
		{
			name: "RunBatch",
			deliver: func(key triggeronce.Key) error {
				_, err := g.RunBatch(ctx, key, triggeronce.Meta{}, func(b *firestore.WriteBatch) error {
					b.Set(counter, increment, firestore.MergeAll)
					return nil
				})
				return err
			},
			first:     []string{"Commit"},
			duplicate: []string{"Commit", "BatchGetDocuments"},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			key := triggeronce.Key{EventID: newEventID(), Function: "f"}
			rpcs.Take()
			if err := tc.deliver(key); err != nil {
				t.Fatal(err)
			}
			if got := rpcs.Take(); fmt.Sprint(got) != fmt.Sprint(tc.first) {
				t.Errorf("first delivery: %d RPCs %v, want %d %v", len(got), got, len(tc.first), tc.first)
			}
			if err := tc.deliver(key); err != nil {
				t.Fatal(err)
			}
			if got := rpcs.Take(); fmt.Sprint(got) != fmt.Sprint(tc.duplicate) {
				t.Errorf("duplicate delivery: %d RPCs %v, want %d %v", len(got), got, len(tc.duplicate), tc.duplicate)
			}
		})
	}
}
