package functions

import (
	"context"
	"fmt"

	"cloud.google.com/go/firestore"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// postCountField is the counter on users/{userID}.
const postCountField = "postCount"

func (s *Service) userDoc(d *Deps, inv *invocation) *firestore.DocumentRef {
	return d.Firestore.Collection("users").Doc(inv.params["userID"])
}

// incrementPostCount adds one to the author's postCount. The increment is a
// blind write, so the done marker and the increment go in one atomic batch
// (one round trip, no read, no contention on the user document); a
// duplicate finds the marker and writes nothing.
func (s *Service) incrementPostCount(ctx context.Context, d *Deps, inv *invocation) error {
	key, meta := inv.key("incrementPostCount")
	user := s.userDoc(d, inv)
	outcome, err := d.CountGuard.RunBatch(ctx, key, meta, func(b *firestore.WriteBatch) error {
		b.Set(user, map[string]any{postCountField: firestore.Increment(1)}, firestore.MergeAll)
		return nil
	})
	inv.report.outcome = outcome
	return err
}

// decrementPostCount takes one from the author's postCount, never below
// zero. Clamping needs a read, so it runs as a transaction: the marker read,
// the user read and both writes commit together or not at all.
func (s *Service) decrementPostCount(ctx context.Context, d *Deps, inv *invocation) error {
	key, meta := inv.key("decrementPostCount")
	user := s.userDoc(d, inv)
	outcome, err := d.CountGuard.RunTx(ctx, key, meta, func(ctx context.Context, tx *firestore.Transaction) error {
		snap, err := tx.Get(user)
		if err != nil && status.Code(err) != codes.NotFound {
			return fmt.Errorf("read %s: %w", user.Path, err)
		}
		var count int64
		if snap != nil && snap.Exists() {
			if v, err := snap.DataAt(postCountField); err == nil {
				n, ok := v.(int64)
				if !ok {
					// A wrong type can only come from outside the rules;
					// reset it rather than fail every retry.
					n = 0
				}
				count = n
			}
		}
		return tx.Set(user, map[string]any{postCountField: max(count-1, 0)}, firestore.MergeAll)
	})
	inv.report.outcome = outcome
	return err
}
