package firestorestore

import (
	"context"
	"fmt"
	"time"

	"cloud.google.com/go/firestore"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/fireonce/fireonce/shared/triggeronce/driver"
)

// RunTx runs fn in a Firestore transaction that first reads the marker of
// req.Key and commits a done marker together with fn's writes: the effect and
// the marker commit atomically, or neither does.
//
// A done marker answers Done and a processing marker under a live lease
// (another caller's Claim) answers InProgress, both without calling fn. A
// missing marker answers Claimed, an expired one TakenOver, once the commit
// succeeded. fn follows the client's RunTransaction contract: it may be called
// more than once, must use the ctx and tx it is given, must do all its reads
// before its writes, and its error is returned unchanged.
//
// Round trips: BeginTransaction, the marker read, fn's reads, Commit.
func (s *Store) RunTx(ctx context.Context, req driver.ClaimRequest, fn func(context.Context, *firestore.Transaction) error) (driver.ClaimResult, error) {
	ref := s.Doc(req.Key)
	var res driver.ClaimResult
	var fnErr error
	err := s.client.RunTransaction(ctx, func(ctx context.Context, tx *firestore.Transaction) error {
		res, fnErr = driver.ClaimResult{}, nil
		snap, err := tx.Get(ref)
		attempts := 1
		switch {
		case status.Code(err) == codes.NotFound:
		case err != nil:
			return err
		default:
			m, err := decode(snap)
			if err != nil {
				return err
			}
			var expired bool
			if res, expired = judge(snap, m); !expired {
				return nil
			}
			attempts = m.Attempts + 1
		}
		if fnErr = fn(ctx, tx); fnErr != nil {
			return fnErr
		}
		done := fields(req.Key, req.Meta, driver.StateDone, req.Owner, attempts, req.Retention)
		if attempts == 1 {
			res = driver.ClaimResult{Status: driver.Claimed, Attempts: 1}
			return tx.Create(ref, created(done))
		}
		res = driver.ClaimResult{Status: driver.TakenOver, Attempts: attempts}
		return tx.Update(ref, asUpdates(done))
	})
	if err != nil {
		if fnErr != nil && err == fnErr {
			return driver.ClaimResult{}, err
		}
		return driver.ClaimResult{}, fmt.Errorf("firestorestore: run transaction for %s: %w", req.Key, err)
	}
	return res, nil
}

// maxBatchAttempts bounds RunBatch's retries when the marker changes between
// its commit and its read.
const maxBatchAttempts = 3

// RunBatch is RunTx for blind writes (sets, updates, deletes, field
// transforms such as firestore.Increment) that need no read: fn adds its
// writes to a batch that also creates a done marker with the exists=false
// precondition, and the batch commits atomically in one round trip. When the
// marker exists the whole batch fails and nothing is written; RunBatch then
// reads the marker to answer Done or InProgress, or, when it is missing again
// or its lease expired, builds a new batch (calling fn again) fenced on what
// it read. fn must only add writes to the batch it is given.
//
// It uses firestore.WriteBatch, deprecated by the client in favour of
// Transaction and BulkWriter: BulkWriter is not atomic, and a transaction
// with only writes still costs BeginTransaction plus Commit. A WriteBatch is
// one atomic Commit, which is exactly what this needs.
func (s *Store) RunBatch(ctx context.Context, req driver.ClaimRequest, fn func(*firestore.WriteBatch) error) (driver.ClaimResult, error) {
	ref := s.Doc(req.Key)
	var prev *firestore.DocumentSnapshot // an expired marker to take over
	var prevAttempts int
	var err error
	for range maxBatchAttempts {
		//lint:ignore SA1019 the one atomic single-round-trip multi-write (see above).
		b := s.client.Batch()
		res := driver.ClaimResult{Status: driver.Claimed, Attempts: 1}
		if prev == nil {
			b.Create(ref, created(fields(req.Key, req.Meta, driver.StateDone, req.Owner, 1, req.Retention)))
		} else {
			res = driver.ClaimResult{Status: driver.TakenOver, Attempts: prevAttempts + 1}
			done := fields(req.Key, req.Meta, driver.StateDone, req.Owner, res.Attempts, req.Retention)
			b.Update(ref, asUpdates(done), firestore.LastUpdateTime(prev.UpdateTime))
		}
		if ferr := fn(b); ferr != nil {
			return driver.ClaimResult{}, ferr
		}
		if _, err = b.Commit(ctx); err == nil {
			return res, nil
		}
		if c := status.Code(err); c != codes.AlreadyExists && c != codes.FailedPrecondition && c != codes.NotFound {
			break
		}
		// The marker (or one of fn's preconditions) stopped the batch.
		snap, gerr := ref.Get(ctx)
		switch {
		case status.Code(gerr) == codes.NotFound:
			prev = nil
			continue
		case gerr != nil:
			return driver.ClaimResult{}, fmt.Errorf("firestorestore: batch for %s: read marker: %w", req.Key, gerr)
		}
		m, derr := decode(snap)
		if derr != nil {
			return driver.ClaimResult{}, derr
		}
		if res, expired := judge(snap, m); !expired {
			return res, nil
		}
		prev, prevAttempts = snap, m.Attempts
	}
	return driver.ClaimResult{}, fmt.Errorf("firestorestore: batch for %s: %w", req.Key, err)
}

// HasAlreadyTriggered reports whether a marker exists for key, creating a
// done marker when none does, in one transaction: of any number of concurrent
// callers with one key exactly one gets false. It is the seed approach's
// primitive; see triggeronce.HasAlreadyTriggered for why Guard is better.
func (s *Store) HasAlreadyTriggered(ctx context.Context, key driver.Key, meta driver.Meta, owner string, retention time.Duration) (bool, error) {
	ref := s.Doc(key)
	var triggered bool
	err := s.client.RunTransaction(ctx, func(ctx context.Context, tx *firestore.Transaction) error {
		_, err := tx.Get(ref)
		if status.Code(err) != codes.NotFound {
			triggered = err == nil
			return err
		}
		triggered = false
		return tx.Create(ref, created(fields(key, meta, driver.StateDone, owner, 1, retention)))
	})
	if err != nil {
		return false, fmt.Errorf("firestorestore: has %s already triggered: %w", key, err)
	}
	return triggered, nil
}
