package firestorestore

import (
	"context"
	"fmt"
	"math/rand/v2"
	"time"

	"cloud.google.com/go/firestore"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/fireonce/fireonce/shared/triggeronce/driver"
)

// markerWrite is how an atomic run writes the done marker: a create with the
// exists=false precondition, or, to take over an expired claim, an update
// fenced on the update time of the marker it read.
type markerWrite struct {
	prev     *firestore.DocumentSnapshot // nil: create
	attempts int
}

// apply adds the marker write to a transaction or a batch through add.
func (w markerWrite) apply(s *Store, req driver.ClaimRequest,
	create func(*firestore.DocumentRef, any) error,
	update func(*firestore.DocumentRef, []firestore.Update, ...firestore.Precondition) error) error {
	done := fields(req.Key, req.Meta, driver.StateDone, req.Owner, w.attempts, req.Retention)
	if w.prev == nil {
		return create(s.Doc(req.Key), created(done))
	}
	return update(s.Doc(req.Key), asUpdates(done), firestore.LastUpdateTime(w.prev.UpdateTime))
}

// maxAtomicAttempts bounds the commits of one atomic run when the marker
// changes between a failed commit and the read that explains it.
const maxAtomicAttempts = 3

// runAtomic commits the done marker together with an effect's writes through
// commit, which reports whether the effect itself failed (its error is then
// returned unchanged). When the marker stops the commit, nothing is written;
// runAtomic reads the marker to answer Done or InProgress, or takes an
// expired claim over with a fenced update.
func (s *Store) runAtomic(ctx context.Context, req driver.ClaimRequest,
	commit func(markerWrite) (effectFailed bool, err error)) (driver.ClaimResult, error) {
	w := markerWrite{attempts: 1}
	var err error
	for range maxAtomicAttempts {
		var effectFailed bool
		if effectFailed, err = commit(w); err == nil {
			if w.prev == nil {
				return driver.ClaimResult{Status: driver.Claimed, Attempts: 1}, nil
			}
			return driver.ClaimResult{Status: driver.TakenOver, Attempts: w.attempts}, nil
		}
		if effectFailed {
			return driver.ClaimResult{}, err
		}
		if c := status.Code(err); c != codes.AlreadyExists && c != codes.FailedPrecondition && c != codes.NotFound {
			break
		}
		// Did the marker stop the commit, or one of the effect's own
		// preconditions?
		snap, gerr := s.Doc(req.Key).Get(ctx)
		if status.Code(gerr) == codes.NotFound {
			if w.prev == nil {
				break // no marker, so the effect's precondition failed
			}
			w = markerWrite{attempts: 1} // the expired claim was released
			continue
		}
		if gerr != nil {
			return driver.ClaimResult{}, fmt.Errorf("firestorestore: %s: read marker: %w", req.Key, gerr)
		}
		m, derr := decode(snap)
		if derr != nil {
			return driver.ClaimResult{}, derr
		}
		if res, expired := judge(snap, m); !expired {
			return res, nil
		}
		if w.prev != nil && w.prev.UpdateTime.Equal(snap.UpdateTime) {
			break // the marker we were fenced on did not change
		}
		w = markerWrite{prev: snap, attempts: m.Attempts + 1}
	}
	return driver.ClaimResult{}, fmt.Errorf("firestorestore: commit %s with its marker: %w", req.Key, err)
}

// RunTx runs fn in a Firestore transaction whose commit also creates the done
// marker of req.Key with the exists=false precondition: the effect and the
// marker commit atomically, or neither does. The transaction does not read
// the marker (a read would lock it, and concurrent duplicates that all read
// it and then all write it wait on each other's locks); the precondition is
// checked at commit instead.
//
// A commit stopped by the marker writes nothing; RunTx then reads the marker
// and answers Done, or InProgress for another caller's live Claim, or takes
// an expired claim over in a new transaction (TakenOver). A duplicate thus
// calls fn, whose writes are discarded. fn follows the client's
// RunTransaction contract: it may be called more than once, must use the ctx
// and tx it is given, must do all its reads before its writes, and its error
// is returned unchanged.
//
// Round trips of a first delivery: BeginTransaction, fn's reads, Commit.
func (s *Store) RunTx(ctx context.Context, req driver.ClaimRequest, fn func(context.Context, *firestore.Transaction) error) (driver.ClaimResult, error) {
	return s.runAtomic(ctx, req, func(w markerWrite) (bool, error) {
		var fnErr error
		err := s.client.RunTransaction(ctx, func(ctx context.Context, tx *firestore.Transaction) error {
			if fnErr = fn(ctx, tx); fnErr != nil {
				return fnErr
			}
			return w.apply(s, req, tx.Create, tx.Update)
		})
		return fnErr != nil && err == fnErr, err
	})
}

// RunBatch is RunTx for blind writes (sets, updates, deletes, transforms such
// as firestore.Increment) that need no read: fn adds them to a batch that
// also creates the done marker, and the batch commits atomically in one round
// trip. fn may be called again (to take over an expired claim) and must only
// add writes to the batch it is given.
//
// It uses firestore.WriteBatch, which the client deprecates in favour of
// Transaction and BulkWriter: BulkWriter is not atomic, and a transaction
// with only writes still costs BeginTransaction plus Commit. A WriteBatch is
// one atomic Commit, which is exactly what this needs.
func (s *Store) RunBatch(ctx context.Context, req driver.ClaimRequest, fn func(*firestore.WriteBatch) error) (driver.ClaimResult, error) {
	return s.runAtomic(ctx, req, func(w markerWrite) (bool, error) {
		var err error
		for attempt := range maxAbortedRetries + 1 {
			if attempt > 0 {
				if werr := backoff(ctx, attempt); werr != nil {
					return false, err
				}
			}
			//lint:ignore SA1019 the one atomic single-round-trip multi-write (see above).
			b := s.client.Batch()
			if ferr := fn(b); ferr != nil {
				return true, ferr
			}
			if aerr := w.apply(s, req,
				func(ref *firestore.DocumentRef, v any) error { b.Create(ref, v); return nil },
				func(ref *firestore.DocumentRef, u []firestore.Update, p ...firestore.Precondition) error {
					b.Update(ref, u, p...)
					return nil
				}); aerr != nil {
				return false, aerr
			}
			// Aborted means a transaction held a lock on one of the
			// documents (a decrement reading the same counter) and
			// nothing was written: commit again, as RunTransaction does
			// for its own aborts. The marker keeps a repeat harmless.
			if _, err = b.Commit(ctx); status.Code(err) != codes.Aborted {
				return false, err
			}
		}
		return false, err
	})
}

// maxAbortedRetries bounds RunBatch's commits after Aborted.
const maxAbortedRetries = 5

// backoff waits before the attempt-th retry: 50 ms doubling, with jitter.
func backoff(ctx context.Context, attempt int) error {
	d := 50 * time.Millisecond << (attempt - 1)
	d = d/2 + time.Duration(rand.Int64N(int64(d)))
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// HasAlreadyTriggered reports whether a marker exists for key, creating a
// done marker when none does. It is one Commit: a create with the
// exists=false precondition is atomic, so of any number of concurrent callers
// with one key exactly one gets false. (The seed's transaction, read then
// create, gives the same answers in three round trips, and concurrent callers
// that all read the missing marker and then all write it wait on each other's
// locks: on the emulator 50 of them end in "Transaction lock timeout".)
func (s *Store) HasAlreadyTriggered(ctx context.Context, key driver.Key, meta driver.Meta, owner string, retention time.Duration) (bool, error) {
	_, err := s.Doc(key).Create(ctx, created(fields(key, meta, driver.StateDone, owner, 1, retention)))
	switch status.Code(err) {
	case codes.OK:
		return false, nil
	case codes.AlreadyExists:
		return true, nil
	}
	return false, fmt.Errorf("firestorestore: has %s already triggered: %w", key, err)
}
