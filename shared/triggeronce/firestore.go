package triggeronce

import (
	"context"
	"fmt"

	"cloud.google.com/go/firestore"

	"github.com/fireonce/fireonce/shared/triggeronce/driver"
	"github.com/fireonce/fireonce/shared/triggeronce/firestorestore"
)

// NewFirestore returns a Guard on the Firestore store, with markers in
// opts.Collection (default "triggerEvents") of client's database.
func NewFirestore(client *firestore.Client, opts *Options) *Guard {
	var coll string
	if opts != nil {
		coll = opts.Collection
	}
	return New(firestorestore.New(client, &firestorestore.Options{Collection: coll}), opts)
}

// HasAlreadyTriggered reports whether eventID was already seen by
// functionName, marking it seen (a done marker at triggerEvents/{Key.ID()})
// when it was not: of any number of concurrent callers with one key, exactly
// one gets false. An empty eventID or functionName is an error wrapping
// ErrInvalidKey.
//
// The seed wrote this as a transaction (read the marker, create it if
// missing). Here it is one atomic Commit, a create with the exists=false
// precondition: the same answers in one round trip instead of three, and
// without the transaction's lock on the marker, on which 50 concurrent
// callers end in "Transaction lock timeout" on the emulator.
//
// It is the seed approach's primitive, kept for compatibility. It marks the
// event before the effect runs, so an effect that then fails is lost: every
// retry answers true. Prefer Guard.Run (external effects) or Guard.RunTx and
// Guard.RunBatch (effects inside Firestore).
func HasAlreadyTriggered(ctx context.Context, client *firestore.Client, eventID, functionName string) (bool, error) {
	key := Key{EventID: eventID, Function: functionName}
	if err := validate(key); err != nil {
		return false, err
	}
	return firestorestore.New(client, nil).HasAlreadyTriggered(ctx, key, Meta{}, randomOwner(), DefaultRetention)
}

// firestoreStore is what RunTx and RunBatch need of a store.
type firestoreStore interface {
	RunTx(context.Context, driver.ClaimRequest, func(context.Context, *firestore.Transaction) error) (driver.ClaimResult, error)
	RunBatch(context.Context, driver.ClaimRequest, func(*firestore.WriteBatch) error) (driver.ClaimResult, error)
}

// RunTx runs fn exactly once for key: the marker check, fn's writes and the
// done marker commit in one Firestore transaction, so there is no window in
// which the effect is committed and the marker is not, or the other way round.
//
// The transaction does not read the marker (a read would lock it, and
// concurrent duplicates would wait on each other's locks): the done marker
// is created with the exists=false precondition, checked at commit, so a
// duplicate's commit fails and writes nothing. fn does all its reads before
// its writes (Firestore wants every read before any write). fn follows
// firestore.Client.RunTransaction's contract: it may run more than once when
// the transaction is retried (only the committed run takes effect), it must
// use the ctx and tx it is given, and it must have no effect outside tx. A
// duplicate delivery also calls fn, and discards its writes.
//
// Outcomes: OutcomeExecuted; OutcomeDuplicate (done marker, nothing written);
// OutcomeInProgress when a Run on the same key holds a live lease (see
// InProgressPolicy); OutcomeTakenOver when such a lease had expired;
// OutcomeReleased with fn's error wrapped (nothing committed); OutcomeFailed
// on store errors. A Guard on a store other than Firestore returns
// ErrNotFirestore.
//
// A first delivery costs BeginTransaction, fn's reads and Commit: the guard
// adds no round trip to the transaction. For blind writes (no reads, e.g.
// firestore.Increment) RunBatch gives the same guarantee in one round trip
// (Commit) instead of two, since the Go client always begins a transaction
// with an RPC of its own.
func (g *Guard) RunTx(ctx context.Context, key Key, meta Meta, fn func(context.Context, *firestore.Transaction) error) (Outcome, error) {
	var fnErr error
	return g.runAtomic(ctx, key, meta, &fnErr, func(fs firestoreStore, req driver.ClaimRequest) (driver.ClaimResult, error) {
		return fs.RunTx(ctx, req, func(ctx context.Context, tx *firestore.Transaction) error {
			fnErr = fn(ctx, tx)
			return fnErr
		})
	})
}

// RunBatch runs fn exactly once for key, like RunTx, for effects made only of
// blind writes: fn adds them to a batch that also creates the done marker
// with the exists=false precondition, and the batch commits atomically in
// one round trip. When the marker exists, nothing of the batch is written.
// fn may be called again (when the marker was released or expired between
// attempts) and must only add writes to the batch it is given.
//
// Use RunBatch when the effect needs no read (a counter's
// firestore.Increment); use RunTx when it does (a counter that must not go
// below zero). Outcomes are those of RunTx.
func (g *Guard) RunBatch(ctx context.Context, key Key, meta Meta, fn func(*firestore.WriteBatch) error) (Outcome, error) {
	var fnErr error
	return g.runAtomic(ctx, key, meta, &fnErr, func(fs firestoreStore, req driver.ClaimRequest) (driver.ClaimResult, error) {
		return fs.RunBatch(ctx, req, func(b *firestore.WriteBatch) error {
			fnErr = fn(b)
			return fnErr
		})
	})
}

// runAtomic maps the result of a store's atomic run to an outcome. *fnErr
// is the error of the effect's last call, set by run.
func (g *Guard) runAtomic(ctx context.Context, key Key, meta Meta, fnErr *error,
	run func(firestoreStore, driver.ClaimRequest) (driver.ClaimResult, error)) (Outcome, error) {
	if err := validate(key); err != nil {
		return g.report(ctx, key, OutcomeFailed, 0, err)
	}
	fs, ok := g.store.(firestoreStore)
	if !ok {
		return g.report(ctx, key, OutcomeFailed, 0, fmt.Errorf("%w (store %T)", ErrNotFirestore, g.store))
	}
	res, err := run(fs, g.request(key, meta))
	switch {
	case err != nil && *fnErr != nil && err == *fnErr:
		return g.report(ctx, key, OutcomeReleased, 0, fmt.Errorf("triggeronce: %s: %w", key, err))
	case err != nil:
		return g.report(ctx, key, OutcomeFailed, 0, fmt.Errorf("triggeronce: %s: %w", key, err))
	case res.Status == driver.TakenOver:
		return g.report(ctx, key, OutcomeTakenOver, res.Attempts, nil)
	case res.Status == driver.Claimed:
		return g.report(ctx, key, OutcomeExecuted, res.Attempts, nil)
	}
	return g.notOwned(ctx, key, res)
}
