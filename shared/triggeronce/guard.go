package triggeronce

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/fireonce/fireonce/shared/triggeronce/driver"
)

// Key identifies one (event ID, function name) pair: the unit of
// deduplication. See driver.Key.ID for how it names a marker.
type Key = driver.Key

// Meta is recorded on a marker for people reading it.
type Meta = driver.Meta

var (
	// ErrInvalidKey: the event ID or the function name is empty.
	ErrInvalidKey = errors.New("triggeronce: invalid key: event ID and function name must not be empty")
	// ErrInProgress: another delivery of the event holds a live lease. A
	// retry later finds the marker done, or released, or expired and takes
	// it over. Returned only under InProgressRetry (the default).
	ErrInProgress = errors.New("triggeronce: another delivery of this event is in progress")
	// ErrNotCompleted: fn succeeded but its marker could not be marked done,
	// either because the lease was lost to another caller (the error also
	// wraps driver.ErrNotOwner) or because the store failed. The effect ran;
	// retrying would run it again once the lease expires, so do not retry.
	ErrNotCompleted = errors.New("triggeronce: the effect ran but its marker could not be marked done")
	// ErrNotFirestore: RunTx or RunBatch on a Guard whose store is not
	// Firestore; the effect's writes and the marker must commit together.
	ErrNotFirestore = errors.New("triggeronce: RunTx and RunBatch need a Guard on the Firestore store")
)

// Outcome is what a guarded delivery came to. Its values are the strings
// logged under "outcome".
type Outcome string

const (
	// OutcomeExecuted: the effect ran and its marker is done.
	OutcomeExecuted Outcome = "executed"
	// OutcomeDuplicate: the marker was done; the effect did not run.
	OutcomeDuplicate Outcome = "duplicate"
	// OutcomeInProgress: another delivery holds a live lease; the effect did
	// not run (see InProgressPolicy).
	OutcomeInProgress Outcome = "in_progress"
	// OutcomeTakenOver: a crashed holder's lease had expired; the effect ran
	// under the new claim and its marker is done.
	OutcomeTakenOver Outcome = "taken_over"
	// OutcomeReleased: the effect failed; the claim was released (or, for
	// RunTx and RunBatch, nothing was committed) so a retry runs it again.
	// The error wraps the effect's error.
	OutcomeReleased Outcome = "released"
	// OutcomeFailed: the store failed or the key was invalid, or the effect
	// ran but could not be marked done (ErrNotCompleted).
	OutcomeFailed Outcome = "failed"
)

func (o Outcome) String() string { return string(o) }

// InProgressPolicy says what a delivery does when another one holds a live
// lease on the same key.
type InProgressPolicy int

const (
	// InProgressRetry (the default) returns ErrInProgress, so the platform
	// retries the delivery. This is what keeps an effect from being lost
	// when its holder crashes: the retry of the crashed delivery is itself
	// "in progress" until the lease expires, and only a delivery after the
	// expiry can take over. A concurrent duplicate costs one extra retry,
	// which then finds the marker done.
	InProgressRetry InProgressPolicy = iota
	// InProgressSkip returns nil. Quieter, but if the holder crashes (rather
	// than failing and releasing), every redelivery within its lease is
	// skipped and the platform stops retrying: the effect is lost.
	InProgressSkip
)

const (
	// DefaultLease outlasts the 540 s maximum timeout of an event-driven
	// function, so a live handler never loses its claim.
	DefaultLease = 10 * time.Minute
	// DefaultRetention covers 24 h of redeliveries plus up to 24 h of TTL
	// lag, with room to spare.
	DefaultRetention = 7 * 24 * time.Hour
	// cleanupTimeout bounds Complete and Release, which run even when the
	// caller's context is done.
	cleanupTimeout = 30 * time.Second
)

// Options configure a Guard. A nil *Options means the defaults.
type Options struct {
	// Collection holds the markers (NewFirestore and HasAlreadyTriggered
	// only). Default "triggerEvents".
	Collection string
	// Lease is how long a claim holds before another delivery may take it
	// over. Keep it at least the function's timeout. Default DefaultLease.
	Lease time.Duration
	// Retention is how long markers are kept (their expireAt). Default
	// DefaultRetention.
	Retention time.Duration
	// InProgress is the policy for concurrent deliveries. Default
	// InProgressRetry.
	InProgress InProgressPolicy
	// Logger receives one record per outcome. Default slog.Default().
	Logger *slog.Logger
	// NewOwner returns a token unique to one attempt. Default: 128 random
	// bits in hex. Tests may make owners predictable.
	NewOwner func() string
}

// Guard runs effects at most once per Key on a store. It is safe for
// concurrent use; create one per instance and share it.
type Guard struct {
	store      driver.Store
	lease      time.Duration
	retention  time.Duration
	inProgress InProgressPolicy
	log        *slog.Logger
	newOwner   func() string
}

// New returns a Guard on store.
func New(store driver.Store, opts *Options) *Guard {
	var o Options
	if opts != nil {
		o = *opts
	}
	g := &Guard{store: store, lease: o.Lease, retention: o.Retention,
		inProgress: o.InProgress, log: o.Logger, newOwner: o.NewOwner}
	if g.lease <= 0 {
		g.lease = DefaultLease
	}
	if g.retention <= 0 {
		g.retention = DefaultRetention
	}
	if g.log == nil {
		g.log = slog.Default()
	}
	if g.newOwner == nil {
		g.newOwner = randomOwner
	}
	return g
}

// randomOwner returns 128 random bits as text.
func randomOwner() string { return rand.Text() }

func validate(key Key) error {
	if key.EventID == "" || key.Function == "" {
		return fmt.Errorf("%w (event ID %q, function %q)", ErrInvalidKey, key.EventID, key.Function)
	}
	return nil
}

func (g *Guard) request(key Key, meta Meta) driver.ClaimRequest {
	return driver.ClaimRequest{Key: key, Meta: meta, Owner: g.newOwner(), Lease: g.lease, Retention: g.retention}
}

// Run runs fn at most once for key while fn finishes within the lease, and
// never loses it: a failing fn leaves no marker behind.
//
// It claims key; a done marker returns OutcomeDuplicate and a live lease
// OutcomeInProgress (with ErrInProgress under InProgressRetry) without
// running fn. Otherwise fn runs with a context that ends when the lease
// would, measured from before the claim on this instance's monotonic clock.
// On success the marker is marked done: OutcomeExecuted, or OutcomeTakenOver
// when an expired claim was taken over. When fn fails (or panics) the claim
// is released and the error, wrapping fn's, comes back with OutcomeReleased.
// Store errors come back with OutcomeFailed. When fn succeeded but the lease
// was lost (another delivery took over, and may run fn again) or completion
// failed, Run returns OutcomeFailed with ErrNotCompleted: do not retry.
func (g *Guard) Run(ctx context.Context, key Key, meta Meta, fn func(context.Context) error) (Outcome, error) {
	if err := validate(key); err != nil {
		return g.report(ctx, key, OutcomeFailed, 0, err)
	}
	req := g.request(key, meta)
	start := time.Now()
	res, err := g.store.Claim(ctx, req)
	if err != nil {
		return g.report(ctx, key, OutcomeFailed, 0, fmt.Errorf("triggeronce: claim %s: %w", key, err))
	}
	if !res.Status.Owns() {
		return g.notOwned(ctx, key, res)
	}

	finished := false
	defer func() {
		if !finished { // fn panicked: give the claim back, let the panic go on
			g.release(ctx, key, req.Owner, res.Attempts)
			g.log.ErrorContext(ctx, "triggeronce: effect panicked; claim released",
				g.attrs(key, OutcomeReleased, res.Attempts)...)
		}
	}()
	fnCtx, cancel := context.WithDeadline(ctx, start.Add(g.lease))
	err = fn(fnCtx)
	cancel()
	finished = true

	if err != nil {
		g.release(ctx, key, req.Owner, res.Attempts)
		return g.report(ctx, key, OutcomeReleased, res.Attempts, fmt.Errorf("triggeronce: %s: %w", key, err))
	}
	if err := g.complete(ctx, key, req.Owner); err != nil {
		return g.report(ctx, key, OutcomeFailed, res.Attempts, fmt.Errorf("%w: %s: %w", ErrNotCompleted, key, err))
	}
	if res.Status == driver.TakenOver {
		return g.report(ctx, key, OutcomeTakenOver, res.Attempts, nil)
	}
	return g.report(ctx, key, OutcomeExecuted, res.Attempts, nil)
}

// notOwned reports a claim that found a done marker or a live lease.
func (g *Guard) notOwned(ctx context.Context, key Key, res driver.ClaimResult) (Outcome, error) {
	if res.Status == driver.Done {
		return g.report(ctx, key, OutcomeDuplicate, 0, nil)
	}
	if g.inProgress == InProgressSkip {
		return g.report(ctx, key, OutcomeInProgress, 0, nil)
	}
	return g.report(ctx, key, OutcomeInProgress, 0,
		fmt.Errorf("%w: %s (lease ends %s)", ErrInProgress, key, res.LeaseExpires.UTC().Format(time.RFC3339)))
}

// cleanupContext outlives ctx: a claim must be completed or released even
// when the handler's context is done.
func cleanupContext(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(ctx), cleanupTimeout)
}

// complete marks key done. A store error (a Redis restart, a Firestore
// blip) is retried with backoff within the cleanup timeout, since the effect
// has run and a completion that never lands lets a later delivery run it
// again; a lost lease (driver.ErrNotOwner) is final.
func (g *Guard) complete(ctx context.Context, key Key, owner string) error {
	cctx, cancel := cleanupContext(ctx)
	defer cancel()
	delay := completeBackoff
	for {
		err := g.store.Complete(cctx, key, owner, g.retention)
		if err == nil || errors.Is(err, driver.ErrNotOwner) {
			return err
		}
		t := time.NewTimer(delay)
		select {
		case <-t.C:
		case <-cctx.Done():
			t.Stop()
			return err
		}
		delay = min(2*delay, 5*time.Second)
	}
}

// completeBackoff is the first wait before Complete is tried again.
const completeBackoff = 100 * time.Millisecond

// release gives the claim back. A failure is logged, not returned: the
// effect's error matters more, and the marker expires with its lease.
func (g *Guard) release(ctx context.Context, key Key, owner string, attempts int) {
	cctx, cancel := cleanupContext(ctx)
	defer cancel()
	if err := g.store.Release(cctx, key, owner); err != nil {
		msg := "triggeronce: release failed; the marker is taken over when its lease expires"
		if errors.Is(err, driver.ErrNotOwner) {
			msg = "triggeronce: release refused: the lease was lost to another delivery"
		}
		g.log.WarnContext(ctx, msg, append(g.attrs(key, OutcomeReleased, attempts), slog.Any("error", err))...)
	}
}

func (g *Guard) attrs(key Key, o Outcome, attempts int) []any {
	return []any{
		slog.String("key", key.ID()),
		slog.String("function", key.Function),
		slog.String("eventID", key.EventID),
		slog.String("outcome", string(o)),
		slog.Int("attempts", attempts),
	}
}

// report logs the outcome of a delivery and returns it.
func (g *Guard) report(ctx context.Context, key Key, o Outcome, attempts int, err error) (Outcome, error) {
	attrs := g.attrs(key, o, attempts)
	level := slog.LevelInfo
	switch {
	case errors.Is(err, ErrNotCompleted):
		level = slog.LevelError
		attrs = append(attrs, slog.String("consequence",
			"the effect ran but is not marked done; a delivery after the lease expires runs it again"))
	case o == OutcomeFailed:
		level = slog.LevelError
	case err != nil, o == OutcomeTakenOver:
		level = slog.LevelWarn
	}
	if err != nil {
		attrs = append(attrs, slog.Any("error", err))
	}
	g.log.Log(ctx, level, "triggeronce: "+string(o), attrs...)
	return o, err
}
