package functions

import (
	"context"
	"fmt"
	"time"

	"cloud.google.com/go/firestore"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/fireonce/fireonce/shared/triggeronce"
)

// postCountField is the counter on users/{userID}.
const postCountField = "postCount"

// ledgerCollection, under users/{userID}, keeps one document per post that
// says what the post's events did to postCount, because events are not
// ordered: a post's deleted event can arrive before its created event, and a
// post ID can be used again. Fields: creates and deletes (events applied),
// debt (decrements made for deletes of posts never counted: a post from
// before these functions, or one whose create is still on its way) and, once
// the post is gone, expireAt for the TTL policy (firestore.indexes.json).
// Clients cannot read or write it (firestore.rules denies what it does not
// allow).
const ledgerCollection = "postLedger"

// ledgerRetention keeps a gone post's ledger as long as events of it may
// still arrive (the guard's marker retention).
const ledgerRetention = triggeronce.DefaultRetention

type ledger struct {
	Creates int64 `firestore:"creates"`
	Deletes int64 `firestore:"deletes"`
	Debt    int64 `firestore:"debt"`
}

// counted reports whether postCount includes the post.
func (l ledger) counted() bool { return l.Creates > l.Deletes }

func (l ledger) fields() map[string]any {
	f := map[string]any{"creates": l.Creates, "deletes": l.Deletes, "debt": l.Debt}
	if !l.counted() {
		f["expireAt"] = time.Now().Add(ledgerRetention)
	}
	return f
}

func (s *Service) userDoc(d *Deps, inv *invocation) *firestore.DocumentRef {
	return d.Firestore.Collection("users").Doc(inv.params["userID"])
}

func (s *Service) ledgerDoc(d *Deps, inv *invocation) *firestore.DocumentRef {
	return s.userDoc(d, inv).Collection(ledgerCollection).Doc(inv.params["postID"])
}

// incrementPostCount adds one to the author's postCount, exactly once per
// event. A post's first create, the usual case, needs no read: the done
// marker, the post's new ledger (created with the exists=false precondition)
// and a blind increment go in one atomic batch, one round trip, with no lock
// on the user document. When the ledger exists (the post's delete came
// first, or its ID is used again) the batch writes nothing and the event is
// applied in a transaction that reads the ledger.
func (s *Service) incrementPostCount(ctx context.Context, d *Deps, inv *invocation) error {
	key, meta := inv.key("incrementPostCount")
	user, led := s.userDoc(d, inv), s.ledgerDoc(d, inv)
	outcome, err := d.CountGuard.RunBatch(ctx, key, meta, func(b *firestore.WriteBatch) error {
		b.Create(led, ledger{Creates: 1}.fields())
		b.Set(user, map[string]any{postCountField: firestore.Increment(1)}, firestore.MergeAll)
		return nil
	})
	if outcome == triggeronce.OutcomeFailed && status.Code(err) == codes.AlreadyExists {
		outcome, err = d.CountGuard.RunTx(ctx, key, meta, func(ctx context.Context, tx *firestore.Transaction) error {
			l, err := readLedger(tx, led)
			if err != nil {
				return err
			}
			was := l.counted()
			l.Creates++
			delta := int64(0)
			switch {
			case l.counted() && !was:
				delta = 1
			case !l.counted() && l.Debt > 0:
				// A delete of this post came first and took one off for
				// it; the post is gone, so give that one back.
				delta, l.Debt = 1, l.Debt-1
			}
			return writeLedger(tx, user, led, l, delta)
		})
	}
	inv.report.outcome = outcome
	return err
}

// decrementPostCount takes one from the author's postCount, exactly once per
// event and never below zero. A post that was counted is uncounted without
// reading the user document. A post never counted (created before these
// functions, or whose create has not arrived yet) is taken off if the count
// allows, and the ledger remembers it as debt, which a late create repays.
func (s *Service) decrementPostCount(ctx context.Context, d *Deps, inv *invocation) error {
	key, meta := inv.key("decrementPostCount")
	user, led := s.userDoc(d, inv), s.ledgerDoc(d, inv)
	outcome, err := d.CountGuard.RunTx(ctx, key, meta, func(ctx context.Context, tx *firestore.Transaction) error {
		l, err := readLedger(tx, led)
		if err != nil {
			return err
		}
		was := l.counted()
		l.Deletes++
		delta := int64(0)
		switch {
		case was && !l.counted():
			delta = -1
		case !was:
			n, err := readPostCount(tx, user)
			if err != nil {
				return err
			}
			if n > 0 {
				delta, l.Debt = -1, l.Debt+1
			}
		}
		return writeLedger(tx, user, led, l, delta)
	})
	inv.report.outcome = outcome
	return err
}

func readLedger(tx *firestore.Transaction, ref *firestore.DocumentRef) (ledger, error) {
	var l ledger
	snap, err := tx.Get(ref)
	if status.Code(err) == codes.NotFound {
		return l, nil
	}
	if err != nil {
		return l, fmt.Errorf("read %s: %w", ref.Path, err)
	}
	if err := snap.DataTo(&l); err != nil {
		return l, fmt.Errorf("decode %s: %w", ref.Path, err)
	}
	return l, nil
}

// readPostCount reads postCount (0 when the user or the field is missing, or
// holds something other than an integer).
func readPostCount(tx *firestore.Transaction, user *firestore.DocumentRef) (int64, error) {
	snap, err := tx.Get(user)
	if status.Code(err) == codes.NotFound {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("read %s: %w", user.Path, err)
	}
	v, err := snap.DataAt(postCountField)
	if err != nil {
		return 0, nil
	}
	n, _ := v.(int64)
	return n, nil
}

// writeLedger stores l and changes postCount by delta (creating the field
// at zero when it is missing).
func writeLedger(tx *firestore.Transaction, user, led *firestore.DocumentRef, l ledger, delta int64) error {
	f := l.fields()
	if l.counted() {
		f["expireAt"] = firestore.Delete // the post exists again: keep it
	}
	if err := tx.Set(led, f, firestore.MergeAll); err != nil {
		return err
	}
	return tx.Set(user, map[string]any{postCountField: firestore.Increment(delta)}, firestore.MergeAll)
}
